"""The one export of a study's responses (docs/human_validation.md, "The export"): one row per response, with the
annotator, the record's id, its fields, each question's answer and the record's metadata, as a ``datasets.Dataset``
(and Parquet, :meth:`.study_store.StudyStore.to_parquet`). ``curate``, ConceptBed's Table 3 and the ratings loader read
it; :func:`long_answers` gives SUB's one row per answered question (the rating study's rows:
:func:`concept_grounding.loaders.ratings.ratings_frame`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .study import Field, Record, Response, Study

if TYPE_CHECKING:
    import datasets


class StudyReader(Protocol):
    """What the export reads of a store (:class:`~.study_store.StudyStore`)."""

    def study(self, study: str | Study) -> Study: ...

    def records(self, study: str | Study) -> list[Record]: ...

    def responses(self, study: str | Study) -> list[Response]: ...


__all__ = ["FIXED_COLUMNS", "StudyReader", "export", "export_columns", "long_answers"]

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


def export_columns(study: Study | Sequence[Study], metadata_keys: Sequence[str] = ()) -> tuple[str, ...]:
    """The columns of an export of ``study`` (or of several, their columns in turn, each once):
    :data:`FIXED_COLUMNS`, the fields, the questions, then ``metadata_keys``."""
    studies = [study] if isinstance(study, Study) else list(study)
    own = [f.name for s in studies for f in s.fields] + [q.name for s in studies for q in s.questions]
    return tuple(dict.fromkeys([*FIXED_COLUMNS, *own, *metadata_keys]))


def export(store: StudyReader, study: str | Study | Sequence[str | Study]) -> datasets.Dataset:
    """The responses to ``study`` (or to several studies, one after the other) in submit order, one row each:
    :func:`export_columns` (a field of kind ``images`` a list of text, every other column text; a metadata value that
    is not text is its JSON; what a record or its study lacks is empty)."""
    import datasets

    specs = [store.study(s) for s in ([study] if isinstance(study, (str, Study)) else study)]
    responses = [(spec, r) for spec in specs for r in store.responses(spec)]
    records = {(spec.name, r.id): r for spec in specs for r in store.records(spec)}
    named = set(export_columns(specs))
    meta_cols = _metadata_columns((records[s.name, r.record].metadata for s, r in responses), named)
    columns: dict[str, list[object]] = {c: [] for c in export_columns(specs, tuple(meta_cols.values()))}
    for spec, response in responses:
        record = records[spec.name, response.record]
        row: dict[str, object] = {"annotator": response.annotator, "study": spec.name, "record": record.id}
        for f in spec.fields:
            value = record.fields.get(f.name)
            row[f.name] = [str(v) for v in value] if f.kind == "images" and value else value  # type: ignore[union-attr]
        row.update({q.name: response.answers.get(q.name) for q in spec.questions})
        row.update({col: _metadata_value(record.metadata.get(key)) for key, col in meta_cols.items()})
        for column, values in columns.items():
            values.append(row.get(column))
    features = {c: datasets.Value("string") for c in columns}
    features.update({f.name: _field_feature(f) for spec in specs for f in spec.fields})
    return datasets.Dataset.from_dict(columns, features=datasets.Features(features))


def long_answers(table: Any, studies: Sequence[Study]) -> list[tuple[str, str, str, str, str]]:
    """An export (a ``Dataset`` or a pandas frame) of ``studies`` as ``(annotator, record, study, question, answer)``
    rows, one per answered question, in the export's order and each study's question order."""
    frame = table.to_pandas() if hasattr(table, "to_pandas") else table
    asks = {s.name: [q.name for q in s.questions] for s in studies}
    return [
        (row["annotator"], row["record"], row["study"], q, row[q])
        for row in frame.to_dict("records")
        for q in asks.get(row["study"], ())
        if isinstance(row.get(q), str)
    ]
