"""Concept names of a user's model, in whatever form the user has them.

A binary concept model's ``C`` output columns are named by one of:

* ``"cub_312"`` (or ``"all"``): the 312 CUB attributes in ``attributes.txt`` order;
* ``"cbm_112"``: the 112 attributes of Koh et al. (2020), in their order;
* ``"sub"``: SUB's 32 substitution attributes, in SUB's order;
* a list of names, each a CUB name (``"has_crown_color::black"``), SUB's Hub spelling
  (``"has_crown_color--black"``) or a SUB phrase (``"black crown color"``);
* a list of integers, read as ``index_base`` says (:data:`INDEX_BASES`): 0-based indices
  into the 312 CUB attributes in ``attributes.txt`` order by default (``"cub_312"``: 0 is
  ``has_bill_shape::curved_(up_or_down)``, CUB's attribute id 1); ``"cbm_112"``, 0-based
  into Koh et al.'s 112; ``"cub_id"``, CUB's own 1-based attribute ids as written in
  ``attributes.txt``.

>>> names = resolve_concept_names("cbm_112")
>>> len(names), names[0]
(112, 'has_bill_shape::dagger')
>>> resolve_concept_names(["has_crown_color--black", "black crown color", 1])  # three spellings
('has_crown_color::black', 'has_crown_color::black', 'has_bill_shape::dagger')
>>> resolve_concept_names([0, 1], index_base="cbm_112") == names[:2]
True
>>> resolve_concept_names([2], index_base="cub_id")  # attributes.txt: "2 has_bill_shape::dagger"
('has_bill_shape::dagger',)
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import UsageError, option
from ..loaders.sub import normalise_attribute
from ..vocabulary import Vocabulary, load_vocabulary

__all__ = ["resolve_concept_names", "NAMED_SETS"]

#: the named concept sets a model can declare.
NAMED_SETS = ("cub_312", "all", "cbm_112", "sub")
#: what an integer concept name is, by ``index_base``: (the named set it indexes, its first index).
INDEX_BASES: dict[str, tuple[str, int]] = {
    "cub_312": ("cub_312", 0),
    "cbm_112": ("cbm_112", 0),
    "cub_id": ("cub_312", 1),
}


def _named_set(name: str, vocab: Vocabulary) -> tuple[str, ...]:
    if name in ("cub_312", "all"):
        return tuple(vocab.attributes)
    if name == "cbm_112":
        return tuple(vocab.attributes[i] for i in vocab.cbm_112)
    if name == "sub":
        return tuple(vocab.sub_substitutions.values())
    raise UsageError(f"{option('concept_names', name)}: unknown named set; use one of {NAMED_SETS} or a list of names")


def resolve_concept_names(
    spec: str | Sequence[str | int], *, index_base: str = "cub_312", vocab: Vocabulary | None = None
) -> tuple[str, ...]:
    """CUB attribute names of a model's output columns (module docstring).

    Raises:
        UsageError: an unknown set, name, index base or out-of-range index; the message names
            the item (``concept_names[3]``, its :attr:`~concept_grounding.errors.UsageError.argument`).
    """
    vocab = vocab or load_vocabulary()
    if isinstance(spec, str):
        return _named_set(spec, vocab)
    if index_base not in INDEX_BASES:
        raise UsageError(f"{option('index_base', index_base)} is not one of {sorted(INDEX_BASES)}")
    indexed, first = INDEX_BASES[index_base]
    base = _named_set(indexed, vocab)
    out: list[str] = []
    for j, item in enumerate(spec):
        where = f"concept_names[{j}]"
        if isinstance(item, int) or (hasattr(item, "__index__") and not isinstance(item, str)):
            i = int(item)
            if not first <= i < len(base) + first:
                one_based = index_base == "cub_312" and i == len(base)
                raise UsageError(
                    f"index {i} is outside {index_base} ({first}..{len(base) - 1 + first})",
                    argument=where,
                    hint=f"CUB's own 1-based attribute ids (attributes.txt) need {option('index_base', 'cub_id')}"
                    if one_based
                    else None,
                )
            out.append(base[i - first])
            continue
        try:
            out.append(normalise_attribute(str(item), vocab))
        except KeyError as err:
            raise UsageError(err.args[0], argument=where) from None
    if not out:
        raise UsageError(f"no concept names: pass one per output column with {option('concept_names')}")
    return tuple(out)
