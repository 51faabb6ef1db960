"""Compositions: the four categories of ConceptBed's compositional prompts, drawn with exact truth.

category      in a caption                                    truth
============= =============================================== ===================================
attribute     ``a photo of a {name} with a red crown``        the (312,) per-image labels
relation      ``... in the sky`` / ``on a branch`` / ...      the scene (:data:`RELATIONS`)
action        ``... facing left`` / ``facing right``          the facing of every bird
counting      ``a photo of two {name}`` (1-3 birds)           the number of birds
============= =============================================== ===================================

A composition of sample ``index`` draws that sample's bird (traits, scene, facing, lighting
and noise: :meth:`BirdWorld.sample`'s) ``count`` times: one bird is the sample itself, two and
three birds are smaller copies side by side, each with its own jitter, over one background.
Every bird shows the same traits, so the attribute truth holds for all of them.
A prompt or caption that asks for a composition has one grammar, :class:`CompositionPrompt`
(:data:`PROMPT_GRAMMAR`): every caption, prompt and question of a composition is written and read by it.
=======
ConceptBed (Sec. 4.2, App. F) composes a learnt concept V* with attributes, relations (the scene),
actions (the facing) and counting (1-3 birds); :meth:`BirdWorld.composition` draws a sample's bird
``count`` times over one background and knows what it drew (:data:`RELATIONS`). Every bird shows
the same traits, so the attribute truth holds for all of them. Every caption, prompt and question of a
composition is written and read by one grammar, :class:`CompositionPrompt` (:data:`PROMPT_GRAMMAR`).
Manual: docs/world.md, "Compositions".

>>> from concept_grounding.world import BirdWorld, WorldConfig
>>> world = BirdWorld(WorldConfig(image_size=32))
>>> one, three = world.composition(4, count=1), world.composition(4, count=3)
>>> bool((one.image == world.sample(4).image).all()), three.count, three.bird_masks.shape
(True, 3, (3, 32, 32))
>>> three.scene == one.scene == world.sample(4).pose.background_name, three.relation
(True, 'in the sky')
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .backgrounds import draw_background
from .canvas import Canvas
from .config import Pose, WorldConfig
from .render import draw_bird, light, part_centres

__all__ = [
    "CATEGORIES",
    "COUNT_WORDS",
    "RELATIONS",
    "ACTIONS",
    "PROMPT_GRAMMAR",
    "CompositionPrompt",
    "Composition",
    "composition_config",
    "flock_poses",
    "render_flock",
]

#: ConceptBed's composition categories, in the paper's order.
CATEGORIES: tuple[str, ...] = ("relation", "action", "attribute", "counting")
#: Number of birds -> the word a caption counts them with.
COUNT_WORDS: dict[int, str] = {1: "a", 2: "two", 3: "three"}
#: Scene (a varied world's background) -> the relation a caption names it with.
RELATIONS: dict[str, str] = {
    "sky": "in the sky",
    "foliage": "on a branch",
    "water": "by the water",
    "ground": "on the ground",
    "reeds": "in the reeds",
}
#: Facing -> the action a caption names it with.
ACTIONS: dict[str, str] = {"left": "facing left", "right": "facing right"}
#: How a prompt asks for a composition: the count (always named), the noun and the optional phrases, in this order.
PROMPT_GRAMMAR = "a photo of {a|two|three} {noun}[ with {attribute}][ {relation}][ {action}]"

_PROMPT = re.compile(
    rf"^a photo of (?P<count>{'|'.join(COUNT_WORDS.values())}) (?P<noun>V\*|[a-z][a-z' -]*?)"
    r"(?: with (?P<attribute>[a-z][a-z' -]*?))?"
    rf"(?: (?P<relation>{'|'.join(map(re.escape, RELATIONS.values()))}))?"
    rf"(?: (?P<action>{'|'.join(map(re.escape, ACTIONS.values()))}))?$"
)

#: Per count: the birds' size (times the sample's) and their horizontal slots (fractions of the width).
_FLOCK_LAYOUT: dict[int, tuple[float, tuple[float, ...]]] = {
    1: (1.0, (0.5,)),
    2: (0.52, (0.29, 0.71)),
    3: (0.38, (0.18, 0.5, 0.82)),
}


@dataclass(frozen=True)
class CompositionPrompt:
    """What a composition prompt asks for, in :data:`PROMPT_GRAMMAR` (ConceptBed Sec. 4.2, App. F;
    docs/guide/conceptbed.md).

    Attributes:
        noun: the concept as written (``"V*"``, ``"bird"``, a species name).
        count: birds asked for (a key of :data:`COUNT_WORDS`).
        attribute: the phrase after ``with`` (``"a blue colored crown"``), or ``None``.
        scene: the scene named by its relation (a key of :data:`RELATIONS`), or ``None``.
        facing: the facing named by its action (a key of :data:`ACTIONS`), or ``None``.

    >>> CompositionPrompt("V*", 2, scene="sky").text
    'a photo of two V* in the sky'
    >>> CompositionPrompt.parse("a photo of a blue jay with a red crown on a branch facing left")
    CompositionPrompt(noun='blue jay', count=1, attribute='a red crown', scene='foliage', facing='left')
    >>> CompositionPrompt.parse("a painting of a V*") is None
    True
    """

    noun: str
    count: int = 1
    attribute: str | None = None
    scene: str | None = None
    facing: str | None = None

    def __post_init__(self) -> None:
        if self.count not in COUNT_WORDS:
            raise ValueError(f"count must be one of {sorted(COUNT_WORDS)}, got {self.count!r}")
        if self.scene is not None and self.scene not in RELATIONS:
            raise ValueError(f"scene must be one of {sorted(RELATIONS)} or None, got {self.scene!r}")
        if self.facing is not None and self.facing not in ACTIONS:
            raise ValueError(f"facing must be one of {sorted(ACTIONS)} or None, got {self.facing!r}")

    @property
    def text(self) -> str:
        """The prompt, e.g. ``"a photo of two V* on a branch facing left"``."""
        words = [f"a photo of {COUNT_WORDS[self.count]} {self.noun}"]
        if self.attribute:
            words.append(f"with {self.attribute}")
        if self.scene is not None:
            words.append(RELATIONS[self.scene])
        if self.facing is not None:
            words.append(ACTIONS[self.facing])
        return " ".join(words)

    @classmethod
    def parse(cls, prompt: str) -> CompositionPrompt | None:
        """The parts of ``prompt`` (lower case, as :attr:`text` writes it); ``None`` if it is not in the grammar."""
        m = _PROMPT.match(prompt)
        if m is None:
            return None
        count = next(k for k, word in COUNT_WORDS.items() if word == m["count"])
        scene = next((k for k, phrase in RELATIONS.items() if phrase == m["relation"]), None)
        facing = next((k for k, phrase in ACTIONS.items() if phrase == m["action"]), None)
        return cls(m["noun"], count, m["attribute"], scene, facing)


@dataclass(frozen=True, eq=False)
class Composition:
    """One composed drawing and its truth.

    Attributes:
        index: the world sample it draws (species, traits, scene, facing, noise).
        label: 0-based class index.
        count: birds in the picture (1-3).
        scene: background name (:data:`~concept_grounding.world.SCENES`).
        facing: ``"left"`` or ``"right"`` (every bird faces the same way).
        image: (H, W, 3) uint8.
        mask: (H, W) bool, True on any bird.
        bird_masks: (count, H, W) bool, the visible pixels of each bird (later birds in front).
        part_xy: (count, 15, 2) float32 part centres of each bird in pixels.
        attributes: (312,) uint8 exact CUB labels every bird shows.
    """

    index: int
    label: int
    count: int
    scene: str
    facing: str
    image: np.ndarray
    mask: np.ndarray
    bird_masks: np.ndarray
    part_xy: np.ndarray
    attributes: np.ndarray

    @property
    def relation(self) -> str | None:
        """The caption phrase of the scene (``None`` for the plain backdrop)."""
        return RELATIONS.get(self.scene)

    @property
    def action(self) -> str:
        """The caption phrase of the facing."""
        return ACTIONS[self.facing]


def composition_config(config: WorldConfig) -> WorldConfig:
    """The world config compositions are drawn in: ``config`` with varied pose and scene."""
    return replace(config, pose="varied", scene="varied")


def flock_poses(pose: Pose, count: int, image_size: int, rng: np.random.Generator) -> list[Pose]:
    """``count`` poses for ``count`` birds drawn in one picture: ``[pose]`` for one bird; for two
    or three, the sample's pose shrunk (``_FLOCK_LAYOUT``) and placed in left-to-right slots with
    a small jitter of position (+-3 % across, +-10 % down) and rotation (+-8 degrees).

    >>> from concept_grounding.world.config import sample_pose
    >>> p = sample_pose(np.random.default_rng(0), 64)
    >>> [round(q.center[0] / 64, 1) for q in flock_poses(p, 3, 64, np.random.default_rng(1))]
    [0.2, 0.5, 0.8]
    """
    if count not in _FLOCK_LAYOUT:
        raise ValueError(f"count must be one of {sorted(_FLOCK_LAYOUT)}, got {count}")
    if count == 1:
        return [pose]
    shrink, slots = _FLOCK_LAYOUT[count]
    out = []
    for slot in slots:
        x = image_size * (slot + rng.uniform(-0.03, 0.03))
        y = image_size * (0.5 + rng.uniform(-0.1, 0.1))
        out.append(
            replace(pose, scale=pose.scale * shrink, center=(float(x), float(y)), angle=float(rng.uniform(-8.0, 8.0)))
        )
    return out


def render_flock(
    traits: Mapping[str, str], poses: Sequence[Pose], image_size: int, noise_seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw one bird with ``traits`` in each of ``poses`` over the first pose's scene (its perch
    or horizon under the first bird), later birds in front; lit by the first pose.

    With one pose it draws exactly what :func:`~concept_grounding.world.render.render_bird`
    draws (the same noise draws in the same order).

    Returns:
        ``(image, bird_masks, part_xy)``: (H, W, 3) uint8, (B, H, W) bool visible pixels of
        each bird, (B, 15, 2) float32 part centres.
    """
    size = int(image_size)
    rng = np.random.default_rng(noise_seed)
    grain = rng.standard_normal((size, size), dtype=np.float32)
    canvases = [Canvas(p, size, grain) for p in poses]
    first = canvases[0]
    fx, fy = first.to_pixels(np.array([0.05]), np.array([1.1]))
    feet = (float(fx[0]), float(fy[0]), np.deg2rad(poses[0].angle), first.s)
    composite = draw_background(poses[0].background_name, size, size, rng, grain, feet)
    for cv in canvases:
        draw_bird(cv, traits)
        composite = cv.finish(composite)
    masks = np.stack([cv.pmap > 0 for cv in canvases])
    for i in range(len(canvases) - 1):  # hidden behind a bird drawn later
        masks[i] &= ~masks[i + 1 :].any(axis=0)
    xy = np.stack([part_centres(cv, traits, *_sides(cv.pose))[0] for cv in canvases])
    return light(composite, poses[0]), masks, xy


def _sides(pose: Pose) -> tuple[str, str]:
    return ("right", "left") if pose.facing == "right" else ("left", "right")
