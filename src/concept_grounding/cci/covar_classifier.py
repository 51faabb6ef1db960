"""COVAR with a CNN classifier (``covar --model efficientnet_lite0``): class logits instead of prompts.

The variants are built as for a CLIP (:func:`~.covar.build_covar`); every variant is classified by
the classifier's logits of the folder's ImageNet classes, its predicted class explained by
Grad-CAM and its error split into BG-Er / Fine-Er / FG-Er with the classifier's own class
vectors as the Fine-Er judge (:func:`~.classifier.evaluate_classifier_covar`). The known-truth
checks on the untransformed objects run Grad-CAM and random (the methods a CNN takes):
foreground share and Deletion / Insertion AUCs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UsageError

__all__ = ["ClassifierCovar", "covar_with_classifier"]


@dataclass
class ClassifierCovar:
    """What the covar job reports: ``description`` of the model, per-transform ``shares``,
    ``truth`` per method, the mean foreground share, overlay rows and the evaluation ``ev``."""

    description: str
    shares: dict[str, dict[str, float]]
    truth: dict[str, dict[str, float]]
    fg_share_mean: float
    overlays: list
    ev: Any


def _classes(class_names: Sequence[str]) -> list[int]:
    from ..models.imagenet import imagenet_index

    classes = [imagenet_index("", n) for n in class_names]
    missing = [n for n, c in zip(class_names, classes) if c is None]
    if missing:
        raise UsageError(
            f"class {missing[0]!r} is no ImageNet-1k class of the classifier (give ImageNet names in class_names.txt)",
            argument="--images",
        )
    return classes


def _truth(classifier: Any, classes: list[int], samples: Sequence[Any], steps: int, seed: int) -> dict:
    import torch

    from .classifier import CLASSIFIER_METHODS, class_score_fn, classifier_maps
    from .diagnosis import foreground_share
    from .faithfulness import Replacement, classification_curves

    px = classifier.pixels([_pil(s.image) for s in samples])
    labels = torch.tensor([s.label for s in samples])
    fg = classifier.mask_pixels([s.mask for s in samples])
    score = class_score_fn(classifier, classes)
    result = {}
    for method in CLASSIFIER_METHODS:
        maps = classifier_maps(method, classifier, px, torch.as_tensor(classes)[labels], seed=seed)
        result[{"gradcam": "Grad-CAM"}.get(method, method)] = {
            "foreground_share": float(foreground_share(maps.cpu(), fg).mean()),
            **classification_curves(score, px, maps, labels, steps=steps, replacement=Replacement("blur")).aucs,
        }
    return result


def _pil(image: Any):
    from PIL import Image

    return image if isinstance(image, Image.Image) else Image.fromarray(np.asarray(image))


def _overlays(classifier: Any, classes: list[int], ds: Any, ev: Any, per_object: int) -> list:
    import torch

    from .classifier import classifier_gradcam
    from .plots import overlay

    rows = []
    for i in [i for i in range(len(ds)) if i % per_object < 12][:12]:
        px = classifier.pixels([ds[i]["image"]])
        heat = classifier_gradcam(classifier, px, torch.as_tensor(classes)[ev.preds[i : i + 1]])[0].cpu().numpy()
        shown = ((px[0].permute(1, 2, 0).cpu().numpy() * 0.5 + 0.5) * 255).clip(0, 255).astype(np.uint8)
        mask = classifier.mask_pixels([np.asarray(ds[i]["mask"]) > 127])[0].numpy().astype(np.uint8) * 255
        rows.append([(ev.transforms[i], shown), (ev.categories[i], overlay(shown, heat)), ("mask", mask)])
    return rows


def covar_with_classifier(
    name: str,
    samples: Sequence[Any],
    class_names: Sequence[str],
    ds: Any,
    *,
    per_object: int,
    threshold: float = 0.5,
    judge_threshold: float | None = None,
    steps: int = 10,
    seed: int = 0,
) -> ClassifierCovar:
    """Classify, explain and diagnose COVAR ``ds`` with the classifier ``name`` (module docstring).

    Args:
        name: a name of :data:`~concept_grounding.hub.IMAGENET_CLASSIFIERS`.
        samples: the untransformed objects (``image``, ``mask``, ``label``).
        class_names: ImageNet class names of the labels.
        ds: the COVAR dataset; ``per_object`` its rows per object (variants x backgrounds).
    """
    from ..models.imagenet import load_imagenet_classifier
    from .classifier import classifier_judge, evaluate_classifier_covar

    classes = _classes(class_names)
    classifier = load_imagenet_classifier(name)
    ev = evaluate_classifier_covar(
        classifier, classes, ds, judge=classifier_judge(classifier, classes, judge_threshold), threshold=threshold
    )
    truth = _truth(classifier, classes, samples, steps, seed)
    return ClassifierCovar(
        classifier.description,
        ev.shares,
        truth,
        float(ev.fg_share.mean()),
        _overlays(classifier, classes, ds, ev, per_object),
        ev,
    )
