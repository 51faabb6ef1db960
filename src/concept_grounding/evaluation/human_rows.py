"""The Human rows of SUB's Tables 1-2, computed from study-2 answers (Sec. 5.5-5.6, App. E; docs/human_validation.md).

Here, below both ``bench`` (whose report shows the rows) and ``curation`` (whose ``curate``
job writes the answers), as the import layers require; both import it from here.

Every study-2 answer (an annotator picked the attribute of S+'s group present in an image)
is scored as one prediction of a model by :func:`~concept_grounding.metrics.sub_accuracy`:
the scores are one-hot over the vocabulary's attributes at the chosen attribute, so

* binary mode: S+ is predicted present iff chosen == S+ (P = 1 > 0.5), each S- absent iff
  chosen != S- (P = 0 <= 0.5);
* group mode: the group's argmax is the chosen attribute.

Only the answers on the curated (kept) images count when ``kept`` is given. The paper's
published human numbers are never used here; a report may show them only as a separate
line marked "as published" (:data:`AS_PUBLISHED`).

:func:`human_rows_beside` finds the answers of a dataset made by ``curate``: ``<out>/dataset``
is the SUB source, ``<out>/annotations.parquet`` and ``<out>/kept.jsonl`` lie beside it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ..metrics import sub_accuracy
from ..vocabulary import Vocabulary, load_vocabulary

__all__ = ["human_rows", "human_table_rows", "human_rows_beside", "AS_PUBLISHED", "ANSWERS_FILE", "KEPT_FILE"]

#: ``curate``'s files beside its ``dataset`` folder: every answer, and the kept candidates' metadata rows.
ANSWERS_FILE, KEPT_FILE = "annotations.parquet", "kept.jsonl"
#: how a report must name the paper's typed-in human numbers when it shows them at all.
AS_PUBLISHED = "human (SUB paper, real images), as published"


def human_rows(
    answers: pd.DataFrame,
    candidates: pd.DataFrame,
    *,
    kept: Iterable[str] | None = None,
    vocab: Vocabulary | None = None,
) -> dict[str, dict]:
    """``{"binary": sub_accuracy(...), "group": sub_accuracy(...)}`` of the study-2 answers.

    Args:
        answers: ``annotator, image, study, answer`` and ``candidate`` (the id after ``":"`` of
            ``image``; :func:`~concept_grounding.curation.curate.answers_frame`); only
            ``study == 2`` rows are used.
        candidates: indexed by candidate id (:func:`~concept_grounding.curation.curate.candidates_frame`:
            ``target_attribute``, ``removed_attributes``, ``reference_class`` per candidate id).
        kept: candidate ids to score (the curated set); default every candidate.
        vocab: the vocabulary (default CUB's).

    Returns:
        per mode, ``sub_accuracy``'s dict (``s_plus``, ``s_minus`` in [0, 1], breakdowns),
        plus ``answers`` (N scored) and ``annotators``.
    """
    vocab = vocab or load_vocabulary()
    s2 = answers[answers.study == 2]
    if kept is not None:
        s2 = s2[s2["candidate"].isin(set(map(str, kept)))]
    if s2.empty:
        raise ValueError("no study-2 answers to score (on the kept images)")
    rows = candidates.loc[s2["candidate"]]
    index = {a: i for i, a in enumerate(vocab.attributes)}
    for answer, target in zip(s2["answer"], rows["target_attribute"]):
        if answer not in index or vocab.group_of(answer) != vocab.group_of(target):
            raise ValueError(f"study-2 answer {answer!r} is not an attribute of {target!r}'s group")
    scores = np.zeros((len(s2), len(vocab.attributes)), dtype=np.float32)
    scores[np.arange(len(s2)), [index[a] for a in s2["answer"]]] = 1.0
    removed = [list(r) if r is not None else [] for r in rows["removed_attributes"]]
    out = {}
    for mode in ("binary", "group"):
        res = sub_accuracy(
            scores,
            list(rows["target_attribute"]),
            removed,
            concept_names=list(vocab.attributes),
            reference_classes=list(rows["reference_class"]),
            mode=mode,
            vocabulary=vocab,
        )
        res["answers"], res["annotators"] = len(s2), int(s2["annotator"].nunique())
        out[mode] = res
    return out


def human_table_rows(result: Mapping[str, Mapping]) -> dict[str, dict]:
    """:func:`human_rows`'s result as rows for SUB's Tables 1-2 (``"table1"``: binary,
    ``"table2"``: group), in the bench report's row shape: ``name``, ``s_plus``,
    ``s_minus``, ``chance_s_plus``, ``chance_s_minus`` (fractions), ``n_s_plus``."""
    out = {}
    for table, mode in (("table1", "binary"), ("table2", "group")):
        r = result[mode]
        out[table] = {
            "name": f"human (study 2: {r['answers']} answers by {r['annotators']} annotators, computed)",
            "s_plus": float(r["s_plus"]),
            "s_minus": float(r["s_minus"]),
            "chance_s_plus": float(r["chance_s_plus"]),
            "chance_s_minus": float(r["chance_s_minus"]),
            "n_s_plus": int(r["n_s_plus"]),
        }
    return out


def human_rows_beside(sub: str | Path | None, vocab: Vocabulary | None = None) -> dict[str, dict] | None:
    """The computed Human rows (:func:`human_table_rows`) of a SUB source that ``curate``
    wrote: ``sub`` is ``<out>/dataset`` (or ``<out>``), scored from ``<out>/annotations.parquet``'s
    study-2 answers on the candidates of ``<out>/kept.jsonl``. ``None`` when ``sub`` is not such
    a folder (a Hub id, SUB's own copy, no study-2 answer on a kept image)."""
    if sub is None or not Path(sub).is_dir():
        return None
    folder = Path(sub)
    folder = folder.parent if folder.name == "dataset" else folder
    answers_file, kept_file = folder / ANSWERS_FILE, folder / KEPT_FILE
    if not (answers_file.is_file() and kept_file.is_file()):
        return None
    rows = [json.loads(line) for line in kept_file.read_text().splitlines() if line.strip()]
    if not rows:
        return None
    cands = pd.DataFrame(rows)
    cands.index = [str(r.get("id", r.get("file_name"))) for r in rows]
    answers = pd.read_parquet(answers_file)
    answers["study"] = answers["study"].astype(int)
    answers["candidate"] = answers["image"].astype(str).str.split(":", n=1).str[-1]
    if not ((answers.study == 2) & answers.candidate.isin(cands.index)).any():
        return None
    return human_table_rows(human_rows(answers, cands, kept=cands.index, vocab=vocab))
