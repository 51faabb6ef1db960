"""Converting an annotation file of schema versions 1-4 (SUB's ``images`` / ``answers`` / ``counts`` / ``leases``,
``tokens`` from version 2, the rating study's ``rating_*`` tables from version 3, their trigger-kept counts in version
4) to the study store's tables, in one transaction (docs/human_validation.md, "Older files").

Everything is kept: each image becomes a record of ``sub-1`` / ``sub-2`` (:func:`~.study.sub_record`), each rating
item one of ``conceptbed-rating`` (:func:`~.study.rating_record`, its shuffle number kept), an annotator's answers to
an image one response, each rating one response, every lease (its expiry kept) and every token hash; the counts are
recomputed from the responses and leases (the version-4 count tables and triggers are dropped, the new tallies
derived from the rows).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable

from .annotation_items import DEFAULT_K, ImageItem
from .study import CONCEPTBED_RATING, STUDIES, Record, rating_record, sub_record
from .study_db import SCHEMA, SCHEMA_VERSION, statements, stored_k

__all__ = ["OLDER", "migrate", "shuffle_number"]

#: the versions converted (SUB's own tables, then with tokens, with the rating study, with its counts).
OLDER = (1, 2, 3, 4)
#: the range of the records' ``shuffle`` numbers and of the points an annotator's order draws (2^31 - 1).
SHUFFLE_PRIME = 2_147_483_647

#: the tables of versions 1-4, children before the tables they refer to.
_OLD_TABLES = (
    "answers",
    "counts",
    "leases",
    "tokens",
    "ratings",
    "rating_leases",
    "rating_taken",
    "rating_rater_taken",
    "rating_items",
    "images",
)


def shuffle_number(record_id: str) -> int:
    """A record's fixed pseudo-random number in ``[0, 2^31 - 1)`` (from which each annotator's shuffled order is
    drawn; the rating study's numbers of versions 3-4 are the same function of the item's id)."""
    import hashlib

    digest = hashlib.sha256(f"item\0{record_id}".encode("utf-8", "surrogatepass")).digest()[:8]
    return int.from_bytes(digest, "little") % SHUFFLE_PRIME


def migrate(con: sqlite3.Connection) -> None:
    """Convert the open file of version 1-4 in one ``BEGIN IMMEDIATE`` transaction (all or nothing); a process that
    converted it meanwhile (the version read again inside the transaction) leaves nothing to do."""
    con.execute("BEGIN IMMEDIATE")
    try:
        if con.execute("PRAGMA user_version").fetchone()[0] in OLDER:
            _convert(con)
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _convert(con: sqlite3.Connection) -> None:
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    records, responses, leases, annotators = _sub_rows(con)
    if "tokens" in tables:
        annotators += [tuple(r) for r in con.execute("SELECT annotator, hash, created FROM tokens ORDER BY rowid")]
    if "rating_items" in tables:
        rated = _rating_rows(con)
        records += rated[0]
        responses += rated[1]
        leases += rated[2]
    for table in _OLD_TABLES:
        if table in tables:
            con.execute(f"DROP TABLE {table}")
    for sql in statements(SCHEMA):
        con.execute(sql)
    con.executemany(
        "INSERT INTO records (study, id, fields, options, metadata, position, shuffle) VALUES " + _q(7), records
    )
    con.executemany("INSERT INTO responses (annotator, study, record, answers, created) VALUES " + _q(5), responses)
    con.executemany("INSERT INTO leases (annotator, study, record, expires) VALUES " + _q(4), leases)
    con.executemany("INSERT OR IGNORE INTO annotators (annotator, token_hash, created) VALUES " + _q(3), annotators)
    con.execute(
        "INSERT OR IGNORE INTO annotators (annotator, created) SELECT annotator, MIN(created) FROM responses "
        "GROUP BY annotator"
    )
    recount(con)
    con.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def recount(con: sqlite3.Connection) -> None:
    """Every count of the schema (:data:`~.study_db.SCHEMA`'s note) computed from the rows, with each study's ``k``
    (the file's, else the declared one)."""
    con.execute(
        "UPDATE records SET n = (SELECT COUNT(*) FROM responses r WHERE r.study = records.study AND r.record = "
        "records.id), taken = (SELECT COUNT(*) FROM responses r WHERE r.study = records.study AND r.record = "
        "records.id) + (SELECT COUNT(*) FROM leases l WHERE l.study = records.study AND l.record = records.id)"
    )
    con.execute("DELETE FROM open_records")
    con.execute("DELETE FROM annotator_counts")
    for (study,) in con.execute("SELECT DISTINCT study FROM records").fetchall():
        declared = STUDIES[study].distribution.k if study in STUDIES else DEFAULT_K
        k = stored_k(con, study) or declared
        con.execute("INSERT INTO open_records SELECT ?1, SUM(taken < ?2) FROM records WHERE study = ?1", (study, k))
        con.execute(
            "INSERT INTO annotator_counts SELECT r.annotator, r.study, COUNT(*), SUM(c.taken < ?2) FROM responses r "
            "JOIN records c ON c.study = r.study AND c.id = r.record WHERE r.study = ?1 GROUP BY r.annotator",
            (study, k),
        )


def _q(n: int) -> str:
    return "(" + ", ".join("?" * n) + ")"


def _record_row(record: Record, position: int, shuffle: int) -> tuple:
    return (
        record.study,
        record.id,
        json.dumps(dict(record.fields), sort_keys=True),
        json.dumps({k: list(v) for k, v in record.options.items()}, sort_keys=True),
        json.dumps(dict(record.metadata), sort_keys=True),
        position,
        shuffle,
    )


def _sub_rows(con: sqlite3.Connection) -> tuple[list[tuple], list[tuple], list[tuple], list[tuple]]:
    """SUB's images, answers (grouped into responses, in submit order) and leases of versions 1-4."""
    records, study_of = [], {}
    for image, study, ref, target, choices, meta, position in con.execute(
        "SELECT image, study, reference_class, target_attribute, choices, meta, position FROM images ORDER BY position"
    ):
        record = sub_record(ImageItem(image, int(study), ref, target, tuple(json.loads(choices)), json.loads(meta)))
        study_of[image] = record.study
        records.append(_record_row(record, int(position), shuffle_number(image)))
    grouped: dict[tuple[str, str], list] = {}
    for annotator, image, question, answer, created in con.execute(
        "SELECT annotator, image, question, answer, created FROM answers ORDER BY rowid"
    ):
        grouped.setdefault((annotator, image), [{}, created])[0][question] = answer
    responses = [
        (annotator, study_of[image], image, json.dumps(answers, sort_keys=True), created)
        for (annotator, image), (answers, created) in grouped.items()
    ]
    leases = [
        (annotator, study_of[image], image, expires)
        for annotator, image, expires in con.execute("SELECT annotator, image, expires FROM leases ORDER BY rowid")
    ]
    return records, responses, leases, []


def _rating_rows(con: sqlite3.Connection) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """The rating study's items (their shuffle numbers kept), ratings and leases of versions 3-4."""
    from ..loaders.ratings import RatingItem

    name = CONCEPTBED_RATING.name
    records = [
        _record_row(
            rating_record(RatingItem(item, kind, learner, task, concept, file_name, tuple(json.loads(refs)), caption)),
            int(position),
            int(shuffle),
        )
        for item, kind, learner, task, concept, file_name, refs, caption, position, shuffle in con.execute(
            "SELECT item, kind, learner, task, concept, file_name, refs, caption, position, shuffle "
            "FROM rating_items ORDER BY position"
        )
    ]
    responses = _rows(
        (rater, name, item, json.dumps({"rating": str(rating)}), created)
        for rater, item, rating, created in con.execute(
            "SELECT rater, item, rating, created FROM ratings ORDER BY rowid"
        )
    )
    leases = _rows(
        (rater, name, item, expires)
        for rater, item, expires in con.execute("SELECT rater, item, expires FROM rating_leases ORDER BY rowid")
    )
    return records, responses, leases


def _rows(rows: Iterable[tuple]) -> list[tuple]:
    return list(rows)
