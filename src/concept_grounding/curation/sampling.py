"""Which candidates humans see (SUB Sec. 4.3, App. E; docs/human_validation.md).

* study 1: ``per_attribute`` images per S+ attribute (paper: 40), uniformly over its
  pairings: the pairings are visited round-robin in a seeded order, each contributing its
  next (seeded) image, until the attribute has enough or runs out;
* study 2: ``per_pairing`` images per (reference class, S+) pairing (paper: 3).

Candidates are the rows of a ``generate`` / ``filter`` ``metadata.jsonl`` (``id`` or
``file_name``, ``reference_class``, ``target_attribute``). Store ids are
``"<study>:<candidate id>"`` so one image can be in both studies.

>>> rows = [{"id": f"c{i}", "reference_class": "017.Cardinal", "target_attribute": "has_crown_color::pink"}
...         for i in range(5)]
>>> items = study_items(rows, per_attribute=2, per_pairing=1, seed=0)
>>> [it.study for it in items], len({it.image for it in items})
([1, 1, 2], 3)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from ..vocabulary import Vocabulary, load_vocabulary
from .annotation_items import ImageItem, study1_item, study2_item

__all__ = ["PER_ATTRIBUTE", "PER_PAIRING", "candidate_id", "study_items", "group_choices"]

#: SUB App. E: 40 study-1 images per attribute, 3 study-2 images per pairing.
PER_ATTRIBUTE = 40
PER_PAIRING = 3


def candidate_id(row: Mapping[str, object]) -> str:
    """A candidate's id: its ``id`` field, else its ``file_name``."""
    return str(row.get("id", row.get("file_name")))


def group_choices(target_attribute: str, vocab: Vocabulary) -> tuple[str, ...]:
    """Study 2's options: every attribute of S+'s group, in vocabulary order (no "none")."""
    return tuple(vocab.attributes[i] for i in vocab.groups[vocab.group_of(target_attribute)])


def _by_pairing(rows: Sequence[Mapping[str, object]]) -> dict[tuple[str, str], list[Mapping[str, object]]]:
    out: dict[tuple[str, str], list] = defaultdict(list)
    for r in rows:
        out[(str(r["reference_class"]), str(r["target_attribute"]))].append(r)
    return out


def study_items(
    rows: Sequence[Mapping[str, object]],
    *,
    per_attribute: int = PER_ATTRIBUTE,
    per_pairing: int = PER_PAIRING,
    seed: int = 0,
    vocab: Vocabulary | None = None,
) -> list[ImageItem]:
    """Study-1 then study-2 :class:`~.annotation_items.ImageItem` s for ``rows`` (see the module docstring)."""
    vocab = vocab or load_vocabulary()
    rng = np.random.default_rng(seed)
    pairings = _by_pairing(rows)
    shuffled = {p: [imgs[i] for i in rng.permutation(len(imgs))] for p, imgs in pairings.items()}
    by_attribute: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for p in pairings:
        by_attribute[p[1]].append(p)
    items: list[ImageItem] = []
    for attribute, plist in by_attribute.items():
        order = [plist[i] for i in rng.permutation(len(plist))]
        queues = {p: list(shuffled[p]) for p in order}
        taken = 0
        while taken < per_attribute and any(queues.values()):
            for p in order:
                if queues[p] and taken < per_attribute:
                    r = queues[p].pop(0)
                    items.append(study1_item(f"1:{candidate_id(r)}", p[0], attribute, candidate=candidate_id(r)))
                    taken += 1
    for p, imgs in shuffled.items():
        for r in imgs[-per_pairing:][::-1] if per_pairing else []:
            items.append(
                study2_item(f"2:{candidate_id(r)}", p[0], p[1], group_choices(p[1], vocab), candidate=candidate_id(r))
            )
    return items
