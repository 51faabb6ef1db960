"""Output dataclasses of the bird world: one drawing and one counterfactual pair."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .config import Pose
from .render import PART_NAMES

__all__ = ["BirdSample", "Counterfactual"]


@dataclass(frozen=True, eq=False)
class BirdSample:
    """One rendered bird with its complete ground truth.

    Attributes:
        index: sample index in its world (the image is a function of (seed, index)).
        label: 0-based class index into ``BirdWorld.class_names``.
        image: (H, W, 3) uint8 RGB.
        mask: (H, W) bool, True on the bird.
        part_map: (H, W) uint8, CUB part index + 1 of the visible part at each pixel, 0 = none.
        part_xy: (15, 2) float32 part centres (x, y) in pixels (pixel centres at integer
            coordinates), CUB part order; given for hidden parts too.
        part_visible: (15,) bool, True where the centre pixel shows the part itself.
        attributes: (312,) uint8 exact per-image CUB labels.
        pose: the :class:`Pose` it was drawn in.
        traits: base group -> value actually drawn (see :mod:`.species`).
        noise_seed: seed of the background and grain noise.
    """

    index: int
    label: int
    image: np.ndarray
    mask: np.ndarray
    part_map: np.ndarray
    part_xy: np.ndarray
    part_visible: np.ndarray
    attributes: np.ndarray
    pose: Pose
    traits: Mapping[str, str] = field(repr=False, default_factory=dict)
    noise_seed: int = field(repr=False, default=0)

    def part_mask(self, part: str | int) -> np.ndarray:
        """(H, W) bool mask of one part, by CUB name (``"left eye"``) or 0-based index."""
        if isinstance(part, str):
            if part not in PART_NAMES:
                raise ValueError(f"unknown part {part!r}; known: {list(PART_NAMES)}")
            part = PART_NAMES.index(part)
        if not 0 <= int(part) < len(PART_NAMES):
            raise ValueError(f"part index must be in [0, {len(PART_NAMES)}), got {part}")
        return self.part_map == int(part) + 1

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        """(x, y, width, height) of the foreground mask in pixels (CUB convention)."""
        ys, xs = np.nonzero(self.mask)
        if len(xs) == 0:
            return (0.0, 0.0, 0.0, 0.0)
        x0, y0 = float(xs.min()), float(ys.min())
        return (x0, y0, float(xs.max()) - x0 + 1.0, float(ys.max()) - y0 + 1.0)


@dataclass(frozen=True, eq=False)
class Counterfactual:
    """The same bird drawn twice, differing in one substituted attribute (SUB's S+ / S-).

    Attributes:
        original: the unedited sample.
        edited: same pose, background and noise, with ``target_attribute`` substituted.
        target_attribute: S+, the CUB attribute now present.
        removed_attributes: S-, the original's attributes of the same group that are now absent.
        changed_parts: CUB parts whose pixels were repainted (or reshaped, for the bill).
    """

    original: BirdSample
    edited: BirdSample
    target_attribute: str
    removed_attributes: tuple[str, ...]
    changed_parts: tuple[str, ...]

    @property
    def group(self) -> str:
        """Attribute group of S+ (``"crown_color"``)."""
        return self.target_attribute.split("::", 1)[0].removeprefix("has_")

    def changed_mask(self, dilate: int = 0) -> np.ndarray:
        """(H, W) bool union of the changed parts in both images, dilated by ``dilate`` px."""
        m = np.zeros(self.original.mask.shape, bool)
        for p in self.changed_parts:
            m |= self.original.part_mask(p) | self.edited.part_mask(p)
        return dilate_mask(m, dilate)


def dilate_mask(mask: np.ndarray, radius: int) -> np.ndarray:
    """Binary dilation by a (2r+1)^2 square, vectorised with shifted ORs.

    >>> m = np.zeros((5, 5), bool); m[2, 2] = True
    >>> int(dilate_mask(m, 1).sum())
    9
    """
    out = mask.copy()
    for _ in range(int(radius)):
        grown = out.copy()
        grown[1:] |= out[:-1]
        grown[:-1] |= out[1:]
        grown[:, 1:] |= grown[:, :-1].copy()
        grown[:, :-1] |= grown[:, 1:].copy()
        out = grown
    return out
