"""TDG prompt pairs ``(c_R, c_G)``: SUB (Bader et al.), Sec. 4.1, App. B (guide birds), App. D.

Three templates (colour, shape, pattern) over ``{R}`` the reference class, ``{S}`` the target
attribute's phrase and ``{G}`` the guide bird; the prompting-only baseline (Fig. 4) is ``c_R`` alone.
The templates, the phrases and where the code follows App. D over Sec. 4.1: docs/tdg.md, "Prompts".

>>> p = tdg_prompts("017.Cardinal", "has_breast_pattern::spotted")
>>> p.reference
'A photo of a Cardinal with a spotted belly like a Brown Thrasher'
>>> p.guide
'A photo of a Brown Thrasher with a spotted belly'
>>> prompting_only_prompt("Blue Jay", "has_bill_shape::needle")
'A photo of a Blue Jay with the body of a Blue Jay and a beak like a Hummingbird'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..vocabulary import Vocabulary, class_display_name, load_vocabulary, split_attribute

__all__ = [
    "Category",
    "TDGPrompts",
    "attribute_category",
    "attribute_text",
    "tdg_prompts",
    "prompting_only_prompt",
]

Category = Literal["colour", "shape", "pattern"]

#: attribute group -> phrase template for ``{S}`` ({v}: the value, underscores as spaces).
_COLOUR_PHRASES: dict[str, str] = {
    "crown_color": "{v} colored feathers on the crown of its head",  # App. D
    "breast_color": "a {v} colored breast",  # App. D
    "back_color": "a {v} colored back",
    "bill_color": "a {v} colored bill",
    "belly_color": "a {v} colored belly",
    "eye_color": "{v} colored eyes",
    "forehead_color": "{v} colored feathers on its forehead",
    "leg_color": "{v} colored legs",
    "nape_color": "a {v} colored nape",
    "primary_color": "{v} as its primary color",
    "throat_color": "a {v} colored throat",
    "under_tail_color": "{v} colored feathers under its tail",
    "underparts_color": "{v} colored underparts",
    "upper_tail_color": "{v} colored feathers on top of its tail",
    "upperparts_color": "{v} colored upperparts",
    "wing_color": "{v} colored wings",
}
_PATTERN_PHRASES: dict[str, str] = {
    "breast_pattern": "{v} belly",  # App. D: "spotted breast pattern" -> "a spotted belly"
    "tail_pattern": "{v} tail",  # App. D: "solid tail"
    "belly_pattern": "{v} belly",
    "back_pattern": "{v} back",
    "head_pattern": "{v} head",
    "wing_pattern": "{v} pattern on its wings",
}
_SHAPE_GROUPS = ("bill_shape",)


@dataclass(frozen=True)
class TDGPrompts:
    """One TDG prompt pair and what it was built from."""

    reference: str
    guide: str
    reference_class: str
    attribute: str
    category: Category
    guide_bird: str


def _check_attribute(attribute: str, vocab: Vocabulary) -> str:
    try:
        vocab.attribute_index(attribute)
    except KeyError as err:
        raise ValueError(f"attribute: {err.args[0]}") from None
    return split_attribute(attribute)[0]


def attribute_category(attribute: str, vocab: Vocabulary | None = None) -> Category:
    """``"colour"``, ``"shape"`` or ``"pattern"`` for a CUB attribute name.

    Raises:
        ValueError: unknown attribute, or a group TDG has no template for (size, bill length,
            wing/tail shape, overall shape).

    >>> attribute_category("has_tail_pattern::solid"), attribute_category("has_bill_shape::cone")
    ('pattern', 'shape')
    """
    group = _check_attribute(attribute, vocab or load_vocabulary())
    if group in _COLOUR_PHRASES:
        return "colour"
    if group in _PATTERN_PHRASES:
        return "pattern"
    if group in _SHAPE_GROUPS:
        return "shape"
    raise ValueError(f"attribute: no TDG prompt template for group {group!r} ({attribute!r})")


def attribute_text(attribute: str, vocab: Vocabulary | None = None) -> str:
    """The natural phrase ``{S}`` for a colour or pattern attribute.

    >>> attribute_text("has_crown_color::black")
    'black colored feathers on the crown of its head'
    >>> attribute_text("has_tail_pattern::multi-colored")
    'multi-colored tail'
    """
    category = attribute_category(attribute, vocab)
    group, value = split_attribute(attribute)
    value = value.replace("_", " ")
    if category == "colour":
        return _COLOUR_PHRASES[group].format(v=value)
    if category == "pattern":
        return _PATTERN_PHRASES[group].format(v=value)
    raise ValueError(f"attribute: shape attributes have no {{S}} phrase ({attribute!r}); the guide bird carries them")


def _class_name(reference_class: str, vocab: Vocabulary) -> str:
    try:
        return class_display_name(vocab.classes[vocab.class_index(reference_class)])
    except KeyError:
        raise ValueError(f"reference_class: unknown CUB class {reference_class!r}") from None


def tdg_prompts(
    reference_class: str,
    attribute: str,
    *,
    guide_bird: str | None = None,
    vocab: Vocabulary | None = None,
) -> TDGPrompts:
    """Build ``(c_R, c_G)`` for a reference class and a target attribute (SUB Sec. 4.1).

    Args:
        reference_class: CUB folder name (``"073.Blue_Jay"``) or plain name (``"Blue Jay"``).
        attribute: CUB attribute name (``"has_crown_color::yellow"``).
        guide_bird: overrides App. B's guide bird; needed for shape/pattern attributes
            App. B does not list. Ignored for colour (the guide is "bird").
        vocab: defaults to the packaged vocabulary.
    Raises:
        ValueError: unknown class or attribute, a group without a template, or a missing
            guide bird.
    """
    vocab = vocab or load_vocabulary()
    category = attribute_category(attribute, vocab)
    name = _class_name(reference_class, vocab)
    if category == "colour":
        phrase = attribute_text(attribute, vocab)
        return TDGPrompts(
            f"A photo of a {name} with {phrase}", f"A photo of a bird with {phrase}", name, attribute, category, "bird"
        )
    guide = guide_bird or vocab.sub_guidance_birds.get(attribute)
    if not guide:
        raise ValueError(f"guide_bird: SUB App. B lists no guide bird for {attribute!r}; pass guide_bird= explicitly")
    if category == "shape":
        reference = f"A photo of a {name} with the body of a {name} and a beak like a {guide}"
        return TDGPrompts(reference, f"A photo of a {guide}", name, attribute, category, guide)
    phrase = attribute_text(attribute, vocab)
    return TDGPrompts(
        f"A photo of a {name} with a {phrase} like a {guide}",
        f"A photo of a {guide} with a {phrase}",
        name,
        attribute,
        category,
        guide,
    )


def prompting_only_prompt(
    reference_class: str, attribute: str, *, guide_bird: str | None = None, vocab: Vocabulary | None = None
) -> str:
    """The prompting-only baseline: ``c_R`` alone, to be generated without a tie (SUB Fig. 4)."""
    return tdg_prompts(reference_class, attribute, guide_bird=guide_bird, vocab=vocab).reference
