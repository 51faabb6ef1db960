"""The one annotation store: any :class:`~.study.Study`'s records, responses, leases and annotators in one SQLite file
(docs/human_validation.md, "The store"). It implements :class:`~.study.StudyBackend`, which the app and the simulator
drive; every failure is a one-line :class:`~.annotation_items.AnnotationError` with nothing written.

>>> import tempfile, os
>>> from concept_grounding.curation.study import SUB_STUDY_2
>>> store = StudyStore(os.path.join(tempfile.mkdtemp(), "a.db"), k=2)
>>> store.add_records(SUB_STUDY_2, [Record("img-0", "sub-2", {"image": "c0"}, {"present": ("red", "blue")})])
1
>>> store.next_record("ann", "sub-2").id
'img-0'
>>> store.submit("ann", "sub-2", "img-0", {"present": "blue"})
>>> store.next_record("ann", "sub-2") is None, store.progress("ann", "sub-2"), store.complete("sub-2")
(True, (1, 1), (0, 1))
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .annotation_items import DEFAULT_K, AnnotationError, annotator_id, quote
from .study import STUDIES, Record, Response, Study
from .study_db import LEASE_SECONDS, SCHEMA_VERSION, k_key, stored_k
from .study_migrate import OLDER, SHUFFLE_PRIME, migrate, shuffle_number
from .study_tokens import AnnotatorTokens

if TYPE_CHECKING:
    import datasets

__all__ = ["StudyStore", "SCHEMA_VERSION", "LEASE_SECONDS"]

#: the longest record id accepted from a client (longer ones are refused before any query)
_MAX_ID = 1000

_PICK = {
    # finish-first: the open records closest to k responses first, then insertion order (the records_next index)
    "finish-first": (
        "SELECT c.id FROM records c WHERE c.study = ?1 AND c.taken < ?2 AND NOT EXISTS (SELECT 1 FROM responses r "
        "WHERE r.annotator = ?3 AND r.study = ?1 AND r.record = c.id) ORDER BY c.taken DESC, c.position LIMIT 1"
    ),
    # shuffled: the first open record at or after the annotator's point among the shuffle numbers (records_shuffle)
    "shuffled": (
        "SELECT c.id FROM records c WHERE c.study = ?1 AND c.shuffle >= ?4 AND c.taken < ?2 AND NOT EXISTS (SELECT 1 "
        "FROM responses r WHERE r.annotator = ?3 AND r.study = ?1 AND r.record = c.id) ORDER BY c.shuffle LIMIT 1"
    ),
}


def _point(annotator: str, done: int) -> int:
    """Where ``annotator``'s ``done``-th pick lands among the records' shuffle numbers (their own fixed order)."""
    digest = hashlib.sha256(f"next\0{annotator}\0{done}".encode("utf-8", "surrogatepass")).digest()[:8]
    return int.from_bytes(digest, "little") % SHUFFLE_PRIME


class StudyStore(AnnotatorTokens):
    """SQLite store of any studies' records and responses; safe to share between threads and processes.

    Args:
        path: the database file (created with its folder when missing; a file of versions 1-4 is converted when
            opened for writing, read through a converted copy when opened read-only).
        k: responses per record of every study this store serves, instead of each study's
            :attr:`.Distribution.k` (docs/human_validation.md, "The store"). A study's k is kept in the file the first
            time a store serves it (this ``k``, else its declared one); reopening takes the file's (``None``), and
            another ``k`` than a kept one is refused in one line.
        timeout: seconds a writer waits for another's lock before :class:`AnnotationError`.
        read_only: open without writing (the export of a store on a read-only disk).
        lease_seconds: how long a record handed out by :meth:`next_record` stays reserved for its annotator (an
            abandoned one goes back to the pool afterwards).
        clock: seconds now (``time.time``; tests pass their own).
        studies: the studies this store serves, by name (default: every declared one, :data:`~.study.STUDIES`).
    """

    older_versions = OLDER
    convert = staticmethod(migrate)

    def __init__(
        self,
        path: str | Path,
        k: int | None = None,
        *,
        timeout: float = 10.0,
        read_only: bool = False,
        lease_seconds: float = LEASE_SECONDS,
        clock: Callable[[], float] = time.time,
        studies: Iterable[Study] = (),
    ):
        self.studies: dict[str, Study] = {**STUDIES, **{s.name: s for s in studies}}
        self._ks: dict[str, int] = {}
        super().__init__(path, k=k, timeout=timeout, read_only=read_only, lease_seconds=lease_seconds, clock=clock)

    # ------------------------------------------------------------------ k per study
    def _settle_k(self, k: int | None) -> None:
        self._settle(list(self.studies.values()))

    def _settle(self, specs: Sequence[Study]) -> None:
        """Each study's k: the file's, else kept now in one transaction (``k_given``, else the declared one); another
        ``k_given`` than the file's is one line."""
        found = {s.name: self._read_k(s.name) for s in specs}
        fresh = [s for s in specs if found[s.name] is None]
        if fresh and not self.read_only:
            rows = [(k_key(s.name), self.k_given or s.distribution.k) for s in fresh]
            self.write(lambda con: con.executemany("INSERT OR IGNORE INTO settings VALUES (?, ?)", rows))
            found.update({s.name: self._read_k(s.name) for s in fresh})
        for spec in specs:
            value = found[spec.name] or self.k_given or spec.distribution.k
            if self.k_given is not None and value != self.k_given:
                raise AnnotationError(
                    f"{self.path}: made for k = {value} annotators per record of {spec.name!r}, opened with "
                    f"k = {self.k_given}; pass k = {value} (or nothing) or start another file"
                )
            self._ks[spec.name] = value

    def _read_k(self, study: str) -> int | None:
        try:
            return stored_k(self.connection(), study)
        except sqlite3.Error as err:
            raise self.fail(err) from None

    def _lease_k(self, con: sqlite3.Connection, study: str) -> int:
        """The k of ``study`` inside a transaction: this store's, else the file's (a study another store serves)."""
        return self._ks.get(study) or stored_k(con, study) or DEFAULT_K

    def k_of(self, study: str | Study) -> int:
        """Responses per record of ``study`` (its declared :attr:`.Distribution.k` unless the file keeps another)."""
        return self._ks[self.study(study).name]

    @property
    def k(self) -> int:
        """The k of every study this store serves; one line when they differ (then ask :meth:`k_of`)."""
        ks = set(self._ks.values())
        if len(ks) != 1:
            raise AnnotationError(f"{self.path}: its studies differ in k ({self._ks}); ask k_of(study)")
        return ks.pop()

    # ------------------------------------------------------------------ studies and records
    def study(self, study: str | Study) -> Study:
        """The study ``study`` (or its name) this store serves; one line listing them otherwise."""
        if isinstance(study, Study):
            if study.name not in self.studies:
                self.studies[study.name] = study
                self._settle([study])
            return self.studies[study.name]
        if not isinstance(study, str) or study not in self.studies:
            raise AnnotationError(f"no study {quote(study)}; this store serves {', '.join(self.studies)}")
        return self.studies[study]

    def add_records(self, study: str | Study, records: Iterable[Record]) -> int:
        """Add ``study``'s records (ids already present are kept as they are); returns how many were new."""
        spec = self.study(study)
        records = list(records)
        for r in records:
            _check_record(spec, r)
        added = 0

        def insert(con: sqlite3.Connection) -> None:
            nonlocal added
            start = con.execute(
                "SELECT COALESCE(MAX(position), -1) + 1 FROM records WHERE study = ?", (spec.name,)
            ).fetchone()[0]
            for i, r in enumerate(records):
                cur = con.execute(
                    "INSERT OR IGNORE INTO records (study, id, fields, options, metadata, position, shuffle) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        spec.name,
                        r.id,
                        json.dumps(dict(r.fields), sort_keys=True),
                        json.dumps({q: list(v) for q, v in r.options.items()}, sort_keys=True),
                        json.dumps(dict(r.metadata), sort_keys=True),
                        start + i,
                        shuffle_number(r.id),
                    ),
                )
                added += cur.rowcount
            con.execute(
                "INSERT INTO open_records VALUES (?, ?) ON CONFLICT (study) DO UPDATE SET n = n + excluded.n",
                (spec.name, added),
            )

        self.write(insert)
        return added

    def record(self, study: str | Study, record: object) -> Record:
        """The stored record ``record`` of ``study``; an unknown (forged or stale) id is one line."""
        name = self.study(study).name
        rows = (
            self.read(
                "SELECT study, id, fields, options, metadata FROM records WHERE study = ? AND id = ?", (name, record)
            )
            if isinstance(record, str) and len(record) <= _MAX_ID
            else []
        )
        if not rows:
            raise AnnotationError(
                f"record {quote(record)}: not in {name} of {self.path} (a forged or stale id)", brief="unknown record"
            )
        return _record(rows[0])

    def records(self, study: str | Study) -> list[Record]:
        """Every record of ``study``, in insertion order."""
        name = self.study(study).name
        return [
            _record(r)
            for r in self.read(
                "SELECT study, id, fields, options, metadata FROM records WHERE study = ? ORDER BY position", (name,)
            )
        ]

    # ------------------------------------------------------------------ annotating (StudyBackend)
    def next_record(self, annotator: str, study: str) -> Record | None:
        """The record ``annotator`` should answer next in ``study``, or ``None`` when none is left for them.

        It is leased to them for ``lease_seconds``: until they answer it (or the lease runs out) they get the same
        record again, and no more than ``k`` annotators hold or have answered any record, so concurrent annotators
        never answer a record that others filled meanwhile. The study's distribution picks a new one: ``finish-first``
        the open record with the most responses and leases (then insertion order), ``shuffled`` the annotator's
        ``d``-th pick is the first open record at or after a point drawn from ``(annotator, d)`` among the records'
        shuffle numbers (wrapping round; a seek on an index, not a sort). A record they answered never comes back."""
        who, spec = annotator_id(annotator), self.study(study)
        k = self.k_of(spec)
        found: list[str] = []

        def lease(con: sqlite3.Connection) -> None:
            now = self.clock()
            _expire(con, self._lease_k, now)
            held = con.execute(
                "SELECT record FROM leases WHERE annotator = ? AND study = ? LIMIT 1", (who, spec.name)
            ).fetchone()
            if held:
                con.execute(
                    "UPDATE leases SET expires = ? WHERE annotator = ? AND study = ? AND record = ?",
                    (now + self.lease_seconds, who, spec.name, held[0]),
                )
                found.append(held[0])
                return
            row = self._pick(con, who, spec)
            if row:
                con.execute("INSERT INTO leases VALUES (?, ?, ?, ?)", (who, spec.name, row, now + self.lease_seconds))
                _retake(con, k, spec.name, row, +1)
                found.append(row)

        self.write(lease)
        return self.record(spec, found[0]) if found else None

    def _pick(self, con: sqlite3.Connection, who: str, spec: Study) -> str | None:
        order = spec.distribution.order
        if order == "finish-first":
            row = con.execute(_PICK[order], (spec.name, self.k_of(spec), who)).fetchone()
            return row[0] if row else None
        done = con.execute(
            "SELECT COUNT(*) FROM responses WHERE annotator = ? AND study = ?", (who, spec.name)
        ).fetchone()[0]
        row = (
            con.execute(_PICK[order], (spec.name, self.k_of(spec), who, _point(who, done))).fetchone()
            or con.execute(_PICK[order], (spec.name, self.k_of(spec), who, 0)).fetchone()
        )
        return row[0] if row else None

    def open_record(self, annotator: str, study: str) -> str | None:
        """The id of the record of ``study`` leased to ``annotator`` now (shown to them, not yet answered), if any."""
        rows = self.read(
            "SELECT record FROM leases WHERE annotator = ? AND study = ? AND expires >= ? LIMIT 1",
            (annotator_id(annotator), self.study(study).name, self.clock()),
        )
        return rows[0][0] if rows else None

    def submit(self, annotator: str, study: str, record: str, answers: Mapping[str, object]) -> None:
        """Store ``annotator``'s answers to ``record`` after :meth:`.Study.check`, in one transaction. Refused in one
        line with nothing written: an unknown record, a missing, unknown or out-of-set answer, a record this annotator
        already answered (a repeated submit), or, without their lease on it, one that ``k`` annotators already hold or
        answered (a stale submit)."""
        who, spec = annotator_id(annotator), self.study(study)
        stored = self.record(spec, record)
        if not isinstance(answers, Mapping):
            raise AnnotationError(
                f"record {quote(record)}: answers must be a mapping of question to answer, got "
                f"{type(answers).__name__}",
                brief="answers not a mapping",
            )
        checked = json.dumps(spec.check(stored, answers), sort_keys=True)
        key, k = (spec.name, stored.id), self.k_of(spec)

        def insert(con: sqlite3.Connection) -> None:
            if con.execute(
                "SELECT 1 FROM responses WHERE annotator = ? AND study = ? AND record = ?", (who, *key)
            ).fetchone():
                raise AnnotationError(
                    f"record {stored.id!r}: {who!r} already answered it (a second submit)", brief="a second submit"
                )
            leased = con.execute(
                "DELETE FROM leases WHERE annotator = ? AND study = ? AND record = ?", (who, *key)
            ).rowcount
            if not leased:
                taken = con.execute("SELECT taken FROM records WHERE study = ? AND id = ?", key).fetchone()[0]
                if taken >= k:
                    raise AnnotationError(f"record {stored.id!r}: already has its {k} annotators", brief="record full")
                _retake(con, k, *key, +1)
            con.execute(
                "INSERT INTO responses (annotator, study, record, answers) VALUES (?, ?, ?, ?)", (who, *key, checked)
            )
            con.execute("UPDATE records SET n = n + 1 WHERE study = ? AND id = ?", key)
            taken = con.execute("SELECT taken FROM records WHERE study = ? AND id = ?", key).fetchone()
            con.execute(
                "INSERT INTO annotator_counts VALUES (?, ?, 1, ?) ON CONFLICT (annotator, study) DO UPDATE SET "
                "answered = answered + 1, answered_open = answered_open + excluded.answered_open",
                (who, spec.name, int(taken[0] < k)),
            )
            con.execute("INSERT OR IGNORE INTO annotators (annotator) VALUES (?)", (who,))

        self.write(insert)

    def progress(self, annotator: str, study: str) -> tuple[int, int]:
        """``(answered, answered + still available)`` records of ``study`` for ``annotator`` (available: not answered
        by them, and leased to them or held by fewer than ``k``), from the kept tallies (:data:`~.study_db.SCHEMA`) and
        the annotator's own leases: a few index lookups, not a scan of the records."""
        who, name = annotator_id(annotator), self.study(study).name
        done, open_, answered_open, leased_full = self.read(
            "SELECT (SELECT COALESCE(SUM(answered), 0) FROM annotator_counts WHERE annotator = ?1 AND study = ?2), "
            "(SELECT COALESCE(SUM(n), 0) FROM open_records WHERE study = ?2), "
            "(SELECT COALESCE(SUM(answered_open), 0) FROM annotator_counts WHERE annotator = ?1 AND study = ?2), "
            "(SELECT COUNT(*) FROM leases l CROSS JOIN records c ON c.study = l.study AND c.id = l.record "
            "WHERE l.annotator = ?1 AND l.study = ?2 AND c.taken >= ?3)",
            (who, name, self.k_of(name)),
        )[0]
        return int(done), int(done + open_ - answered_open + leased_full)

    def complete(self, study: str | Study) -> tuple[int, int]:
        """``(records with k responses, records)`` of ``study``."""
        name = self.study(study).name
        row = self.read("SELECT SUM(n >= ?), COUNT(*) FROM records WHERE study = ?", (self.k_of(name), name))
        return int(row[0][0] or 0), int(row[0][1])

    # ------------------------------------------------------------------ responses and export
    def responses(self, study: str | Study) -> list[Response]:
        """Every response to ``study``, in submit order."""
        name = self.study(study).name
        return [
            Response(a, name, r, json.loads(answers))
            for a, r, answers in self.read(
                "SELECT annotator, record, answers FROM responses WHERE study = ? ORDER BY rowid", (name,)
            )
        ]

    def response_count(self, study: str | Study | None = None) -> int:
        """How many responses are stored (to ``study``); they are only ever appended."""
        if study is None:
            return int(self.read("SELECT COUNT(*) FROM responses")[0][0])
        return int(self.read("SELECT COUNT(*) FROM responses WHERE study = ?", (self.study(study).name,))[0][0])

    def export(self, study: str | Study | Sequence[str | Study]) -> datasets.Dataset:
        """``study``'s responses (or several studies') as a ``datasets.Dataset``, one row per response with its
        record's fields and metadata (:func:`.study_export.export`)."""
        from .study_export import export

        return export(self, study)

    def to_parquet(self, study: str | Study | Sequence[str | Study], path: str | Path) -> Path:
        """Write :meth:`export` to ``path`` (Parquet, replaced atomically) and return it."""
        from ..fileio import write_parquet

        return write_parquet(self.export(study), path)


def _check_record(spec: Study, record: Record) -> None:
    """A record fit for ``spec``: its study named, every required field, a choice question's options (two at
    least)."""
    if not isinstance(record, Record):
        raise AnnotationError(f"study {spec.name!r}: records must be Record, got {type(record).__name__}")
    if record.study != spec.name:
        raise AnnotationError(f"record {quote(record.id)}: of study {quote(record.study)}, not {spec.name!r}")
    if not isinstance(record.id, str) or not record.id or len(record.id) > _MAX_ID:
        raise AnnotationError(f"record {quote(record.id)}: its id must be 1-{_MAX_ID} characters of text")
    missing = [f.name for f in spec.fields if not f.optional and f.name not in record.fields]
    if missing:
        raise AnnotationError(f"record {quote(record.id)}: lacks the field {missing[0]!r} of {spec.name!r}")
    for q in spec.questions:
        if q.kind == "choice" and len(record.options.get(q.name, ())) < 2:
            raise AnnotationError(f"record {quote(record.id)}: question {q.name!r} needs at least 2 options")


def _retake(con: sqlite3.Connection, k: int, study: str, record: str, delta: int) -> None:
    """Move ``record``'s ``taken`` by ``delta``; when that opens or fills it (``taken`` crossing ``k``), move the
    study's open records and the open answered records of each of its annotators with it."""
    con.execute("UPDATE records SET taken = taken + ? WHERE study = ? AND id = ?", (delta, study, record))
    new = con.execute("SELECT taken FROM records WHERE study = ? AND id = ?", (study, record)).fetchone()[0]
    old = new - delta
    if (old < k) == (new < k):
        return
    step = 1 if new < k else -1
    con.execute("UPDATE open_records SET n = n + ? WHERE study = ?", (step, study))
    con.execute(
        "UPDATE annotator_counts SET answered_open = answered_open + ? WHERE study = ? AND annotator IN "
        "(SELECT annotator FROM responses WHERE study = ? AND record = ?)",
        (step, study, study, record),
    )


def _expire(con: sqlite3.Connection, k_of: Callable[[sqlite3.Connection, str], int], now: float) -> None:
    """Free the leases that ran out (their records go back to the pool); ``k_of(con, study)``: the study's k."""
    for study, record in con.execute("SELECT study, record FROM leases WHERE expires < ?", (now,)).fetchall():
        _retake(con, k_of(con, study), study, record, -1)
    con.execute("DELETE FROM leases WHERE expires < ?", (now,))


def _record(row: tuple) -> Record:
    study, id_, fields, options, metadata = row
    return Record(
        id_, study, json.loads(fields), {q: tuple(v) for q, v in json.loads(options).items()}, json.loads(metadata)
    )
