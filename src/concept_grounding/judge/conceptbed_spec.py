"""What makes a ConceptBed judge, importable without torch (the command line parses its
capacities): kinds, capacities (ConceptBed Table 8), the bar and the render blocks (docs/guide/conceptbed.md).

>>> ConceptBedJudgeSpec("species", "small", classes=("017.Cardinal",)).key.startswith("species-small-")
True
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

__all__ = ["KINDS", "CAPACITIES", "CONCEPTBED_BAR", "ConceptBedJudgeSpec"]

KINDS = ("species", "style", "attributes")
#: SmallCNN channels of each capacity (strides 1, 2, 2; ConceptBed Table 8)
CAPACITIES: dict[str, tuple[int, int, int]] = {"small": (12, 24, 48), "medium": (16, 32, 64), "large": (32, 64, 128)}
#: the held-out accuracy below which a judge's CCD is refused (docs/guide/conceptbed.md)
CONCEPTBED_BAR = 0.95
#: first render block (``k``: sample ``k * classes + c``) of the judges' training and validation renders
TRAIN_BLOCK, VALIDATION_BLOCK = 0, 500


@dataclass(frozen=True)
class ConceptBedJudgeSpec:
    """What makes a ConceptBed judge (its cache key).

    Attributes:
        kind: one of :data:`KINDS`.
        capacity: a key of :data:`CAPACITIES`.
        per_class: training renders per species (``style``: per species and style, a quarter of it).
        epochs: training epochs.
        seed: world and training seed.
        image_size: render side in pixels.
        classes: the world's CUB classes (``None``: all 200; a subset for fast tests).
    """

    kind: str = "species"
    capacity: str = "medium"
    per_class: int = 40
    epochs: int = 8
    seed: int = 0
    image_size: int = 32
    classes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.capacity not in CAPACITIES:
            raise ValueError(f"capacity must be one of {tuple(CAPACITIES)}, got {self.capacity!r}")

    @property
    def key(self) -> str:
        """``species-medium-<8 hex>``: the cache folder's name."""
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.kind}-{self.capacity}-{digest}"
