"""What a bird of the world *is*: its traits, their CUB labels and the species generator.

A bird is a set of **base traits**, one CUB value per base group (each paints its own regions, so
its value is visible and exactly known); ``primary_color``, ``upperparts_color`` and
``underparts_color`` are **derived** from them, and substituting one repaints every base group
behind it. The groups, the derived table and the label noise: docs/world.md.

>>> traits = {**{g: "grey" for g in COLOR_GROUPS}, "eye_color": "black",
...           "bill_shape": "cone", "breast_pattern": "solid", "wing_pattern": "solid",
...           "tail_pattern": "solid"}
>>> new = substitute(traits, "underparts_color", "red")
>>> new["breast_color"], new["belly_color"], new["back_color"]
('red', 'red', 'grey')
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..vocabulary import Vocabulary, split_attribute

__all__ = ["BASE_GROUPS", "DERIVED_GROUPS", "RENDERED_VALUES", "deviate"]

#: One RGB per CUB colour name (sRGB, 0-255).
COLORS: dict[str, tuple[int, int, int]] = {
    "blue": (52, 98, 204),
    "brown": (122, 82, 48),
    "iridescent": (28, 128, 124),
    "purple": (118, 58, 156),
    "rufous": (184, 84, 40),
    "grey": (138, 138, 144),
    "yellow": (242, 208, 44),
    "olive": (118, 122, 52),
    "green": (58, 152, 62),
    "pink": (236, 142, 172),
    "orange": (242, 134, 32),
    "black": (30, 30, 34),
    "white": (244, 244, 238),
    "red": (206, 34, 38),
    "buff": (222, 192, 142),
}

#: Second colour of a ``multi-colored`` pattern on a region of a given colour (wing bars,
#: tail bands, a breast band). It is part of the pattern, not a colour label.
ACCENT: dict[str, str] = {
    "blue": "white",
    "brown": "buff",
    "iridescent": "black",
    "purple": "white",
    "rufous": "black",
    "grey": "white",
    "yellow": "black",
    "olive": "yellow",
    "green": "yellow",
    "pink": "grey",
    "orange": "black",
    "black": "white",
    "white": "black",
    "red": "black",
    "buff": "brown",
}

#: Colour groups with a region of their own, in drawing order.
COLOR_GROUPS: tuple[str, ...] = (
    "crown_color",
    "forehead_color",
    "nape_color",
    "throat_color",
    "breast_color",
    "belly_color",
    "back_color",
    "wing_color",
    "upper_tail_color",
    "leg_color",
    "bill_color",
)

PATTERN_GROUPS: tuple[str, ...] = ("breast_pattern", "wing_pattern", "tail_pattern")

#: Every base group (one value each): the colour groups, eye colour, bill shape, patterns.
BASE_GROUPS: tuple[str, ...] = COLOR_GROUPS + ("eye_color", "bill_shape") + PATTERN_GROUPS

#: Derived group -> base colour groups it is the union of (see the module docstring).
DERIVED_GROUPS: dict[str, tuple[str, ...]] = {
    "primary_color": ("back_color", "wing_color"),
    "upperparts_color": ("nape_color", "back_color", "wing_color"),
    "underparts_color": ("breast_color", "belly_color"),
}

_COLOR_NAMES = tuple(COLORS)
_EYE_COLORS = tuple(c for c in _COLOR_NAMES if c != "iridescent")  # CUB has 14 eye colours
_PATTERNS = ("solid", "spotted", "striped", "multi-colored")

#: The bill shapes the renderer draws (CUB's ``specialized`` is not drawn).
BILL_SHAPES: tuple[str, ...] = (
    "cone",
    "all-purpose",
    "dagger",
    "needle",
    "hooked",
    "curved_(up_or_down)",
    "spatulate",
    "hooked_seabird",
)

#: Group -> the values the world can draw, for base and derived groups.
RENDERED_VALUES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(COLOR_GROUPS, _COLOR_NAMES),
    "eye_color": _EYE_COLORS,
    "bill_shape": BILL_SHAPES,
    **dict.fromkeys(PATTERN_GROUPS, _PATTERNS),
    **dict.fromkeys(DERIVED_GROUPS, _COLOR_NAMES),
}


@dataclass(frozen=True)
class RenderedVocabulary:
    """The part of a CUB vocabulary the world draws, and the check of an edit target.

    Attributes:
        vocab: the full vocabulary (312 attributes).
        groups: the vocabulary's groups the world renders, in vocabulary order.
        attributes: sorted indices of the rendered ``has_<group>::<value>`` attributes.

    >>> from concept_grounding.vocabulary import load_vocabulary
    >>> rv = RenderedVocabulary.of(load_vocabulary())
    >>> rv.parse("has_crown_color::pink"), len(rv.groups) == len(RENDERED_VALUES)
    (('crown_color', 'pink'), True)
    """

    vocab: Vocabulary
    groups: tuple[str, ...]
    attributes: tuple[int, ...]

    @classmethod
    def of(cls, vocab: Vocabulary) -> RenderedVocabulary:
        """The rendered subset of ``vocab`` (per :data:`RENDERED_VALUES`)."""
        groups = tuple(g for g in vocab.groups if g in RENDERED_VALUES)
        indices = sorted(vocab.attribute_index(f"has_{g}::{v}") for g in groups for v in RENDERED_VALUES[g])
        return cls(vocab, groups, tuple(indices))

    def parse(self, target_attribute: str) -> tuple[str, str]:
        """Validate a CUB attribute name as an edit target; return ``(group, value)``.

        Raises:
            ValueError: not a string, not a CUB attribute, or not drawn by the world.
        """
        if not isinstance(target_attribute, str):
            raise ValueError(f"target_attribute must be a CUB attribute name, got {target_attribute!r}")
        try:
            index = self.vocab.attribute_index(target_attribute)
        except KeyError as err:
            raise ValueError(f"unknown target_attribute: {err.args[0]}") from None
        group, value = split_attribute(target_attribute)
        if group not in self.groups:
            raise ValueError(
                f"target_attribute {target_attribute!r}: group {group!r} is not rendered by the bird world; "
                f"rendered groups: {list(self.groups)}"
            )
        if index not in self.attributes:
            raise ValueError(f"target_attribute {target_attribute!r}: value {value!r} is not drawn by the bird world")
        return group, value


def substitute(traits: Mapping[str, str], group: str, value: str) -> dict[str, str]:
    """Return a copy of ``traits`` with ``group`` set to ``value``.

    For a derived group every base group behind it is set to ``value``.
    Raises ``ValueError`` for a group or value the world does not draw.
    """
    if group not in RENDERED_VALUES:
        raise ValueError(
            f"attribute group {group!r} is not rendered by the bird world; rendered groups: {sorted(RENDERED_VALUES)}"
        )
    if value not in RENDERED_VALUES[group]:
        raise ValueError(
            f"value {value!r} of group {group!r} is not rendered by the bird world; "
            f"rendered values: {list(RENDERED_VALUES[group])}"
        )
    out = dict(traits)
    for base in DERIVED_GROUPS.get(group, (group,)):
        out[base] = value
    return out


def trait_labels(traits: Mapping[str, str], vocab: Vocabulary) -> np.ndarray:
    """(312,) uint8 CUB labels of a bird: one-hot base groups, multi-hot derived groups."""
    labels = np.zeros(vocab.num_attributes, dtype=np.uint8)
    for group in BASE_GROUPS:
        labels[vocab.attribute_index(f"has_{group}::{traits[group]}")] = 1
    for group, bases in DERIVED_GROUPS.items():
        for base in bases:
            labels[vocab.attribute_index(f"has_{group}::{traits[base]}")] = 1
    return labels


# --------------------------------------------------------------------- species generator
def _pick(rng: np.random.Generator, table: Mapping[str, float]) -> str:
    names = list(table)
    p = np.asarray(list(table.values()), dtype=float)
    return names[int(rng.choice(len(names), p=p / p.sum()))]


_MAIN = {
    "brown": 4,
    "grey": 4,
    "black": 3,
    "olive": 2,
    "blue": 2,
    "green": 2,
    "red": 1.5,
    "yellow": 1.5,
    "rufous": 1,
    "buff": 1,
    "white": 1,
    "iridescent": 1,
    "purple": 0.7,
    "orange": 0.7,
    "pink": 0.3,
}
_UNDER = {
    "white": 4,
    "buff": 2,
    "grey": 2,
    "yellow": 2,
    "red": 1,
    "orange": 1,
    "rufous": 1,
    "brown": 1,
    "black": 0.7,
    "pink": 0.5,
    "blue": 0.5,
    "green": 0.5,
}
_HEAD = {
    "black": 3,
    "red": 1.5,
    "blue": 1,
    "white": 1,
    "grey": 1.5,
    "yellow": 1,
    "brown": 1,
    "rufous": 0.7,
    "green": 0.7,
    "iridescent": 0.5,
    "purple": 0.5,
    "orange": 0.5,
    "pink": 0.3,
}
_DARK = {"black": 3, "grey": 2, "brown": 2, "white": 0.7, "blue": 0.5, "olive": 0.5}
_EYE = {"black": 6, "brown": 3, "red": 1, "yellow": 1, "white": 0.7, "blue": 0.5, "orange": 0.5}
_LEG = {"grey": 3, "black": 3, "pink": 2, "brown": 2, "yellow": 1, "orange": 1, "red": 0.3}
_BILL = {"black": 4, "grey": 3, "yellow": 1.5, "orange": 1.5, "pink": 1, "brown": 1, "red": 0.7}
_SHAPE = {
    "cone": 3,
    "all-purpose": 4,
    "dagger": 1.5,
    "needle": 1,
    "hooked": 1,
    "curved_(up_or_down)": 1,
    "spatulate": 1,
    "hooked_seabird": 0.7,
}
_BREAST_PAT = {"solid": 5, "striped": 2, "spotted": 1.5, "multi-colored": 1}
_WING_PAT = {"solid": 4, "multi-colored": 3.5, "striped": 1.5, "spotted": 1}
_TAIL_PAT = {"solid": 5, "multi-colored": 2.5, "striped": 1.2, "spotted": 0.8}


def class_traits(class_name: str, seed: int) -> dict[str, str]:
    """Deterministic base traits of a species, from its folder name and the world seed.

    Colours come from a small per-species palette (main, underparts and head colour), so
    regions share values within a class and classes share values with each other.
    """
    rng = np.random.default_rng([seed, zlib.crc32(class_name.encode())])
    main, under, head = _pick(rng, _MAIN), _pick(rng, _UNDER), _pick(rng, _HEAD)
    if rng.random() < 0.4:
        head = main
    t = {
        "crown_color": head,
        "forehead_color": head if rng.random() < 0.8 else _pick(rng, _HEAD),
        "nape_color": head if rng.random() < 0.5 else main,
        "throat_color": under if rng.random() < 0.6 else _pick(rng, {head: 1, "white": 1, "black": 1}),
        "breast_color": under,
        "belly_color": under if rng.random() < 0.7 else _pick(rng, {"white": 2, "buff": 1, "grey": 1}),
        "back_color": main,
        "wing_color": main if rng.random() < 0.6 else _pick(rng, _DARK),
        "leg_color": _pick(rng, _LEG),
        "bill_color": _pick(rng, _BILL),
        "eye_color": _pick(rng, _EYE),
        "bill_shape": _pick(rng, _SHAPE),
        "breast_pattern": _pick(rng, _BREAST_PAT),
        "wing_pattern": _pick(rng, _WING_PAT),
        "tail_pattern": _pick(rng, _TAIL_PAT),
    }
    t["upper_tail_color"] = t["wing_color"] if rng.random() < 0.6 else _pick(rng, {main: 2, "black": 1})
    return {g: t[g] for g in BASE_GROUPS}


def deviate(traits: Mapping[str, str], rate: float, rng: np.random.Generator) -> dict[str, str]:
    """Per-image traits: each base group independently, with probability ``rate``, takes
    another drawable value (uniformly), so class-level labels are imperfect like CUB's."""
    out = dict(traits)
    flips = rng.random(len(BASE_GROUPS)) < rate
    picks = rng.random(len(BASE_GROUPS))
    for group, flip, u in zip(BASE_GROUPS, flips, picks):
        if flip:
            others = [v for v in RENDERED_VALUES[group] if v != traits[group]]
            out[group] = others[int(u * len(others))]
    return out
