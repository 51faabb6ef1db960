"""Configuration of the bird world and the pose of one drawing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["WorldConfig", "Pose", "BACKGROUNDS", "sample_pose"]

#: Background scenes, by id.
BACKGROUNDS: tuple[str, ...] = ("sky", "foliage", "water", "ground", "reeds")


@dataclass(frozen=True)
class WorldConfig:
    """Settings of a :class:`~concept_grounding.world.BirdWorld`.

    Attributes:
        image_size: side of the square images in pixels (>= 32).
        class_names: CUB class folder names; ``None`` -> SUB's 33 reference classes.
        deviation_rate: probability, per rendered base attribute group and image, that the
            image deviates from its class value (CUB's labels are per-class majority votes).
        seed: world seed; every species and every image is a function of it.
    """

    image_size: int = 128
    class_names: tuple[str, ...] | None = None
    deviation_rate: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        if int(self.image_size) < 32:
            raise ValueError(f"image_size must be >= 32 pixels, got {self.image_size}")
        if not 0.0 <= float(self.deviation_rate) <= 1.0:
            raise ValueError(f"deviation_rate must be in [0, 1], got {self.deviation_rate}")
        if self.class_names is not None and len(self.class_names) == 0:
            raise ValueError("class_names must name at least one class (or be None)")


@dataclass(frozen=True)
class Pose:
    """Where and how a bird is drawn.

    Attributes:
        facing: ``"left"`` or ``"right"`` (the beak's direction). A bird facing right
            shows its right side: its left eye and left wing are hidden.
        scale: bird size as a fraction of the nominal size (1.0: the bird's body length
            plus tail and beak span about 80 % of the image width).
        center: (x, y) of the body centre in pixels.
        angle: rotation in degrees (positive: counter-clockwise on screen).
        background: index into :data:`BACKGROUNDS`.
        brightness: global brightness factor.
        cast: (3,) multiplicative RGB colour cast.
    """

    facing: str
    scale: float
    center: tuple[float, float]
    angle: float
    background: int
    brightness: float
    cast: tuple[float, float, float]

    @property
    def background_name(self) -> str:
        return BACKGROUNDS[self.background]


def sample_pose(rng: np.random.Generator, image_size: int) -> Pose:
    """Draw a random pose: facing, scale in [0.8, 1.05], centre jitter, +-12 degree
    rotation, one of the backgrounds, brightness in [0.85, 1.15] and a mild colour cast."""
    scale = float(rng.uniform(0.8, 1.05))
    jitter = (1.05 - scale) * 0.22 + 0.04
    cx = image_size * (0.5 + rng.uniform(-jitter, jitter))
    cy = image_size * (0.5 + rng.uniform(-jitter, jitter))
    return Pose(
        facing="right" if rng.random() < 0.5 else "left",
        scale=scale,
        center=(float(cx), float(cy)),
        angle=float(rng.uniform(-12.0, 12.0)),
        background=int(rng.integers(len(BACKGROUNDS))),
        brightness=float(rng.uniform(0.85, 1.15)),
        cast=tuple(float(c) for c in 1.0 + rng.uniform(-0.06, 0.06, size=3)),
    )
