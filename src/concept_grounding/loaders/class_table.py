"""CUB's class-level labels as a class table (the classes TDG pairings are planned from).

:func:`cub_class_table` reads a ``CUB_200_2011`` folder with :func:`~concept_grounding.loaders.load_cub`
and keeps, per class, the ``class_attributes`` of its training images (the CBM majority
vote); a class without training images keeps zeros.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["cub_class_table"]


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
