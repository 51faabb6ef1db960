"""The one export of a study's responses (docs/human_validation.md, "The export"): one row per response, with the
annotator, the record's id, its fields, each question's answer and the record's metadata, as a ``datasets.Dataset``
(and Parquet, :meth:`.study_store.StudyStore.to_parquet`). ``curate``, ConceptBed's Table 3 and the ratings loader read
it; :func:`long_answers` gives SUB's one row per answered question, :func:`rating_rows` the rating study's rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .study import Field, Study

if TYPE_CHECKING:
    import datasets

    from .study_store import StudyStore

__all__ = ["FIXED_COLUMNS", "export", "export_columns", "long_answers", "rating_rows"]

#: the first columns of every export.
FIXED_COLUMNS: tuple[str, ...] = ("annotator", "study", "record")


def _field_feature(field: Field) -> Any:
    import datasets

    return datasets.Sequence(datasets.Value("string")) if field.kind == "images" else datasets.Value("string")


def _metadata_columns(metadata: Iterable[Mapping[str, object]], taken: set[str]) -> dict[str, str]:
    """Metadata key -> its column (``metadata_<key>`` where a field or question has the name), in first-seen order."""
    out: dict[str, str] = {}
    for meta in metadata:
        for key in meta:
            if key not in out:
                out[key] = f"metadata_{key}" if key in taken else key
    return out


def _metadata_value(value: object) -> str | None:
    """A metadata value as the export's text (text as it is, anything else its JSON)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def export_columns(study: Study, metadata_keys: Sequence[str] = ()) -> tuple[str, ...]:
    """The columns of ``study``'s export: :data:`FIXED_COLUMNS`, its fields, its questions, then ``metadata_keys``."""
    return (
        FIXED_COLUMNS
        + tuple(f.name for f in study.fields)
        + tuple(q.name for q in study.questions)
        + tuple(metadata_keys)
    )


def export(store: StudyStore, study: str | Study) -> datasets.Dataset:
    """``study``'s responses in submit order, one row each: :func:`export_columns` (fields of kind ``images`` a list
    of text, every other column text; a metadata value that is not text is its JSON; what a record lacks is empty)."""
    import datasets

    spec = store.study(study)
    records = {r.id: r for r in store.records(spec)}
    responses = store.responses(spec)
    named = {f.name for f in spec.fields} | {q.name for q in spec.questions} | set(FIXED_COLUMNS)
    meta_cols = _metadata_columns((records[r.record].metadata for r in responses), named)
    columns: dict[str, list[object]] = {c: [] for c in export_columns(spec, tuple(meta_cols.values()))}
    for response in responses:
        record = records[response.record]
        columns["annotator"].append(response.annotator)
        columns["study"].append(spec.name)
        columns["record"].append(record.id)
        for f in spec.fields:
            value = record.fields.get(f.name)
            columns[f.name].append([str(v) for v in value] if f.kind == "images" and value else value)  # type: ignore[union-attr]
        for q in spec.questions:
            columns[q.name].append(response.answers.get(q.name))
        for key, column in meta_cols.items():
            columns[column].append(_metadata_value(record.metadata.get(key)))
    features = {c: datasets.Value("string") for c in columns}
    features.update({f.name: _field_feature(f) for f in spec.fields})
    return datasets.Dataset.from_dict(columns, features=datasets.Features(features))


def long_answers(table: Any, study: Study) -> list[tuple[str, str, str, str]]:
    """An export (a ``Dataset`` or a pandas frame) as ``(annotator, record, question, answer)`` rows, one per answered
    question, in the export's order and the study's question order."""
    frame = table.to_pandas() if hasattr(table, "to_pandas") else table
    names = [q.name for q in study.questions]
    return [
        (row["annotator"], row["record"], q, row[q])
        for row in frame[["annotator", "record", *names]].to_dict("records")
        for q in names
        if row[q] is not None
    ]


def rating_rows(table: Any) -> list[tuple[str, str, str, str, str, str, int]]:
    """The rating study's export as :data:`~concept_grounding.loaders.ratings.RATING_COLUMNS` tuples (``rater, item,
    kind, learner, task, concept, rating``), the rating an int."""
    frame = table.to_pandas() if hasattr(table, "to_pandas") else table
    cols = ["annotator", "record", "kind", "learner", "task", "concept", "rating"]
    return [(*row[:-1], int(row[-1])) for row in frame[cols].itertuples(index=False, name=None)]
