"""A CNN classifier where the CCI tables and COVAR can take one: maps, scores and refusals.

An :class:`~concept_grounding.models.imagenet.ImageNetClassifier` (``efficientnet_lite0``) has
no text tower and no attention, so of :data:`~.explainers.EXPLAINERS` it takes only:

* ``gradcam``: Grad-CAM (Selvaraju et al. 2017) on the last convolutional feature map ``A``
  ``(B, K, h, w)`` for the class logit ``y_c``: ``α_k = mean_ij ∂y_c/∂A_kij``, map
  ``ReLU(Σ_k α_k A_k)`` bilinearly upsampled to the input. With global average pooling and a
  linear head (EfficientNet), this is CAM (Zhou et al. 2016): ``α_k = W_ck / (h w)``;
* ``random``: the seeded floor of :func:`~.baselines.random_maps`.

The others are refused with their reason (:data:`CLASSIFIER_REFUSALS`), row by row, as the
tables refuse a SigLIP. Scores are the class logits restricted to the folder's classes
(:func:`folder_classes`: a folder named by its WordNet id, or a class name equal to an
ImageNet lemma), the classifier's counterpart of zero-shot classification over the folder's
class prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .baselines import random_maps

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from ..models.imagenet import ImageNetClassifier
    from .layouts import ImageFolder

__all__ = [
    "CLASSIFIER_METHODS",
    "CLASSIFIER_REFUSALS",
    "is_classifier",
    "classifier_gradcam",
    "classifier_maps",
    "folder_classes",
    "class_score_fn",
    "classifier_judge",
    "evaluate_classifier_covar",
]

CLASSIFIER_METHODS = ("random", "gradcam")
_NO_TEXT = "a CNN classifier has no CLIP text tower or ViT attention"
#: method -> why a CNN classifier's row is refused
CLASSIFIER_REFUSALS = {
    "cci": f"{_NO_TEXT}: CCI masks a ViT's patch-token keys",
    "grad-eclip": f"{_NO_TEXT}: Grad-ECLIP reads a ViT's last attention block",
    "maskclip": f"{_NO_TEXT}: MaskCLIP projects ViT patch tokens into the text space",
    "rollout": f"{_NO_TEXT}: rollout multiplies a ViT's attention maps",
}


def is_classifier(handle: Any) -> bool:
    """Whether ``handle`` is a classifier (class logits, no text tower) rather than a CLIP handle."""
    return callable(getattr(handle, "logits", None)) and callable(getattr(handle, "feature_maps", None))


def classifier_gradcam(
    classifier: ImageNetClassifier, pixel_values: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """Grad-CAM maps ``(B, H, W)`` (module docstring) of ``targets`` ``(B,)`` ImageNet class indices,
    for the whole batch in one forward and one backward (the images do not interact: BatchNorm in eval)."""
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        maps = classifier.feature_maps(pixel_values)
    with torch.enable_grad():
        maps = maps.detach().requires_grad_(True)
        logits = classifier.model.forward_head(maps)
        score = logits.gather(1, targets.to(logits.device).long()[:, None]).sum()
        (grad,) = torch.autograd.grad(score, maps)
    cam = torch.relu((grad.mean((2, 3), keepdim=True) * maps.detach()).sum(1))
    return F.interpolate(cam[:, None].float(), size=pixel_values.shape[-2:], mode="bilinear", align_corners=False)[:, 0]


def classifier_maps(
    method: str, classifier: ImageNetClassifier, pixel_values: torch.Tensor, targets: torch.Tensor, seed: int = 0
) -> torch.Tensor:
    """``(B, H, W)`` maps of ``method`` (:data:`CLASSIFIER_METHODS`) for ImageNet classes ``targets``."""
    if method == "gradcam":
        return classifier_gradcam(classifier, pixel_values, targets)
    if method == "random":
        return random_maps(None, pixel_values, seed=seed)
    raise ValueError(CLASSIFIER_REFUSALS.get(method, f"method: unknown method {method!r}"))


def folder_classes(data: ImageFolder) -> tuple[list[int], str]:
    """The ImageNet-1k index of each class of ``data`` (by folder WordNet id or class name), or
    ``([], reason)`` naming the first class that is none."""
    from ..models.imagenet import imagenet_index

    folder_of = {int(label): path.parent.name for path, label in zip(data.paths, data.labels)}
    folders = [folder_of.get(k, "") for k in range(len(data.class_names))]
    out = []
    for folder, name in zip(folders, data.class_names):
        index = imagenet_index(folder, name)
        if index is None:
            return [], f"class {name!r} (folder {folder}) is no ImageNet-1k class of this classifier"
        out.append(index)
    return out, ""


def class_score_fn(classifier: ImageNetClassifier, classes: Sequence[int]) -> Callable[[torch.Tensor], torch.Tensor]:
    """``images -> (B, len(classes))`` logits of ``classes`` (the folder's classes, in label order)."""
    import torch

    index = torch.as_tensor(list(classes), dtype=torch.long)

    def score(x: torch.Tensor) -> torch.Tensor:
        return classifier.logits(x)[:, index.to(x.device)]

    return score


# --------------------------------------------------------------------------- COVAR / diagnose by class logits
def classifier_judge(classifier: ImageNetClassifier, classes: Sequence[int], threshold: float | None = None):
    """Fine-Er judge of a classifier: two classes are similar when the cosine of their rows of the
    classifier's last layer (``(C, 1280)`` weights) passes ``threshold`` (``None``: the 90th
    percentile of class pairs, as :class:`~.diagnosis.TextEmbeddingJudge` does with prompts)."""
    import torch

    from .diagnosis import TextEmbeddingJudge

    weights = classifier.model.get_classifier().weight.detach()[torch.as_tensor(list(classes))]
    return TextEmbeddingJudge(weights, threshold=threshold)


def evaluate_classifier_covar(
    classifier: ImageNetClassifier,
    classes: Sequence[int],
    dataset: Any,
    judge: Any = None,
    threshold: float = 0.5,
    batch_size: int = 16,
) -> Any:
    """:func:`~.covar.evaluate_covar` for a classifier: each row (``image``, ``mask``, ``label``,
    ``transform``) is classified by the logits of ``classes`` (the folder's ImageNet classes, in
    label order), the predicted class explained by :func:`classifier_gradcam`, the error split into
    BG-Er / Fine-Er / FG-Er (:func:`~.diagnosis.diagnose`) with the mask through the classifier's
    own resize / crop. Returns a :class:`~.covar.CovarEvaluation`."""
    import numpy as np
    import torch

    from .covar import CovarEvaluation
    from .diagnosis import diagnose, error_shares, foreground_share

    index = torch.as_tensor(list(classes), dtype=torch.long)
    preds, labels, cats, names, shares = [], [], [], [], []
    for start in range(0, len(dataset), batch_size):
        rows = dataset[start : start + batch_size]
        px = classifier.pixels(rows["image"])
        with torch.no_grad():
            pred = classifier.logits(px)[:, index.to(px.device)].argmax(-1).cpu()
        maps = classifier_gradcam(classifier, px, index[pred]).cpu()
        fg = classifier.mask_pixels([np.asarray(m.convert("L")) > 127 for m in rows["mask"]])
        lab = torch.tensor(rows["label"])
        cats += diagnose(maps, fg, pred, lab, judge, threshold)
        shares.append(foreground_share(maps, fg))
        preds.append(pred)
        labels.append(lab)
        names += list(rows["transform"])
    return CovarEvaluation(
        preds=torch.cat(preds),
        labels=torch.cat(labels),
        categories=cats,
        transforms=names,
        fg_share=torch.cat(shares),
        shares=error_shares(cats, names),
    )
