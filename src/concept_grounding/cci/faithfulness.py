"""Deletion and Insertion faithfulness curves (Petsiuk et al. 2018, RISE; CCI Tab. 1-2).

Pixels are ranked by an importance map, most important first. **Deletion** replaces the
top fraction ``f`` of the pixels by a replacement image and records top-1/top-5 accuracy
(classification) or Recall@k (retrieval) as ``f`` goes 0 -> 1; **Insertion** starts from
the replacement image and reveals the top fraction ``f`` of the original. The area under
each curve over ``f in [0, 1]`` (trapezoid rule) gives Del@k (lower = more faithful) and
Ins@k (higher = more faithful).

Replacements (:class:`Replacement`): ``"noise"`` (seeded Gaussian noise with the image's
per-channel mean and std), ``"blur"`` (Gaussian blur, ``sigma`` in pixels), ``"mean"``
(per-image channel mean); any callable ``images -> baseline images`` works too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = []


@dataclass(frozen=True)
class Replacement:
    """What removed pixels become.

    Args:
        kind: ``"noise"``, ``"blur"`` or ``"mean"``.
        sigma: Gaussian blur sigma in pixels (``"blur"``).
        seed: noise seed (``"noise"``).
    """

    kind: Literal["noise", "blur", "mean"] = "blur"
    sigma: float = 5.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("noise", "blur", "mean"):
            raise ValueError(f"replacement: kind must be 'noise', 'blur' or 'mean', got {self.kind!r}")
        if self.kind == "blur" and self.sigma <= 0:
            raise ValueError(f"replacement: sigma must be > 0, got {self.sigma}")

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """``(B, C, H, W)`` images -> ``(B, C, H, W)`` replacement images."""
        import torch
        import torch.nn.functional as F

        mean = images.mean(dim=(2, 3), keepdim=True)
        if self.kind == "mean":
            return mean.expand_as(images).clone()
        if self.kind == "noise":
            std = images.std(dim=(2, 3), keepdim=True)
            gen = torch.Generator().manual_seed(self.seed)
            noise = torch.randn(images.shape, generator=gen).to(images)
            return mean + std * noise
        radius = max(1, int(3 * self.sigma))
        xs = torch.arange(-radius, radius + 1, dtype=images.dtype, device=images.device)
        k1 = torch.exp(-0.5 * (xs / self.sigma) ** 2)
        k1 = k1 / k1.sum()
        c = images.shape[1]
        x = F.pad(images, (radius, radius, radius, radius), mode="replicate")
        x = F.conv2d(x, k1.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
        return F.conv2d(x, k1.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)


def pixel_order(maps: torch.Tensor) -> torch.Tensor:
    """Rank of every pixel by importance: ``(B, H, W) -> (B, H, W)`` long, 0 = most important.

    Ties keep raster order (stable sort), so constant maps delete top-left first.
    """
    import torch

    b = maps.shape[0]
    flat = maps.reshape(b, -1).float()
    idx = torch.argsort(-flat, dim=1, stable=True)
    rank = torch.empty_like(idx)
    rank.scatter_(1, idx, torch.arange(flat.shape[1], device=maps.device).expand(b, -1))
    return rank.view(maps.shape)


def perturbed(
    images: torch.Tensor,
    baseline: torch.Tensor,
    rank: torch.Tensor,
    fraction: float,
    mode: Literal["deletion", "insertion"],
) -> torch.Tensor:
    """Images with the top ``fraction`` of pixels deleted (or, for insertion, revealed).

    Args:
        images, baseline: ``(B, C, H, W)``.
        rank: ``(B, H, W)`` from :func:`pixel_order`.
        fraction: in ``[0, 1]``.
        mode: ``"deletion"`` or ``"insertion"``.
    """
    n = rank.shape[1] * rank.shape[2]
    top = (rank < round(fraction * n))[:, None].to(images.dtype)
    if mode == "deletion":
        return images * (1 - top) + baseline * top
    if mode == "insertion":
        return baseline * (1 - top) + images * top
    raise ValueError(f"mode: expected 'deletion' or 'insertion', got {mode!r}")


def auc(curve: torch.Tensor, fractions: torch.Tensor) -> float:
    """Trapezoid area under ``curve`` over ``fractions`` (both ``(S,)``).

    >>> import torch
    >>> auc(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]))
    0.5
    """
    import torch

    return float(torch.trapezoid(curve.float(), fractions.float()))


@dataclass
class FaithfulnessCurves:
    """Curves ``(S,)`` per metric name over ``fractions`` and their AUCs.

    Classification names: ``"Del@1"``, ``"Del@5"``, ``"Ins@1"``, ``"Ins@5"``. Retrieval:
    ``"Del-TR@k"`` (image -> text), ``"Del-IR@k"`` (text -> image), and ``Ins-`` likewise.
    """

    fractions: torch.Tensor
    curves: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def aucs(self) -> dict[str, float]:
        return {name: auc(c, self.fractions) for name, c in self.curves.items()}


def _topk_hits(scores: torch.Tensor, targets: torch.Tensor, k: int) -> torch.Tensor:
    k = min(k, scores.shape[1])
    return (scores.topk(k, dim=1).indices == targets[:, None]).any(1).float()


def classification_curves(
    score_fn: Callable[[torch.Tensor], torch.Tensor],
    images: torch.Tensor,
    maps: torch.Tensor,
    labels: torch.Tensor,
    steps: int = 20,
    replacement: Replacement | Callable[[torch.Tensor], torch.Tensor] | None = None,
    topk: tuple[int, ...] = (1, 5),
    *,
    forward_batch: int | None = None,
    endpoints: Endpoints | None = None,
) -> FaithfulnessCurves:
    """Deletion and Insertion accuracy curves for zero-shot classification.

    Args:
        score_fn: ``(B, C, H, W)`` images -> ``(B, num_classes)`` logits (e.g. cosine to class
            prompts' text embeddings).
        images: ``(B, C, H, W)`` model-ready images.
        maps: ``(B, H, W)`` importance maps.
        labels: ``(B,)`` true classes.
        steps: number of fraction steps (``steps + 1`` points from 0 to 1).
        replacement: what deleted pixels become (default blur); a :class:`Replacement` or
            any callable ``(B, C, H, W) -> (B, C, H, W)``.
        topk: accuracies to track.
        forward_batch: ``None``: one ``score_fn`` call per fraction on the ``B`` images (the
            reference). An integer ``n``: the perturbed images of every fraction and both
            modes are stacked and scored ``n`` at a time (one per call with ``n = 1``).
        endpoints: the method-independent ends of the curves, computed once per batch and
            shared by every method (:func:`curve_endpoints`): at ``f = 0`` deletion and
            ``f = 1`` insertion the images are the clean ones, at ``f = 1`` deletion and
            ``f = 0`` insertion the replacement itself (exactly: the blend weights are 0 and
            1), so only the interior fractions are scored per method; ``replacement`` is
            then unused.
    """
    import torch

    _check(images, maps)
    if labels.shape != (images.shape[0],):
        raise ValueError(f"labels: expected shape ({images.shape[0]},), got {tuple(labels.shape)}")
    fr = torch.linspace(0, 1, steps + 1)
    rank = pixel_order(maps)
    if endpoints is None:
        base = (replacement or Replacement())(images)
        inner = list(range(steps + 1))
    else:
        base = endpoints.baseline
        inner = list(range(1, steps))
    jobs = [(mode, i) for mode in ("deletion", "insertion") for i in inner]
    scores = dict(zip(jobs, _scores(score_fn, images, base, rank, [(m, float(fr[i])) for m, i in jobs], forward_batch)))
    if endpoints is not None:
        clean, removed = endpoints.clean_scores, endpoints.baseline_scores
        scores.update(
            {
                ("deletion", 0): clean,
                ("deletion", steps): removed,
                ("insertion", 0): removed,
                ("insertion", steps): clean,
            }
        )
    out = FaithfulnessCurves(fractions=fr)
    for mode, tag in (("deletion", "Del"), ("insertion", "Ins")):
        for k in topk:
            out.curves[f"{tag}@{k}"] = torch.stack(
                [
                    _topk_hits(scores[(mode, i)], labels.to(scores[(mode, i)].device), k).mean().cpu()
                    for i in range(steps + 1)
                ]
            )
    return out


@dataclass
class Endpoints:
    """The method-independent ends of the classification curves of one batch.

    Attributes:
        baseline: ``(B, C, H, W)`` the replacement images.
        clean_scores: ``(B, num_classes)`` scores of the clean images.
        baseline_scores: ``(B, num_classes)`` scores of the replacement images.
    """

    baseline: torch.Tensor
    clean_scores: torch.Tensor
    baseline_scores: torch.Tensor


def curve_endpoints(
    score_fn: Callable[[torch.Tensor], torch.Tensor],
    images: torch.Tensor,
    replacement: Replacement | Callable[[torch.Tensor], torch.Tensor] | None = None,
    clean_scores: torch.Tensor | None = None,
) -> Endpoints:
    """:class:`Endpoints` of ``images`` (``clean_scores`` reused when the caller has them)."""
    import torch

    base = (replacement or Replacement())(images)
    with torch.no_grad():
        clean = score_fn(images) if clean_scores is None else clean_scores
        return Endpoints(base, clean, score_fn(base))


def _scores(score_fn, images, base, rank, jobs: list[tuple[str, float]], forward_batch: int | None) -> list:
    """``score_fn`` of the perturbed images of every ``(mode, fraction)`` job, ``(B, C)`` each.

    ``forward_batch`` None: one call per job on all ``B`` images (:func:`perturbed`).
    Otherwise the ``len(jobs) * B`` perturbed images (job-major: the same pixels as
    :func:`perturbed`, chosen by ``torch.where``) are written straight into one reused
    ``(forward_batch, C, H, W)`` buffer and scored ``forward_batch`` at a time (no stacking
    copy; the buffer is refilled only after ``score_fn`` has returned).
    """
    import torch

    if forward_batch is None:
        with torch.no_grad():
            return [score_fn(perturbed(images, base, rank, f, mode)) for mode, f in jobs]
    if forward_batch < 1:
        raise ValueError(f"forward_batch: must be >= 1, got {forward_batch}")
    for mode, _ in jobs:
        if mode not in ("deletion", "insertion"):
            raise ValueError(f"mode: expected 'deletion' or 'insertion', got {mode!r}")
    b, n = images.shape[0], rank.shape[1] * rank.shape[2]
    total = len(jobs) * b
    buffer = images.new_empty((min(forward_batch, total), *images.shape[1:]))
    out: list[torch.Tensor] = []
    with torch.inference_mode():
        for start in range(0, total, forward_batch):
            stop, row = min(start + forward_batch, total), start
            while row < stop:  # one slice per job that this forward batch touches
                job, first = divmod(row, b)
                count = min(b - first, stop - row)
                mode, f = jobs[job]
                top = (rank[first : first + count] < round(f * n))[:, None]
                clean, removed = images[first : first + count], base[first : first + count]
                inside, outside = (removed, clean) if mode == "deletion" else (clean, removed)
                torch.where(top, inside, outside, out=buffer[row - start : row - start + count])
                row += count
            out.append(score_fn(buffer[: stop - start]).clone())
    return list(torch.cat(out).split(b))


def retrieval_curves(
    image_embed_fn: Callable[[torch.Tensor], torch.Tensor],
    text_embeds: torch.Tensor,
    images: torch.Tensor,
    maps: torch.Tensor,
    steps: int = 20,
    replacement: Replacement | Callable[[torch.Tensor], torch.Tensor] | None = None,
    topk: tuple[int, ...] = (1, 5),
) -> FaithfulnessCurves:
    """Deletion and Insertion Recall@k curves for paired image-text retrieval.

    Image ``i`` is paired with text ``i``. TR (text retrieval, image -> text): is text ``i``
    among the top-k texts for image ``i``; IR (image retrieval, text -> image): is image ``i``
    among the top-k images for text ``i``, all images perturbed at the same fraction.

    Args:
        image_embed_fn: ``(B, C, H, W) -> (B, E)``.
        text_embeds: ``(B, E)``.
        images, maps: as in :func:`classification_curves`.
    """
    import torch
    import torch.nn.functional as F

    _check(images, maps)
    if text_embeds.shape[0] != images.shape[0]:
        raise ValueError(f"text_embeds: {text_embeds.shape[0]} texts for {images.shape[0]} images")
    replacement = replacement or Replacement()
    fr = torch.linspace(0, 1, steps + 1)
    rank = pixel_order(maps)
    base = replacement(images)
    t = F.normalize(text_embeds.float(), dim=-1)
    target = torch.arange(images.shape[0])
    out = FaithfulnessCurves(fractions=fr)
    for mode, tag in (("deletion", "Del"), ("insertion", "Ins")):
        rows = {(d, k): [] for d in ("TR", "IR") for k in topk}
        for f in fr.tolist():
            with torch.no_grad():
                z = F.normalize(image_embed_fn(perturbed(images, base, rank, f, mode)).float(), dim=-1)
            sim = (z @ t.to(z.device).T).cpu()
            for k in topk:
                rows[("TR", k)].append(_topk_hits(sim, target, k).mean())
                rows[("IR", k)].append(_topk_hits(sim.T, target, k).mean())
        for (d, k), vals in rows.items():
            out.curves[f"{tag}-{d}@{k}"] = torch.stack(vals)
    return out


def _check(images: torch.Tensor, maps: torch.Tensor) -> None:
    if images.ndim != 4 or maps.ndim != 3 or images.shape[0] != maps.shape[0] or images.shape[2:] != maps.shape[1:]:
        raise ValueError(
            f"maps: expected (B, H, W) = ({images.shape[0]}, {tuple(images.shape[2:])}) for images "
            f"{tuple(images.shape)}, got {tuple(maps.shape)}"
        )
