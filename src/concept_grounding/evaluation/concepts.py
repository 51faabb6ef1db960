"""Concept names of a user's model, in whatever form the user has them.

A binary concept model's ``C`` output columns are named by one of:

* ``"cub_312"`` (or ``"all"``): the 312 CUB attributes in ``attributes.txt`` order;
* ``"cbm_112"``: the 112 attributes of Koh et al. (2020), in their order;
* ``"sub"``: SUB's 32 substitution attributes, in SUB's order;
* a list of names, each a CUB name (``"has_crown_color::black"``), SUB's Hub spelling
  (``"has_crown_color--black"``) or a SUB phrase (``"black crown color"``);
* a list of integers, indices into ``index_base`` (``"cub_312"``, 0-based, by default;
  ``"cbm_112"`` for "concept 5 of the 112").

>>> names = resolve_concept_names("cbm_112")
>>> len(names), names[0]
(112, 'has_bill_shape::dagger')
>>> resolve_concept_names(["has_crown_color--black", "black crown color", 1])  # three spellings
('has_crown_color::black', 'has_crown_color::black', 'has_bill_shape::dagger')
>>> resolve_concept_names([0, 1], index_base="cbm_112") == names[:2]
True
"""

from __future__ import annotations

from collections.abc import Sequence

from ..loaders.sub import normalise_attribute
from ..vocabulary import Vocabulary, load_vocabulary

__all__ = ["resolve_concept_names", "NAMED_SETS"]

#: the named concept sets a model can declare.
NAMED_SETS = ("cub_312", "all", "cbm_112", "sub")


def _named_set(name: str, vocab: Vocabulary) -> tuple[str, ...]:
    if name in ("cub_312", "all"):
        return tuple(vocab.attributes)
    if name == "cbm_112":
        return tuple(vocab.attributes[i] for i in vocab.cbm_112)
    if name == "sub":
        return tuple(vocab.sub_substitutions.values())
    raise ValueError(f"concept_names: unknown named set {name!r}; use one of {NAMED_SETS} or a list of names")


def resolve_concept_names(
    spec: str | Sequence[str | int], *, index_base: str = "cub_312", vocab: Vocabulary | None = None
) -> tuple[str, ...]:
    """CUB attribute names of a model's output columns (module docstring).

    Raises:
        ValueError: an unknown set, name or out-of-range index (the message names it).
    """
    vocab = vocab or load_vocabulary()
    if isinstance(spec, str):
        return _named_set(spec, vocab)
    base = _named_set(index_base, vocab)
    out: list[str] = []
    for j, item in enumerate(spec):
        if isinstance(item, (int,)) or (hasattr(item, "__index__") and not isinstance(item, str)):
            i = int(item)
            if not 0 <= i < len(base):
                raise ValueError(f"concept_names[{j}]: index {i} is outside {index_base} (0..{len(base) - 1})")
            out.append(base[i])
            continue
        try:
            out.append(normalise_attribute(str(item), vocab))
        except KeyError as err:
            raise ValueError(f"concept_names[{j}]: {err.args[0]}") from None
    if not out:
        raise ValueError("concept_names is empty")
    return tuple(out)
