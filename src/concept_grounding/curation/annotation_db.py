"""The SQLite connection layer of the annotation store (:class:`~.annotations.AnnotationStore`).

:class:`AnnotationDatabase` opens one SQLite file (WAL journal, ``PRAGMA user_version`` =
:data:`SCHEMA_VERSION`, older versions upgraded when opened for writing), keeps one connection
per thread, settles ``k`` with the file, and runs every write in one ``BEGIN IMMEDIATE``
transaction behind a process-wide lock per file; every SQLite failure becomes a one-line
:class:`~.annotation_items.AnnotationError` naming the file.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from .annotation_items import DEFAULT_K, AnnotationError
from .rating_study import RATING_COUNTERS, RATING_COUNTERS_FILL, RATING_TABLES

__all__ = ["SCHEMA_VERSION", "LEASE_SECONDS", "AnnotationDatabase"]

#: bump when the tables change; a file of another version is refused, naming both. Older files gain
#: what they lack when opened for writing (version 1, before annotators had tokens: the ``tokens``
#: table; versions 1-2, before ConceptBed's rating study: its tables, :data:`.rating_study.RATING_TABLES`;
#: versions 1-3, before the rating study's progress counts: :data:`.rating_study.RATING_COUNTERS`,
#: filled from the file), and are read as they are when opened read-only.
SCHEMA_VERSION = 4
#: the versions an older file may have (upgraded when opened for writing, read as they are read-only)
_OLDER = (1, 2, 3)
#: seconds an image handed to an annotator stays reserved for them.
LEASE_SECONDS = 600.0

_TOKENS = """
CREATE TABLE IF NOT EXISTS tokens (
    annotator TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    created REAL NOT NULL DEFAULT (julianday('now'))
);
"""

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS images (
    image TEXT PRIMARY KEY,
    study INTEGER NOT NULL,
    reference_class TEXT NOT NULL,
    target_attribute TEXT NOT NULL,
    choices TEXT NOT NULL,
    meta TEXT NOT NULL,
    position INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS answers (
    annotator TEXT NOT NULL,
    image TEXT NOT NULL REFERENCES images(image),
    study INTEGER NOT NULL,
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    created REAL NOT NULL DEFAULT (julianday('now')),
    PRIMARY KEY (annotator, image, question)
);
CREATE TABLE IF NOT EXISTS counts (
    image TEXT PRIMARY KEY REFERENCES images(image),
    study INTEGER NOT NULL,
    n INTEGER NOT NULL,
    taken INTEGER NOT NULL,
    position INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS leases (
    annotator TEXT NOT NULL,
    image TEXT NOT NULL REFERENCES images(image),
    study INTEGER NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (annotator, image)
);
CREATE INDEX IF NOT EXISTS leases_expiry ON leases (expires);
CREATE INDEX IF NOT EXISTS leases_by_annotator ON leases (annotator, study);
CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS counts_next ON counts (study, taken DESC, position);
CREATE INDEX IF NOT EXISTS answers_by_annotator ON answers (annotator, study);
"""
    + _TOKENS
    + RATING_TABLES
    + RATING_COUNTERS
)


def _statements(script: str) -> list[str]:
    """``script``'s SQL statements one by one (a trigger's body kept whole), to run inside one transaction."""
    out, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending.strip())
            pending = ""
    return out


_WRITE_LOCKS: dict[str, threading.Lock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _write_lock(path: Path) -> threading.Lock:
    """The process-wide lock of the database at ``path`` (one per resolved file)."""
    key = str(Path(path).resolve())
    with _WRITE_LOCKS_GUARD:
        return _WRITE_LOCKS.setdefault(key, threading.Lock())


class AnnotationDatabase:
    """One annotation database file, opened (the arguments of :class:`~.annotations.AnnotationStore`,
    which adds the study's calls); safe to share between threads and processes.

    Each thread gets its own connection (SQLite connections are not shared across threads).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        k: int | None = None,
        timeout: float = 10.0,
        read_only: bool = False,
        lease_seconds: float = LEASE_SECONDS,
        clock: Callable[[], float] = time.time,
    ):
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise AnnotationError(f"k must be a positive int (annotators per image), got {k!r}")
        self.path = Path(path)
        self.k = k if k is not None else DEFAULT_K
        self.timeout = float(timeout)
        self.read_only = read_only
        self.lease_seconds = float(lease_seconds)
        self.clock = clock
        self._local = threading.local()
        self._lock = _write_lock(self.path)
        if not read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise AnnotationError(f"{self.path}: cannot create its folder ({err.strerror})") from None
        elif not self.path.is_file():
            raise AnnotationError(f"{self.path}: no such annotation database")
        self._init_schema()
        self._settle_k(k)

    # ------------------------------------------------------------------ connections
    def _fail(self, err: sqlite3.Error) -> AnnotationError:
        text = str(err)
        if "readonly" in text or "read-only" in text:
            why = "the file or its folder is read-only; copy it somewhere writable, or open it read_only to export"
        elif "locked" in text or "busy" in text:
            why = f"locked by another writer for more than {self.timeout:g} s; retry, or stop the other process"
        elif "not a database" in text or "malformed" in text:
            why = "not an annotation database (corrupt or another file); restore a backup or choose another file"
        elif "disk" in text and "full" in text:
            why = "the disk is full; free some space (nothing of this submit was written)"
        elif "unable to open" in text:
            why = "cannot be opened (check the path and its permissions)"
        else:
            why = text
        return AnnotationError(f"{self.path}: {why}")

    def _connect(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is not None:
            return con
        try:
            if self.read_only:
                con = sqlite3.connect(
                    f"file:{self.path}?mode=ro",
                    uri=True,
                    timeout=self.timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
            else:
                con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as err:
            raise self._fail(err) from None
        self._local.con = con
        return con

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    def _init_schema(self) -> None:
        con = self._connect()
        try:
            version = con.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if version == 0 and not tables and not self.read_only:
                con.executescript(_SCHEMA + f"PRAGMA user_version={SCHEMA_VERSION};")  # idempotent if raced
            elif version in _OLDER and not self.read_only:  # the tables added, nothing else changes
                self._upgrade(con)
            elif version != SCHEMA_VERSION and not (version in _OLDER and self.read_only):
                raise AnnotationError(
                    f"{self.path}: schema version {version}, this concept-grounding reads "
                    f"version {SCHEMA_VERSION}; export it with the version that wrote it"
                )
        except sqlite3.Error as err:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise self._fail(err) from None

    def _upgrade(self, con: sqlite3.Connection) -> None:
        """An older file given what it lacks (:data:`SCHEMA_VERSION`'s note) in one transaction; a
        process that upgraded it meanwhile (the version read again under the lock) leaves nothing to do."""
        con.execute("BEGIN IMMEDIATE")
        try:
            if con.execute("PRAGMA user_version").fetchone()[0] in _OLDER:
                for sql in _statements(_TOKENS + RATING_TABLES + RATING_COUNTERS + RATING_COUNTERS_FILL):
                    con.execute(sql)
                con.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def _settle_k(self, k: int | None) -> None:
        """Store ``k`` in a new file; check it against an existing file's (``None``: take the file's)."""
        stored = self._read("SELECT value FROM settings WHERE key = 'k'")
        if stored:
            if k is not None and int(stored[0][0]) != k:
                raise AnnotationError(
                    f"{self.path}: made for k = {stored[0][0]} annotators per image, opened with "
                    f"k = {k}; pass k = {stored[0][0]} (or nothing) or start another file"
                )
            self.k = int(stored[0][0])
        elif not self.read_only:
            self._write(lambda con: con.execute("INSERT OR IGNORE INTO settings VALUES ('k', ?)", (str(self.k),)))
            self.k = int(self._read("SELECT value FROM settings WHERE key = 'k'")[0][0])

    def _write(self, statements) -> None:
        """Run ``statements(con)`` in one ``BEGIN IMMEDIATE`` transaction (all or nothing).

        Writers of one process take turns on a lock per database file first (:func:`_write_lock`):
        SQLite's own busy handler sleeps 1 to 100 ms between retries, so threads contending on
        its lock waited tens of ms for a lock held ~0.1 ms; other processes still meet SQLite's lock."""
        if self.read_only:
            raise AnnotationError(f"{self.path}: opened read-only; nothing can be written")
        con = self._connect()
        if not self._lock.acquire(timeout=self.timeout):
            raise self._fail(sqlite3.OperationalError("database is locked"))
        try:
            self._write_locked(con, statements)
        finally:
            self._lock.release()

    def _write_locked(self, con: sqlite3.Connection, statements) -> None:
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                statements(con)
            except BaseException:
                if con.in_transaction:  # SQLite itself rolls back on some errors (a full disk): keep that error
                    con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        except sqlite3.Error as err:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise self._fail(err) from None

    def _read(self, sql: str, params: Sequence = ()) -> list[tuple]:
        try:
            return self._connect().execute(sql, params).fetchall()
        except sqlite3.Error as err:
            raise self._fail(err) from None
