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
concepts (higher is closer), with any image encoder: :func:`pairwise_cosine`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..metrics import concept_confidence_deviation

__all__ = ["Scored", "ccd_scores", "pairwise_cosine", "table7_row"]


@dataclass
class Scored:
    """One learner's oracle outputs on one task.

    Attributes:
        mode: ``"classifier"`` or ``"vqa"`` (:func:`~concept_grounding.metrics.concept_confidence_deviation`).
        generated, generated_labels, real, real_labels: the metric's four inputs.
    """

    mode: str
    generated: list[np.ndarray] = field(default_factory=list)
    generated_labels: list[np.ndarray] = field(default_factory=list)
    real: list[np.ndarray] = field(default_factory=list)
    real_labels: list[np.ndarray] = field(default_factory=list)

    def add(self, generated: np.ndarray, real: np.ndarray, label: int, attributes: np.ndarray | None = None) -> None:
        """Add one concept: ``generated`` / ``real`` oracle outputs ``(N, K)``; ``attributes``
        (``vqa`` mode): the columns of the concept's attributes."""
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
