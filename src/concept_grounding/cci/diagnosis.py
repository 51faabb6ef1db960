"""Three-way error diagnosis: background-driven, fine-grained, other foreground errors.

CVPR 2026 CCI, "Three-way error diagnosis" (docs/cci.md): for a misclassified image,
threshold the importance map of the *predicted* class and compare it with the foreground
and background masks by IoU. More overlap with the background -> **BG-Er**; otherwise a
foreground-driven error, which is **Fine-Er** when a judge finds the predicted and true
classes visually similar, else **FG-Er** (other foreground errors). The paper's judge was
GPT-4o; here the judge is any callable ``judge(pred, true) -> bool``:
:class:`TextEmbeddingJudge` (cosine of class prompt embeddings) or :class:`AttributeJudge`
(cosine of class attribute vectors, e.g. the world's ``BirdWorld().class_attributes``).

Also the world's known-truth checks: :func:`foreground_share` (share of positive importance
inside the mask) and :func:`pointing_game` (the map's maximum lands near a visible part).

Thresholding, *decision*: a pixel is "important" when its value is at least
``threshold * max(map)`` (default 0.5); a map with no positive value selects nothing, and
such an error counts as FG-Er/Fine-Er only if the judge says so (IoU ties go to the
foreground).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch

__all__ = ["TextEmbeddingJudge", "AttributeJudge", "diagnose", "foreground_share", "pointing_game"]

#: per-sample categories
CATEGORIES = ("correct", "BG-Er", "Fine-Er", "FG-Er")


class _CosineJudge:
    """Two classes are "visually similar" when the cosine of their vectors is ``>= threshold``.

    ``threshold=None`` takes the 90th percentile of the off-diagonal similarities: the
    most similar tenth of class pairs count as similar, whatever the vectors' scale.
    """

    def __init__(self, vectors: torch.Tensor | np.ndarray, threshold: float | None) -> None:
        import torch

        v = torch.as_tensor(vectors, dtype=torch.float32)
        if v.ndim != 2:
            raise ValueError(f"vectors: expected (C, dim), got shape {tuple(v.shape)}")
        self.similarity = torch.nn.functional.normalize(v, dim=-1) @ torch.nn.functional.normalize(v, dim=-1).T
        if threshold is None:
            off = ~torch.eye(v.shape[0], dtype=torch.bool)
            threshold = float(torch.quantile(self.similarity[off], 0.9)) if v.shape[0] > 1 else 1.0
        self.threshold = float(threshold)

    def __call__(self, pred: int, true: int) -> bool:
        return pred != true and float(self.similarity[pred, true]) >= self.threshold


class TextEmbeddingJudge(_CosineJudge):
    """Similar classes = cosine of their text embeddings ``>= threshold``.

    Args:
        text_embeds: ``(C, E)`` class prompt embeddings.
        threshold: cosine threshold.

    >>> import torch
    >>> judge = TextEmbeddingJudge(torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]]), threshold=0.9)
    >>> judge(1, 0), judge(2, 0)
    (True, False)
    """

    def __init__(self, text_embeds: torch.Tensor, threshold: float = 0.9) -> None:
        super().__init__(text_embeds, threshold)


class AttributeJudge(_CosineJudge):
    """Similar classes = cosine of their ``(C, A)`` attribute vectors ``>= threshold``.

    On the world, ``AttributeJudge(BirdWorld().class_attributes)``.
    """

    def __init__(self, class_attributes: torch.Tensor | np.ndarray, threshold: float = 0.8) -> None:
        super().__init__(class_attributes, threshold)


def binarize(maps: torch.Tensor, threshold: float = 0.5) -> torch.Tensor:
    """``(B, H, W)`` maps -> bool, pixels ``>= threshold * max`` (and ``> 0``) per map."""
    peak = maps.flatten(1).amax(1).clamp_min(0)[:, None, None]
    return (maps >= threshold * peak) & (maps > 0) & (peak > 0)


def iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Intersection over union of bool masks ``(B, H, W)`` -> ``(B,)`` (0 when both empty)."""
    inter = (a & b).flatten(1).sum(1).float()
    union = (a | b).flatten(1).sum(1).float()
    return inter / union.clamp_min(1)


def diagnose(
    maps: torch.Tensor,
    foreground: torch.Tensor,
    preds: torch.Tensor,
    labels: torch.Tensor,
    judge: Callable[[int, int], bool] | None = None,
    threshold: float = 0.5,
) -> list[str]:
    """Category of each sample: ``"correct"``, ``"BG-Er"``, ``"Fine-Er"`` or ``"FG-Er"``.

    Args:
        maps: ``(B, H, W)`` importance maps of the predicted class.
        foreground: ``(B, H, W)`` bool foreground masks.
        preds, labels: ``(B,)`` predicted and true classes.
        judge: ``judge(pred, true) -> bool`` "visually similar"; ``None`` -> never.
        threshold: relative threshold of :func:`binarize`.

    >>> import torch
    >>> m = torch.zeros(2, 4, 4); m[0, :2] = 1; m[1, 2:] = 1   # top half vs bottom half
    >>> fg = torch.zeros(2, 4, 4, dtype=torch.bool); fg[:, 2:] = True  # object in the bottom half
    >>> diagnose(m, fg, torch.tensor([1, 1]), torch.tensor([0, 0]))
    ['BG-Er', 'FG-Er']
    """
    if maps.shape != foreground.shape:
        raise ValueError(f"foreground: shape {tuple(foreground.shape)} differs from maps {tuple(maps.shape)}")
    if preds.shape != labels.shape or preds.shape != (maps.shape[0],):
        raise ValueError(f"preds/labels: expected ({maps.shape[0]},), got {tuple(preds.shape)}, {tuple(labels.shape)}")
    fg = foreground.bool()
    hot = binarize(maps, threshold)
    iou_fg, iou_bg = iou(hot, fg), iou(hot, ~fg)
    out = []
    for i in range(maps.shape[0]):
        p, t = int(preds[i]), int(labels[i])
        if p == t:
            out.append("correct")
        elif float(iou_bg[i]) > float(iou_fg[i]):
            out.append("BG-Er")
        elif judge is not None and judge(p, t):
            out.append("Fine-Er")
        else:
            out.append("FG-Er")
    return out


def error_shares(categories: Sequence[str], groups: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    """Shares of BG-Er, Fine-Er and FG-Er among the errors, per group (and ``"all"``).

    Returns ``{group: {"accuracy", "errors", "BG-Er", "Fine-Er", "FG-Er"}}``; shares are
    fractions of the group's errors (0 when it has none).

    >>> error_shares(["correct", "BG-Er", "Fine-Er", "Fine-Er"])["all"]["Fine-Er"]
    0.6666666666666666
    """
    groups = list(groups) if groups is not None else ["all"] * len(categories)
    if len(groups) != len(categories):
        raise ValueError(f"groups: {len(groups)} group names for {len(categories)} categories")
    buckets: dict[str, list[str]] = defaultdict(list)
    for g, c in zip(groups, categories):
        if c not in CATEGORIES:
            raise ValueError(f"categories: unknown category {c!r}; expected one of {CATEGORIES}")
        buckets[g].append(c)
        if g != "all":
            buckets["all"].append(c)
    result = {}
    for g, cs in buckets.items():
        errors = [c for c in cs if c != "correct"]
        n = len(errors)
        result[g] = {
            "accuracy": (len(cs) - n) / len(cs),
            "errors": float(n),
            **{k: (errors.count(k) / n if n else 0.0) for k in CATEGORIES[1:]},
        }
    return result


def foreground_share(maps: torch.Tensor, foreground: torch.Tensor) -> torch.Tensor:
    """Share of the positive importance that lies inside the foreground, ``(B,)`` in [0, 1].

    >>> import torch
    >>> m = torch.tensor([[[3.0, 1.0], [-2.0, 0.0]]]); fg = torch.tensor([[[True, False], [True, False]]])
    >>> foreground_share(m, fg).tolist()
    [0.75]
    """
    pos = maps.clamp_min(0).flatten(1)
    inside = (pos * foreground.flatten(1).to(pos)).sum(1)
    return inside / pos.sum(1).clamp_min(1e-12)


def pointing_game(
    maps: torch.Tensor, part_xy: torch.Tensor, part_visible: torch.Tensor, radius: float = 8.0
) -> torch.Tensor:
    """Pointing game: the map's maximum lies within ``radius`` pixels of a visible part.

    Args:
        maps: ``(B, H, W)``.
        part_xy: ``(B, P, 2)`` part centres ``(x, y)`` in pixels.
        part_visible: ``(B, P)`` bool.
        radius: hit radius in pixels.

    Returns:
        ``(B,)`` bool; False when no part is visible (an empty target is never a hit).
    """
    import torch

    _, _, w = maps.shape
    idx = maps.flatten(1).argmax(1)
    peak = torch.stack([(idx % w).float(), torch.div(idx, w, rounding_mode="floor").float()], dim=-1)
    dist = (part_xy.float() - peak[:, None, :]).norm(dim=-1)
    return ((dist <= radius) & part_visible.bool()).any(1)
