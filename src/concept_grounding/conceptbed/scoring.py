"""Scores of generated images against a concept's real images: CCD with Table 7's
alternatives on the same oracle outputs, and the DINO-style pairwise cosine baseline.

CCD, accuracy, MSP and ECE all come from the one implementation,
:func:`concept_grounding.metrics.concept_confidence_deviation` (ConceptBed Eq. 3); this
module only turns oracle outputs into its inputs:

* class oracles (``species``, ``style``): ``mode="classifier"``, the softmax rows and the
  concept's class;
* the attribute oracle: ``mode="vqa"``, one row per (image, attribute the concept's species
  has): ``P(yes) = p_j(x)``, grouped by concept; ``f`` is then the oracle's probability of
  each of the concept's attributes (ConceptBed's CEM oracle judged attribute by attribute).

DINO-style baseline (Ruiz et al. 2023, ConceptBed Sec. 4): the mean cosine similarity between
the image embeddings of every generated and every real image of a concept, averaged over
concepts (higher is closer), with any image encoder: :func:`pairwise_cosine`; beside it its real-vs-real
ceiling, :func:`split_half_cosine`. Every cell's bootstrap interval: :meth:`Scored.interval` (:mod:`.intervals`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..metrics import concept_confidence_deviation
from ..metrics.concept_confidence_deviation import expected_calibration_error
from .intervals import BOOT, Group, bootstrap_interval

__all__ = ["Scored", "STATISTICS", "ccd_scores", "pairwise_cosine", "split_half_cosine", "table7_row"]


def _ccd(groups: Sequence[Group]) -> float:
    """Eq. 3 per concept: the mean over concepts of (real mean f - generated mean f)."""
    return float(np.mean([real.mean() - gen[..., 0].mean() for gen, real in groups]))


def _accuracy(groups: Sequence[Group]) -> float:
    return float(np.concatenate([gen[..., 2].ravel() for gen, _ in groups]).mean())


def _msp(groups: Sequence[Group]) -> float:
    return float(np.concatenate([gen[..., 1].ravel() for gen, _ in groups]).mean())


def _ece(groups: Sequence[Group]) -> float:
    conf = np.concatenate([gen[..., 1].ravel() for gen, _ in groups])
    return expected_calibration_error(conf, np.concatenate([gen[..., 2].ravel() for gen, _ in groups]))


#: Table 7's columns as statistics of a list of :attr:`Scored.groups` (the same values as
#: :func:`~concept_grounding.metrics.concept_confidence_deviation`'s ``per_concept`` reduction)
STATISTICS: dict[str, Callable[[Sequence[Group]], float]] = {
    "accuracy": _accuracy,
    "msp": _msp,
    "ece": _ece,
    "ccd": _ccd,
}


@dataclass
class Scored:
    """One learner's oracle outputs on one task.

    Attributes:
        mode: ``"classifier"`` or ``"vqa"`` (:func:`~concept_grounding.metrics.concept_confidence_deviation`).
        generated, generated_labels, real, real_labels: the metric's four inputs.
        groups: per concept, ``(generated (n, A, 3), real (r, A))``: per generated image and asked column
            (``A`` = 1 for a classifier, the concept's attributes for ``vqa``) ``f``, the confidence and whether
            the oracle is right, and the real images' ``f``: what :meth:`interval` resamples.
    """

    mode: str
    generated: list[np.ndarray] = field(default_factory=list)
    generated_labels: list[np.ndarray] = field(default_factory=list)
    real: list[np.ndarray] = field(default_factory=list)
    real_labels: list[np.ndarray] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)

    def add(self, generated: np.ndarray, real: np.ndarray, label: int, attributes: np.ndarray | None = None) -> None:
        """Add one concept: ``generated`` / ``real`` oracle outputs ``(N, K)``; ``attributes``
        (``vqa`` mode): the columns of the concept's attributes."""
        self.groups += [_group(self.mode, generated, real, label, attributes)]
        if self.mode == "vqa":
            generated, real = generated[:, attributes].ravel(), real[:, attributes].ravel()
        self.generated.append(generated)
        self.generated_labels.append(np.full(len(generated), label))
        self.real.append(real)
        self.real_labels.append(np.full(len(real), label))

    def result(self, reduction: str = "per_concept") -> dict:
        """:func:`~concept_grounding.metrics.concept_confidence_deviation` of everything added."""
        return concept_confidence_deviation(
            np.concatenate(self.generated),
            np.concatenate(self.generated_labels),
            np.concatenate(self.real),
            np.concatenate(self.real_labels),
            mode=self.mode,
            reduction=reduction,
        )

    def interval(self, statistic: str = "ccd", boot: int = BOOT, seed: int = 0) -> list[float]:
        """``[lo, hi]``: the 95 % bootstrap interval of a :data:`STATISTICS` column over concepts and images.

        >>> s = Scored("classifier")
        >>> s.add(np.array([[0.2, 0.8], [0.4, 0.6]]), np.array([[0.1, 0.9], [0.1, 0.9]]), 1)
        >>> s.interval("ccd")  # one concept, two generated images: f 0.8 or 0.6 twice, or one of each
        [0.1, 0.3]
        """
        if statistic not in STATISTICS:
            raise ValueError(f"unknown statistic {statistic!r}; choose from {sorted(STATISTICS)}")
        groups = [g for g in self.groups if g[0].shape[1]]
        if not groups:
            raise ValueError("no concept with an asked column was added: nothing to resample")
        lo, hi = bootstrap_interval(groups, STATISTICS[statistic], boot, seed)
        return [lo, hi]


def _group(mode: str, generated: np.ndarray, real: np.ndarray, label: int, attributes: np.ndarray | None) -> Group:
    """One concept's :attr:`Scored.groups` entry (``f``, confidence, correct per generated image and column)."""
    if mode == "vqa":
        gen_f, real_f = generated[:, attributes], real[:, attributes]
        conf, right = np.maximum(gen_f, 1.0 - gen_f), gen_f > 0.5
    else:
        gen_f, real_f = generated[:, [label]], real[:, [label]]
        conf, right = generated.max(axis=1, keepdims=True), generated.argmax(axis=1)[:, None] == label
    return np.stack([gen_f, conf, right.astype(np.float64)], axis=-1).astype(np.float64), real_f.astype(np.float64)


def ccd_scores(
    generated: np.ndarray, real: np.ndarray, label: int, mode: str = "classifier", attributes: np.ndarray | None = None
) -> dict:
    """CCD and Table 7 of one concept (a :class:`Scored` of one entry).

    >>> gen = np.array([[0.2, 0.8], [0.4, 0.6]]); real = np.array([[0.1, 0.9], [0.1, 0.9]])
    >>> round(ccd_scores(gen, real, 1)["ccd"], 4)  # -(0.7 - 0.9)
    0.2
    """
    scored = Scored(mode)
    scored.add(generated, real, label, attributes)
    return scored.result()


def table7_row(result: dict) -> dict[str, float]:
    """``{"accuracy", "msp", "ece", "ccd"}`` of a CCD result (Table 7's columns)."""
    return {k: float(result[k]) for k in ("accuracy", "msp", "ece", "ccd")}


def pairwise_cosine(
    embed: Callable[[np.ndarray], np.ndarray], generated: Sequence[np.ndarray], real: Sequence[np.ndarray]
) -> float:
    """Mean over concepts of the mean cosine between each generated and each real image.

    Args:
        embed: ``(N, H, W, 3)`` uint8 -> ``(N, D)`` embeddings (normalised here).
        generated, real: per concept, ``(n, H, W, 3)`` images.

    >>> embed = lambda x: x.reshape(len(x), -1).astype(float)
    >>> a = np.ones((2, 1, 1, 3), np.uint8); b = np.zeros((1, 1, 1, 3), np.uint8); b[..., 0] = 1
    >>> round(pairwise_cosine(embed, [a], [a]), 4), round(pairwise_cosine(embed, [a], [b]), 4)
    (1.0, 0.5774)
    """
    values = []
    for g, r in zip(generated, real):
        eg, er = (np.asarray(embed(np.asarray(x)), dtype=np.float64) for x in (g, r))
        eg /= np.linalg.norm(eg, axis=1, keepdims=True).clip(1e-12)
        er /= np.linalg.norm(er, axis=1, keepdims=True).clip(1e-12)
        values.append(float((eg @ er.T).mean()))
    return float(np.mean(values))


def split_half_cosine(embed: Callable[[np.ndarray], np.ndarray], real: Sequence[np.ndarray]) -> float:
    """The DINO-style baseline's real-vs-real ceiling: :func:`pairwise_cosine` of the first half of each concept's
    real images against its second half (what a learner that draws the concept's own real images would reach).

    >>> embed = lambda x: x.reshape(len(x), -1).astype(float)
    >>> a = np.ones((4, 1, 1, 3), np.uint8)
    >>> round(split_half_cosine(embed, [a]), 4)
    1.0
    """
    for k, r in enumerate(real):
        if len(r) < 2:
            raise ValueError(f"concept {k} has {len(r)} real image(s): the split-half ceiling needs at least 2")
    halves = [(r[: len(r) // 2], r[len(r) // 2 :]) for r in real]
    return pairwise_cosine(embed, [a for a, _ in halves], [b for _, b in halves])


def clip_image_embedder(encoder: str) -> Callable[[np.ndarray], np.ndarray]:
    """``images -> (N, D)`` image-tower embeddings of a CLIP-like model: ``"world-clip"`` (the
    shipped world CLIP, ``assets/space_world_clip``) or any name / folder
    :func:`concept_grounding.models.load_named_clip` takes."""
    from pathlib import Path

    from PIL import Image

    from ..models.clip import load_clip, load_named_clip

    if encoder == "world-clip":
        handle = load_clip(Path(__file__).resolve().parent.parent / "assets" / "space_world_clip")
    else:
        handle = load_named_clip(encoder, "--encoder")

    def embed(images: np.ndarray) -> np.ndarray:
        pixels = handle.preprocess([Image.fromarray(im) for im in images])
        return handle.encode_images(pixels).numpy()

    return embed
