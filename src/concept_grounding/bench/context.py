"""The named context every step of a bench run reads (:class:`BenchContext`) and its splits' tensors
(:class:`Split`), decoded once per run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..vocabulary import Vocabulary
from .config import BenchConfig
from .data import BenchData, certainty_soft_labels, class_soft_labels

__all__ = ["BenchContext", "Split"]


class Split:
    """Tensors of one split for every label source, decoded once."""

    def __init__(self, dataset, columns: tuple[int, ...], image_size: int) -> None:
        import torch

        from ..models.data import images_to_tensor

        self.images = images_to_tensor(dataset["image"], image_size)
        self.labels = torch.as_tensor(np.asarray(dataset["label"]), dtype=torch.long)
        self.image_concepts = np.asarray(dataset["attributes"], np.uint8)[:, list(columns)]
        self.class_concepts = np.asarray(dataset["class_attributes"], np.uint8)[:, list(columns)]
        self.certainty = np.asarray(dataset["certainty"], np.uint8)[:, list(columns)]
        self.num_classes = dataset.features["label"].num_classes

    def concepts(self, labels: str) -> np.ndarray:
        """``(N, M)`` training targets of one label source (:class:`~.config.ModelVariant`'s ``labels``)."""
        if labels == "image":
            return self.image_concepts
        if labels == "class":
            return self.class_concepts
        soft = certainty_soft_labels(self.image_concepts, self.certainty)
        if labels == "image_soft":
            return soft
        if labels == "class_soft":
            return class_soft_labels(soft, self.labels.numpy(), self.num_classes)
        raise ValueError(f"labels must be class, image, class_soft or image_soft, got {labels!r}")

    def tensors(self, labels: str, columns: tuple[int, ...], vocab: Vocabulary):
        import torch

        from ..models.data import ConceptTensors

        concepts = self.concepts(labels)
        return ConceptTensors(
            self.images,
            torch.from_numpy(concepts.astype(np.float32)),
            self.labels,
            concept_indices=columns,
            concept_names=tuple(vocab.attributes[i] for i in columns),
        )


@dataclass(frozen=True)
class BenchContext:
    """What every step of a bench run reads: the data, its splits decoded once, the SUB images, the concept
    columns, the vocabulary, the config and the output folder.

    Attributes:
        data: the world or CUB + SUB (:class:`~.data.BenchData`).
        train, test: the splits' tensors (images, labels, concepts) at the run's image size.
        sub_images: ``(N_sub, 3, H, W)`` float tensor of the SUB images.
        columns: 0-based attribute indices of the concept set (:func:`~.data.concept_columns`).
        vocab: the CUB vocabulary.
        config: the run's settings.
        out: the run's folder (models are saved under it).
    """

    data: BenchData
    train: Split
    test: Split
    sub_images: Any
    columns: tuple[int, ...]
    vocab: Vocabulary
    config: BenchConfig
    out: Path
