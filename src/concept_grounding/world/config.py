"""Configuration of the bird world and the pose of one drawing."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..settings import setting, tuple_or_none
from ..validators import class_name, closed_unit_interval, int_at_least

__all__ = ["WorldConfig", "Pose", "BACKGROUNDS", "SCENES"]

#: Background scenes a varied world draws from, by id.
BACKGROUNDS: tuple[str, ...] = ("sky", "foliage", "water", "ground", "reeds")
#: Every scene a pose can name: the backgrounds, then ``"plain"`` (a flat pale backdrop, no
#: perch), which only ``WorldConfig(scene="plain")`` draws.
SCENES: tuple[str, ...] = BACKGROUNDS + ("plain",)
#: ``WorldConfig.pose`` values.
POSES: tuple[str, ...] = ("varied", "canonical")
#: ``WorldConfig.scene`` values.
SCENE_SETTINGS: tuple[str, ...] = ("varied", "plain")

#: Scale of the canonical pose at zoom 1: the bird spans about 97 % of the image width.
CANONICAL_SCALE = 1.05
#: Centre (u, v) of the box every canonical bird fits in (tail tip to the longest bill's
#: tip, crown to feet) in canonical units from the body centre; the canonical pose puts it
#: at the image centre (measured: at 128 px, 200 birds span x 4-123 and y 33-96).
_BIRD_BOX_CENTRE = (0.225, 0.05)


@dataclass(frozen=True)
class WorldConfig:
    """Settings of a :class:`~concept_grounding.world.BirdWorld`.

    Attributes:
        image_size: side of the square images in pixels (>= 32).
        class_names: CUB class folder names; ``None`` -> SUB's 33 reference classes.
        deviation_rate: probability, per rendered base attribute group and image, that the
            image deviates from its class value (CUB's labels are per-class majority votes).
        seed: world seed; every species and every image is a function of it.
        pose: ``"varied"`` (facing, size, position, rotation, brightness and colour cast
            drawn per image) or ``"canonical"`` (facing right, upright, centred, no lighting
            change): the setting for a generator's training set, where every part sits at
            the same pixels.
        zoom: multiplies the bird's size (1.0: a canonical bird spans about 97 % of the
            width; varied birds 74-97 %). Above 1 the tail and bill tip leave the frame.
        scene: ``"varied"`` (one of :data:`BACKGROUNDS` with texture and a perch) or
            ``"plain"`` (a flat pale backdrop with grain, no perch).

    The pose and scene settings change how a sample is drawn, never what it is: sample
    ``index`` has the same species, attributes and noise seed in every setting (the varied
    pose is drawn and then overridden), so a canonical world shows the same birds.

    >>> WorldConfig(pose="sideways")
    Traceback (most recent call last):
    ValueError: pose must be one of ('varied', 'canonical'), got 'sideways'
    """

    image_size: int = setting(
        128,
        "image side in pixels (>= 32)",
        parse=int_at_least(32),
        flag="--size",
        aliases=("--image-size", "--world-size"),
    )
    class_names: tuple[str, ...] | None = setting(
        None,
        "CUB class folder names or names like 'Blue Jay' (default: SUB's 33)",
        parse=class_name,
        flag="--classes",
        nargs="*",
        convert=tuple_or_none,
    )
    deviation_rate: float = setting(0.1, "per-image, per-group label deviation rate", parse=closed_unit_interval)
    seed: int = setting(0, "world seed (same seed, same birds)", parse=int)
    pose: str = "varied"
    zoom: float = 1.0
    scene: str = "varied"

    def __post_init__(self) -> None:
        if int(self.image_size) < 32:
            raise ValueError(f"image_size must be >= 32 pixels, got {self.image_size}")
        if not 0.0 <= float(self.deviation_rate) <= 1.0:
            raise ValueError(f"deviation_rate must be in [0, 1], got {self.deviation_rate}")
        if self.class_names is not None and len(self.class_names) == 0:
            raise ValueError("class_names must name at least one class (or be None)")
        if self.pose not in POSES:
            raise ValueError(f"pose must be one of {POSES}, got {self.pose!r}")
        if self.scene not in SCENE_SETTINGS:
            raise ValueError(f"scene must be one of {SCENE_SETTINGS}, got {self.scene!r}")
        if not 0.5 <= float(self.zoom) <= 2.0:
            raise ValueError(f"zoom must be in [0.5, 2], got {self.zoom}")


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
        background: index into :data:`SCENES` (:data:`BACKGROUNDS`, then ``"plain"``).
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
        return SCENES[self.background]


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


def pose_for(config: WorldConfig, varied: Pose) -> Pose:
    """The pose ``config`` draws a bird in, given the ``varied`` pose drawn for it.

    The canonical pose faces right at scale ``CANONICAL_SCALE * zoom``, upright, with the
    bird's bounding box centred and no brightness change or cast; ``zoom`` also scales a
    varied pose; a plain scene replaces the background.

    >>> p = sample_pose(np.random.default_rng(0), 32)
    >>> c = pose_for(WorldConfig(image_size=32, pose="canonical", scene="plain"), p)
    >>> c.facing, c.scale, c.angle, c.background_name, c.cast
    ('right', 1.05, 0.0, 'plain', (1.0, 1.0, 1.0))
    >>> pose_for(WorldConfig(image_size=32), p) is p
    True
    """
    pose = varied
    if config.pose == "canonical":
        scale = CANONICAL_SCALE * float(config.zoom)
        px = scale * config.image_size / 4.7  # pixels per canonical unit (canvas.pixels_per_unit)
        centre = config.image_size / 2.0
        pose = replace(
            pose,
            facing="right",
            scale=scale,
            angle=0.0,
            brightness=1.0,
            cast=(1.0, 1.0, 1.0),
            center=(centre - _BIRD_BOX_CENTRE[0] * px, centre - _BIRD_BOX_CENTRE[1] * px),
        )
    elif config.zoom != 1.0:
        pose = replace(pose, scale=pose.scale * float(config.zoom))
    if config.scene == "plain":
        pose = replace(pose, background=SCENES.index("plain"))
    return pose
