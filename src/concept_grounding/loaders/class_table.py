"""CUB's class-level labels as a class table (the classes TDG pairings are planned from).

:func:`cub_class_table` reads a ``CUB_200_2011`` folder with :func:`~concept_grounding.loaders.load_cub`
and keeps, per class, the ``class_attributes`` of its training images (the CBM majority
vote); a class without training images keeps zeros.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import datasets

__all__ = ["cub_class_table", "class_matrix", "cub_class_matrix", "class_attribute_names"]


@dataclass(frozen=True)
class CubClassTable:
    """``class_names`` (C,) and ``class_attributes`` (C, 312) uint8 class-level labels."""

    class_names: list[str]
    class_attributes: np.ndarray


def cub_class_table(root: str | Path) -> CubClassTable:
    """The class table of the CUB folder ``root`` (format errors name the file, see ``load_cub``)."""
    from .cub import load_cub

    train = load_cub(root, progress=False)["train"]
    names = train.features["label"].names
    matrix = np.zeros((len(names), 312), dtype=np.uint8)
    for label, row in zip(train["label"], train["class_attributes"]):
        matrix[label] = row
    return CubClassTable(names, matrix)


def class_matrix(split: datasets.Dataset, num_classes: int, num_attributes: int) -> np.ndarray:
    """``(K, A)`` class-level labels read off the rows' ``class_attributes`` column."""
    out = np.zeros((num_classes, num_attributes), np.uint8)
    labels = np.asarray(split["label"])
    rows = np.asarray(split["class_attributes"], np.uint8)
    out[labels] = rows
    return out


def cub_class_matrix(root: str | Path, *, progress: bool = False) -> tuple[tuple[str, ...], np.ndarray]:
    """``(class names, (K, A) class-level labels)`` of the CUB folder ``root``, every class kept
    (``load_cub``'s ``min_class_count=None``)."""
    from ..vocabulary import load_vocabulary
    from .cub import load_cub

    train = load_cub(root, min_class_count=None, progress=progress)["train"]
    names = tuple(train.features["label"].names)
    return names, class_matrix(train, len(names), load_vocabulary().num_attributes)


def class_attribute_names(names: tuple[str, ...], table: np.ndarray) -> dict[str, set[str]]:
    """Each class's class-level attribute names from ``(class names, (K, A) labels)``."""
    from ..vocabulary import load_vocabulary

    attributes = load_vocabulary().attributes
    return {c: {attributes[j] for j in np.flatnonzero(row)} for c, row in zip(names, table)}
