"""SUB group-mode prompts and the world CLIP's training captions (one place for every CLIP text).

SUB's group mode (docs/sub_accuracy.md; Bader et al. Sec. 5.6): for an attribute group (``crown_color``)
every value of the 312-attribute vocabulary becomes a prompt ("a photo of a bird with a
black crown"), optionally plus a "none" prompt ("a photo of a bird").
:func:`class_caption` is the one zero-shot class prompt (CCI, COVAR and the world CLIP).

>>> attribute_prompt("has_crown_color::black")
'a photo of a bird with a black crown'
>>> attribute_prompt("has_size::very_large_(32_-_72_in)")
'a photo of a very large bird'
>>> group_prompts("bill_length", include_none=True)
['a photo of a bird with a bill about the same as head', 'a photo of a bird with a bill longer than head',
 'a photo of a bird with a bill shorter than head', 'a photo of a bird']
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...vocabulary import Vocabulary, class_display_name, load_vocabulary, split_attribute

__all__ = [
    "NONE_PROMPT",
    "attribute_phrase_for_prompt",
    "attribute_prompt",
    "group_prompts",
    "caption_for_attributes",
    "class_caption",
]

#: the "none of these" option of group mode.
NONE_PROMPT = "a photo of a bird"
#: groups phrased "a <value> bird".
ADJECTIVE_GROUPS = ("size", "shape")
_PATTERN_GROUPS = ("breast_pattern", "back_pattern", "tail_pattern", "belly_pattern", "wing_pattern")


def _clean_value(value: str) -> str:
    value = re.sub(r"_?\(.*?\)", "", value)  # "large_(16_-_32_in)" -> "large"
    return value.replace("_", " ").replace("-wings", " wings").strip()


def attribute_phrase_for_prompt(name: str) -> str:
    """The noun phrase of an attribute as it follows "a bird with" (or, for size and shape,
    the adjective before "bird"). ``"has_crown_color::black"`` -> ``"black crown"``."""
    group, value = split_attribute(name)
    value = _clean_value(value)
    if group in ADJECTIVE_GROUPS:
        return value
    if group.endswith("_color"):
        part = group.removesuffix("_color").replace("_", " ")
        return f"{value} plumage" if part == "primary" else f"{value} {part}"
    if group in _PATTERN_GROUPS:
        return f"{value} {group.removesuffix('_pattern').replace('_', ' ')}"
    if group == "head_pattern":
        return f"{value} head pattern"
    if group == "bill_shape":
        return f"{value} bill"
    if group == "bill_length":
        return f"bill {value}"
    return value  # tail_shape ("forked tail"), wing_shape ("rounded wings")


def with_article(phrase: str) -> str:
    """``"black crown"`` -> ``"a black crown"``; plural-like parts (wings, plumage) keep none."""
    if phrase.endswith(("wings", "underparts", "upperparts", "plumage")):
        return phrase
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def attribute_prompt(name: str) -> str:
    """One prompt per attribute: ``"a photo of a bird with a black crown"``, ``"a photo of a large bird"``."""
    group, _ = split_attribute(name)
    phrase = attribute_phrase_for_prompt(name)
    if group in ADJECTIVE_GROUPS:
        return f"a photo of {with_article(phrase)} bird"
    return f"a photo of a bird with {with_article(phrase)}"


def group_prompts(group: str, vocab: Vocabulary | None = None, include_none: bool = False) -> list[str]:
    """Prompts for every value of ``group`` in vocabulary order (+ :data:`NONE_PROMPT` last)."""
    vocab = vocab or load_vocabulary()
    if group not in vocab.groups:
        raise ValueError(f"unknown attribute group {group!r}; known: {sorted(vocab.groups)}")
    prompts = [attribute_prompt(vocab.attributes[i]) for i in vocab.groups[group]]
    return prompts + [NONE_PROMPT] if include_none else prompts


def caption_for_attributes(names: Sequence[str]) -> str:
    """A training caption naming several attributes: size/shape before "bird", the rest after "with".

    >>> caption_for_attributes(["has_size::small_(5_-_9_in)", "has_crown_color::black", "has_wing_pattern::striped"])
    'a photo of a small bird with a black crown and a striped wing'
    """
    adjectives = [attribute_phrase_for_prompt(n) for n in names if split_attribute(n)[0] in ADJECTIVE_GROUPS]
    phrases = [
        with_article(attribute_phrase_for_prompt(n)) for n in names if split_attribute(n)[0] not in ADJECTIVE_GROUPS
    ]
    text = "a photo of " + (with_article(" ".join(adjectives)) + " bird" if adjectives else "a bird")
    if phrases:
        text += " with " + (", ".join(phrases[:-1]) + " and " + phrases[-1] if len(phrases) > 1 else phrases[0])
    return text


def class_caption(class_name: str) -> str:
    """The zero-shot class prompt the world CLIP also trains on (CCI / COVAR classify with it).

    >>> class_caption("073.Blue_Jay")
    'a photo of a blue jay.'
    """
    return f"a photo of a {class_display_name(class_name).lower()}."
