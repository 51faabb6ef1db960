"""The CUB / SUB vocabulary: one typed object shared by loaders, models and metrics.

Every index in this package is 0-based. CUB's own files count attributes, parts and
classes from 1; the loaders convert at the boundary, so ``vocab.attributes[i]`` is the
attribute CUB calls ``i + 1``.

>>> vocab = load_vocabulary()
>>> vocab.num_attributes, vocab.num_parts, vocab.num_classes
(312, 15, 200)
>>> vocab.attribute_index("has_crown_color::yellow")
299
>>> vocab.group_of("has_crown_color::yellow")
'crown_color'
>>> vocab.parts_of("has_eye_color::blue")
('left eye', 'right eye')
>>> len(vocab.sub_attribute_indices), len(set(vocab.sub_attribute_indices) & set(vocab.cbm_112))
(32, 17)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["Vocabulary", "load_vocabulary", "split_attribute", "attribute_phrase"]

_PACKAGED = "cub_vocabulary.json"


def split_attribute(name: str) -> tuple[str, str]:
    """Split a CUB attribute name into (group, value).

    >>> split_attribute("has_bill_shape::needle")
    ('bill_shape', 'needle')
    """
    if "::" not in name:
        raise ValueError(f"not a CUB attribute name (expected 'has_<group>::<value>'): {name!r}")
    group, value = name.split("::", 1)
    return group.removeprefix("has_"), value


def attribute_phrase(name: str) -> str:
    """Human phrase for an attribute, as SUB's substitution keys spell it.

    >>> attribute_phrase("has_crown_color::black")
    'black crown color'
    >>> attribute_phrase("has_bill_shape::all-purpose")
    'all-purpose bill shape'
    """
    group, value = split_attribute(name)
    return f"{value.replace('_', ' ')} {group.replace('_', ' ')}"


@dataclass(frozen=True)
class Vocabulary:
    """CUB-200-2011 attributes, parts and classes plus the SUB benchmark's facts.

    Attributes:
        attributes: the 312 attribute names in CUB ``attributes.txt`` order.
        parts: the 15 part names in CUB ``parts/parts.txt`` order.
        classes: the 200 class folder names (``"017.Cardinal"``) in ``classes.txt`` order.
        cbm_112: 0-based indices of the 112 attributes Koh et al. (2020) keep.
        group_parts: attribute group -> CUB parts it lives on (Aysel et al. Tables 4-5).
        sub_classes: SUB's 33 reference classes (folder names).
        sub_substitutions: SUB phrase (``"black crown color"``) -> attribute name.
        sub_guidance_birds: attribute name -> guide bird for shape/pattern TDG prompts.
    """

    attributes: tuple[str, ...]
    parts: tuple[str, ...]
    classes: tuple[str, ...]
    cbm_112: tuple[int, ...]
    group_parts: dict[str, tuple[str, ...]] = field(hash=False)
    sub_classes: tuple[str, ...]
    sub_substitutions: dict[str, str] = field(hash=False)
    sub_guidance_birds: dict[str, str] = field(hash=False)

    # ----------------------------------------------------------------- sizes
    @property
    def num_attributes(self) -> int:
        return len(self.attributes)

    @property
    def num_parts(self) -> int:
        return len(self.parts)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    # ------------------------------------------------------------ attributes
    @cached_property
    def _attribute_ids(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.attributes)}

    def is_attribute(self, name: str) -> bool:
        """Whether ``name`` is one of the 312 CUB attribute names (a dict lookup)."""
        return name in self._attribute_ids

    def attribute_index(self, name: str) -> int:
        """0-based index of an attribute name; raises ``KeyError`` naming close matches.

        >>> load_vocabulary().attribute_index("has_crown_color::yelow")
        Traceback (most recent call last):
        ...
        KeyError: "unknown attribute 'has_crown_color::yelow' (did you mean 'has_crown_color::yellow', ...?)"
        """
        try:
            return self._attribute_ids[name]
        except KeyError:
            import difflib

            close = difflib.get_close_matches(str(name), self.attributes, n=3, cutoff=0.6)
            hint = (
                f" (did you mean {', '.join(repr(c) for c in close)}?)"
                if close
                else f"; the {len(self.attributes)} names look like 'has_crown_color::black'"
            )
            raise KeyError(f"unknown attribute {name!r}{hint}") from None

    def attribute_indices(self, names: list[str] | tuple[str, ...]) -> list[int]:
        return [self.attribute_index(n) for n in names]

    def group_of(self, attribute: str | int) -> str:
        """Attribute group (``"crown_color"``) of a name or 0-based index."""
        name = self.attributes[attribute] if isinstance(attribute, int) else attribute
        return split_attribute(name)[0]

    @cached_property
    def groups(self) -> dict[str, tuple[int, ...]]:
        """Attribute group -> 0-based attribute indices, in CUB order (28 groups)."""
        out: dict[str, list[int]] = {}
        for i, name in enumerate(self.attributes):
            out.setdefault(split_attribute(name)[0], []).append(i)
        return {g: tuple(ix) for g, ix in out.items()}

    def group_values(self, group: str) -> tuple[str, ...]:
        """Value names of a group in CUB order, e.g. ``group_values("bill_shape")``."""
        if group not in self.groups:
            raise KeyError(f"unknown attribute group {group!r}; known: {sorted(self.groups)}")
        return tuple(split_attribute(self.attributes[i])[1] for i in self.groups[group])

    def parts_of(self, attribute: str | int) -> tuple[str, ...]:
        """CUB parts an attribute lives on; empty for groups with no part (size, shape, ...)."""
        return tuple(self.group_parts.get(self.group_of(attribute), ()))

    def part_index(self, part: str) -> int:
        try:
            return self.parts.index(part)
        except ValueError:
            raise KeyError(f"unknown part {part!r}; known: {list(self.parts)}") from None

    # --------------------------------------------------------------- classes
    def class_index(self, name: str) -> int:
        """0-based class index from a folder name (``"017.Cardinal"``) or a plain
        name (``"Cardinal"``, ``"Blue Jay"``)."""
        for i, c in enumerate(self.classes):
            if name in (c, class_display_name(c), c.split(".", 1)[1]):
                return i
        raise KeyError(f"unknown CUB class {name!r}")

    # ------------------------------------------------------------------- SUB
    @cached_property
    def sub_attribute_indices(self) -> tuple[int, ...]:
        """0-based indices of SUB's 32 substitution attributes, in SUB's order."""
        return tuple(self.attribute_index(a) for a in self.sub_substitutions.values())

    @cached_property
    def cbm_112_with_part(self) -> tuple[int, ...]:
        """The CBM-112 attributes that map to a body part (89 of them)."""
        return tuple(i for i in self.cbm_112 if self.parts_of(i))


def class_display_name(folder: str) -> str:
    """``"073.Blue_Jay"`` -> ``"Blue Jay"``.

    >>> class_display_name("141.Artic_Tern")
    'Artic Tern'
    """
    return folder.split(".", 1)[-1].replace("_", " ")


def _from_json(data: dict[str, Any]) -> Vocabulary:
    return Vocabulary(
        attributes=tuple(data["attributes"]),
        parts=tuple(data["parts"]),
        classes=tuple(data["classes"]),
        cbm_112=tuple(int(i) for i in data["cbm_112"]),
        group_parts={g: tuple(p) for g, p in data["group_parts"].items()},
        sub_classes=tuple(data["sub_classes"]),
        sub_substitutions=dict(data["sub_substitutions"]),
        sub_guidance_birds=dict(data["sub_guidance_birds"]),
    )


@cache
def load_vocabulary(path: str | Path | None = None) -> Vocabulary:
    """Load the packaged vocabulary (or a JSON file in the same shape)."""
    if path is None:
        text = resources.files("concept_grounding.data").joinpath(_PACKAGED).read_text()
    else:
        text = Path(path).read_text()
    return _from_json(json.loads(text))
