"""The SQLite layer of the study store (:class:`~.study_store.StudyStore`; docs/human_validation.md, "The store").

:class:`StudyDatabase` opens one file (WAL journal, ``PRAGMA user_version`` = :data:`SCHEMA_VERSION`), keeps one
connection per thread, runs every write in one ``BEGIN IMMEDIATE`` transaction behind a
process-wide lock per file, and turns every SQLite failure into a one-line
:class:`~.annotation_items.AnnotationError` naming the file. Files of older versions are converted in one
transaction when opened for writing (:meth:`StudyDatabase.convert`; the store's is :mod:`.study_migrate`) and read
through a converted in-memory copy when opened read-only.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from .annotation_items import AnnotationError

__all__ = ["SCHEMA_VERSION", "LEASE_SECONDS", "SCHEMA", "StudyDatabase", "statements", "k_key", "stored_k"]

#: the tables' version; versions 1-4 (SUB's and the rating study's own tables) are converted, others refused.
SCHEMA_VERSION = 5
#: seconds a record handed to an annotator stays reserved for them.
LEASE_SECONDS = 600.0

#: records (``n``: responses, ``taken``: responses + live leases), one row per response (its answers one JSON object,
#: written and read whole), leases, annotators (a token's SHA-256 only) and the settings (each study's ``k`` under
#: :func:`k_key`; a file made before the studies kept their own holds one ``k`` for all); and the tallies an
#: annotator's progress reads instead of scanning the records: ``open_records`` (records with ``taken < k`` per study)
#: and ``annotator_counts`` (per annotator and study: responses, and those on records with ``taken < k``). Every count
#: is kept by the store's own Python writes (:mod:`.study_store`), in the transaction that moves it; no trigger.
SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    study TEXT NOT NULL,
    id TEXT NOT NULL,
    fields TEXT NOT NULL,
    options TEXT NOT NULL,
    metadata TEXT NOT NULL,
    position INTEGER NOT NULL,
    shuffle INTEGER NOT NULL,
    n INTEGER NOT NULL DEFAULT 0,
    taken INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (study, id)
);
CREATE INDEX IF NOT EXISTS records_next ON records (study, taken DESC, position);
CREATE INDEX IF NOT EXISTS records_shuffle ON records (study, shuffle);
CREATE TABLE IF NOT EXISTS responses (
    annotator TEXT NOT NULL,
    study TEXT NOT NULL,
    record TEXT NOT NULL,
    answers TEXT NOT NULL,
    created REAL NOT NULL DEFAULT (julianday('now')),
    PRIMARY KEY (annotator, study, record),
    FOREIGN KEY (study, record) REFERENCES records (study, id)
);
CREATE INDEX IF NOT EXISTS responses_by_record ON responses (study, record);
CREATE TABLE IF NOT EXISTS leases (
    annotator TEXT NOT NULL,
    study TEXT NOT NULL,
    record TEXT NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (annotator, study, record),
    FOREIGN KEY (study, record) REFERENCES records (study, id)
);
CREATE INDEX IF NOT EXISTS leases_expiry ON leases (expires);
CREATE INDEX IF NOT EXISTS leases_by_record ON leases (study, record);
CREATE TABLE IF NOT EXISTS open_records (
    study TEXT PRIMARY KEY,
    n INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS annotator_counts (
    annotator TEXT NOT NULL,
    study TEXT NOT NULL,
    answered INTEGER NOT NULL,
    answered_open INTEGER NOT NULL,
    PRIMARY KEY (annotator, study)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS annotators (
    annotator TEXT PRIMARY KEY,
    token_hash TEXT UNIQUE,
    created REAL NOT NULL DEFAULT (julianday('now'))
);
"""


def k_key(study: str) -> str:
    """The ``settings`` key of ``study``'s k (responses per record)."""
    return f"k:{study}"


def stored_k(con: sqlite3.Connection, study: str) -> int | None:
    """The k the file keeps for ``study``: its own, else the one ``k`` of a file made before each study kept its own,
    else ``None`` (not settled yet)."""
    row = con.execute(
        "SELECT value FROM settings WHERE key IN (?, 'k') ORDER BY key = 'k' LIMIT 1", (k_key(study),)
    ).fetchone()
    return int(row[0]) if row else None


def statements(script: str) -> list[str]:
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


def write_lock(path: Path) -> threading.Lock:
    """The process-wide lock of the database at ``path`` (one per resolved file)."""
    key = str(Path(path).resolve())
    with _WRITE_LOCKS_GUARD:
        return _WRITE_LOCKS.setdefault(key, threading.Lock())


_MEMORY_COPIES = iter(range(1 << 62))


class StudyDatabase:
    """One study database file, opened (the arguments of :class:`~.study_store.StudyStore`); safe to share between
    threads and processes. Each thread gets its own connection (SQLite connections are not shared across threads)."""

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
            raise AnnotationError(f"k must be a positive int (annotators per record), got {k!r}")
        self.path = Path(path)
        self.k_given = k
        self.timeout = float(timeout)
        self.read_only = read_only
        self.lease_seconds = float(lease_seconds)
        self.clock = clock
        self._local = threading.local()
        self._lock = write_lock(self.path)
        self._memory: str | None = None  # the URI of a read-only old file's converted copy
        self._keep: sqlite3.Connection | None = None  # holds that copy open
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
    def fail(self, err: sqlite3.Error) -> AnnotationError:
        """``err`` as a one-line :class:`AnnotationError` naming the file and what to do."""
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

    def _open(self) -> sqlite3.Connection:
        if self._memory is not None:
            return sqlite3.connect(self._memory, uri=True, isolation_level=None, check_same_thread=False)
        if self.read_only:
            return sqlite3.connect(
                f"file:{self.path}?mode=ro",
                uri=True,
                timeout=self.timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        return con

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use)."""
        con = getattr(self._local, "con", None)
        if con is not None:
            return con
        try:
            con = self._open()
            con.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as err:
            raise self.fail(err) from None
        self._local.con = con
        return con

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    #: the older schema versions :meth:`convert` turns into this one (none here; the store's subclass names them)
    older_versions: tuple[int, ...] = ()

    @staticmethod
    def convert(con: sqlite3.Connection) -> None:
        """Turn an open file of one of :attr:`older_versions` into this version in one transaction."""
        raise NotImplementedError("StudyDatabase converts no older version")

    def _init_schema(self) -> None:
        con = self.connection()
        try:
            version = con.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if version == 0 and not tables and not self.read_only:
                con.executescript(SCHEMA + f"PRAGMA user_version={SCHEMA_VERSION};")  # idempotent if raced
            elif version in self.older_versions and not self.read_only:
                self._with_lock(lambda: self.convert(con))
            elif version in self.older_versions:
                self._convert_in_memory(con, self.convert)
            elif version != SCHEMA_VERSION:
                raise AnnotationError(
                    f"{self.path}: schema version {version}, this concept-grounding reads versions 1-"
                    f"{SCHEMA_VERSION}; export it with the version that wrote it"
                )
        except sqlite3.Error as err:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise self.fail(err) from None

    def _convert_in_memory(self, con: sqlite3.Connection, migrate: Callable[[sqlite3.Connection], None]) -> None:
        """A read-only older file: copied into a private in-memory database, converted there; every thread reads the
        copy (the file is never written)."""
        self._memory = f"file:study-copy-{id(self)}-{next(_MEMORY_COPIES)}?mode=memory&cache=shared"
        keep = sqlite3.connect(self._memory, uri=True, isolation_level=None, check_same_thread=False)
        con.backup(keep)
        con.close()
        keep.execute("PRAGMA foreign_keys=ON")
        migrate(keep)
        self._keep = keep
        self._local.con = None

    def _settle_k(self, k: int | None) -> None:
        """Settle ``k`` with the file once it is open (the store's studies each keep theirs: :mod:`.study_store`)."""

    def _with_lock(self, action: Callable[[], None]) -> None:
        if not self._lock.acquire(timeout=self.timeout):
            raise self.fail(sqlite3.OperationalError("database is locked"))
        try:
            action()
        finally:
            self._lock.release()

    def write(self, statements: Callable[[sqlite3.Connection], object]) -> None:
        """Run ``statements(con)`` in one ``BEGIN IMMEDIATE`` transaction (all or nothing).

        Writers of one process take turns on a lock per database file first (:func:`write_lock`): SQLite's own busy
        handler sleeps 1 to 100 ms between retries, so threads contending on its lock waited tens of ms for a lock
        held ~0.1 ms; other processes still meet SQLite's lock."""
        if self.read_only:
            raise AnnotationError(f"{self.path}: opened read-only; nothing can be written")
        con = self.connection()
        self._with_lock(lambda: self._write_locked(con, statements))

    def _write_locked(self, con: sqlite3.Connection, statements: Callable[[sqlite3.Connection], object]) -> None:
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
            raise self.fail(err) from None

    def read(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        """The rows of one query (a one-line :class:`AnnotationError` on failure)."""
        try:
            return self.connection().execute(sql, params).fetchall()
        except sqlite3.Error as err:
            raise self.fail(err) from None
