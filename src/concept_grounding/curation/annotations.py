"""The annotation store of SUB's human validation (Bader et al., Sec. 4.3, App. E; docs/human_validation.md).

One SQLite file holds the images to annotate and every answer. The Gradio app and the simulated
annotators (:mod:`.simulate`) drive the same three calls: :meth:`AnnotationStore.next_image` (leased,
resumable, never past ``k`` annotators), :meth:`AnnotationStore.submit` (checked, one transaction) and
:meth:`AnnotationStore.progress`; :meth:`AnnotationStore.export` gives what :mod:`.curate` reads. Every
failure is an :class:`AnnotationError`: one line, nothing written.

>>> import tempfile, os
>>> store = AnnotationStore(os.path.join(tempfile.mkdtemp(), "a.db"), k=2)
>>> store.add_images([study1_item("img-0", "017.Cardinal", "has_crown_color::pink")])
1
>>> store.next_image("ann", 1).image
'img-0'
>>> store.submit("ann", "img-0", {"q1": "yes", "q2": "no"})
>>> store.next_image("ann", 1) is None, store.progress("ann", 1)
(True, (1, 1))

Its SQLite connection layer is :class:`~.annotation_db.AnnotationDatabase`, which
:class:`AnnotationStore` extends.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .annotation_db import LEASE_SECONDS, SCHEMA_VERSION, AnnotationDatabase
from .annotation_items import (
    DEFAULT_K,
    LIKERT,
    STUDIES,
    AnnotationError,
    ImageItem,
    annotator_id,
    new_token,
    question_text,
    quote,
    study1_item,
    study2_item,
    token_hash,
)

if TYPE_CHECKING:
    import datasets

__all__ = [
    "SCHEMA_VERSION",
    "DEFAULT_K",
    "STUDIES",
    "LIKERT",
    "EXPORT_COLUMNS",
    "AnnotationError",
    "ImageItem",
    "AnnotationStore",
    "study1_item",
    "study2_item",
    "question_text",
    "annotator_id",
    "LEASE_SECONDS",
]

#: the columns of :meth:`AnnotationStore.export`.
EXPORT_COLUMNS: tuple[str, ...] = ("annotator", "image", "study", "question", "answer")


class AnnotationStore(AnnotationDatabase):
    """SQLite store of images and answers; safe to share between threads and processes.

    Args:
        path: the database file (created with its folder when missing).
        k: annotators per image (default 3, docs/human_validation.md); kept in the file when it is created, and
            ``None`` (or the same value) when reopening it: another value is refused.
        timeout: seconds a writer waits for another's lock before :class:`AnnotationError`.
        read_only: open without writing (``export`` of a store on a read-only disk).
        lease_seconds: how long an image handed out by :meth:`next_image` stays reserved for
            its annotator (an abandoned one goes back to the pool afterwards).
        clock: seconds now (``time.time``; tests pass their own).

    Each thread gets its own connection (SQLite connections are not shared across threads).
    """

    # ------------------------------------------------------------------ images
    def add_images(self, items: Iterable[ImageItem]) -> int:
        """Add images to annotate (ids already present are kept as they are); returns how many were new."""
        items = list(items)
        for it in items:
            if it.study not in STUDIES:
                raise AnnotationError(f"image {it.image!r}: study must be 1 or 2, got {it.study!r}")
            if it.study == 2 and len(it.choices) < 2:
                raise AnnotationError(f"image {it.image!r}: study 2 needs at least 2 choices")
        added = 0

        def insert(con: sqlite3.Connection) -> None:
            nonlocal added
            start = con.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM images").fetchone()[0]
            for i, it in enumerate(items):
                cur = con.execute(
                    "INSERT OR IGNORE INTO images VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        it.image,
                        it.study,
                        it.reference_class,
                        it.target_attribute,
                        json.dumps(it.choices),
                        json.dumps(dict(it.meta), sort_keys=True),
                        start + i,
                    ),
                )
                if cur.rowcount:
                    con.execute("INSERT INTO counts VALUES (?, ?, 0, 0, ?)", (it.image, it.study, start + i))
                    added += 1

        self._write(insert)
        return added

    def image(self, image: str) -> ImageItem:
        """The stored :class:`ImageItem` ``image``; an unknown id raises :class:`AnnotationError`."""
        rows = (
            self._read(
                "SELECT image, study, reference_class, target_attribute, choices, meta FROM images WHERE image = ?",
                (str(image),),
            )
            if isinstance(image, str) and len(image) <= 1000
            else []
        )
        if not rows:
            raise AnnotationError(
                f"image {quote(image)}: not in {self.path} (a forged or stale id)", brief="unknown image"
            )
        return _item(rows[0])

    def images(self, study: int | None = None) -> list[ImageItem]:
        """Every stored image (of ``study``), in insertion order."""
        where, params = ("WHERE study = ?", (study,)) if study is not None else ("", ())
        return [
            _item(r)
            for r in self._read(
                "SELECT image, study, reference_class, target_attribute, choices, meta "
                f"FROM images {where} ORDER BY position",
                params,
            )
        ]

    # ------------------------------------------------------------------ annotating
    def next_image(self, annotator: str, study: int) -> ImageItem | None:
        """The next image for ``annotator`` in ``study``, or ``None`` when none is left for them.

        The image is leased to the annotator for ``lease_seconds``: until they answer it (or
        the lease runs out) they get the same image again, and no more than ``k`` annotators
        hold or have answered any image, so concurrent annotators never answer an image that
        others filled meanwhile. Images with the most answers and leases below ``k`` come first
        (finishing images before starting new ones), then insertion order; an image already
        answered by ``annotator`` never is.
        """
        annotator = _check_annotator(annotator)
        found: list[str] = []

        def lease(con: sqlite3.Connection) -> None:
            now = self.clock()
            self._expire(con, now)
            held = con.execute(
                "SELECT image FROM leases WHERE annotator = ? AND study = ? LIMIT 1", (annotator, study)
            ).fetchone()
            if held:
                con.execute(
                    "UPDATE leases SET expires = ? WHERE annotator = ? AND image = ?",
                    (now + self.lease_seconds, annotator, held[0]),
                )
                found.append(held[0])
                return
            row = con.execute(
                "SELECT c.image FROM counts c WHERE c.study = ? AND c.taken < ? AND NOT EXISTS "
                "(SELECT 1 FROM answers a WHERE a.annotator = ? AND a.image = c.image) "
                "ORDER BY c.taken DESC, c.position LIMIT 1",
                (study, self.k, annotator),
            ).fetchone()
            if row:
                con.execute(
                    "INSERT INTO leases VALUES (?, ?, ?, ?)", (annotator, row[0], study, now + self.lease_seconds)
                )
                con.execute("UPDATE counts SET taken = taken + 1 WHERE image = ?", (row[0],))
                found.append(row[0])

        self._write(lease)
        return self.image(found[0]) if found else None

    @staticmethod
    def _expire(con: sqlite3.Connection, now: float) -> None:
        """Free the leases that ran out (their images go back to the pool)."""
        con.execute(
            "UPDATE counts SET taken = taken - (SELECT COUNT(*) FROM leases l WHERE l.image = counts.image "
            "AND l.expires < ?) WHERE image IN (SELECT image FROM leases WHERE expires < ?)",
            (now, now),
        )
        con.execute("DELETE FROM leases WHERE expires < ?", (now,))

    def submit(self, annotator: str, image: str, answers: Mapping[str, str]) -> None:
        """Store ``annotator``'s answers to ``image``: every question of its study, each from
        its allowed set. Refused, with nothing written: an unknown image, a missing, unknown
        or out-of-set answer, an image this annotator already answered, or (without a lease
        on it from :meth:`next_image`) one that ``k`` annotators already hold or answered."""
        annotator = _check_annotator(annotator)
        item = self.image(image)
        questions = STUDIES[item.study]
        if not isinstance(answers, Mapping) or set(answers) != set(questions):
            got = (
                [quote(a) for a in sorted(map(str, answers))][:5]
                if isinstance(answers, Mapping)
                else type(answers).__name__
            )
            raise AnnotationError(
                f"image {image!r}: study {item.study} needs answers to {list(questions)}, got {got}",
                brief="wrong questions",
            )
        for q in questions:
            if answers[q] not in item.allowed(q):
                raise AnnotationError(
                    f"image {image!r}: answer {quote(answers[q])} to {q} is not one of {list(item.allowed(q))}",
                    brief=f"answer to {q} outside its choices",
                )

        def insert(con: sqlite3.Connection) -> None:
            if con.execute(
                "SELECT 1 FROM answers WHERE annotator = ? AND image = ? LIMIT 1", (annotator, item.image)
            ).fetchone():
                raise AnnotationError(
                    f"image {image!r}: {annotator!r} already answered it (a second submit)", brief="a second submit"
                )
            leased = con.execute(
                "DELETE FROM leases WHERE annotator = ? AND image = ?", (annotator, item.image)
            ).rowcount
            if not leased:
                taken = con.execute("SELECT taken FROM counts WHERE image = ?", (item.image,)).fetchone()[0]
                if taken >= self.k:
                    raise AnnotationError(f"image {image!r}: already has its {self.k} annotators", brief="image full")
                con.execute("UPDATE counts SET taken = taken + 1 WHERE image = ?", (item.image,))
            con.executemany(
                "INSERT INTO answers (annotator, image, study, question, answer) VALUES (?, ?, ?, ?, ?)",
                [(annotator, item.image, item.study, q, answers[q]) for q in questions],
            )
            con.execute("UPDATE counts SET n = n + 1 WHERE image = ?", (item.image,))

        self._write(insert)

    def open_image(self, annotator: str, study: int) -> str | None:
        """The image of ``study`` leased to ``annotator`` now (shown to them, not yet answered), or ``None``."""
        rows = self._read(
            "SELECT image FROM leases WHERE annotator = ? AND study = ? AND expires >= ? LIMIT 1",
            (annotator_id(annotator), study, self.clock()),
        )
        return rows[0][0] if rows else None

    # ------------------------------------------------------------------ identity
    def issue_token(self, annotator: str, *, replace: bool = False) -> str | None:
        """A new secret token for ``annotator``'s personal link, its SHA-256 stored (the token
        is returned once and never stored); ``None`` when they already have one and not ``replace``."""
        who, token = annotator_id(annotator), new_token()
        issued: list[bool] = []

        def put(con: sqlite3.Connection) -> None:
            verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
            issued.append(
                bool(
                    con.execute(
                        f"{verb} INTO tokens (annotator, hash) VALUES (?, ?)", (who, token_hash(token))
                    ).rowcount
                )
            )

        self._write(put)
        return token if issued[0] else None

    def annotator_for_token(self, token: object) -> str | None:
        """The annotator whose personal link carries ``token``; ``None`` for a missing or unknown one."""
        if not isinstance(token, str) or not 16 <= len(token) <= 128:
            return None
        rows = self._read("SELECT annotator FROM tokens WHERE hash = ?", (token_hash(token),))
        return rows[0][0] if rows else None

    def token_holders(self) -> list[str]:
        """The annotators who have a personal link."""
        return [r[0] for r in self._read("SELECT annotator FROM tokens ORDER BY created, annotator")]

    def progress(self, annotator: str, study: int) -> tuple[int, int]:
        """``(answered, answered + still available)`` images of ``study`` for ``annotator``
        (available: not answered by them, and leased to them or held by fewer than ``k``)."""
        annotator = _check_annotator(annotator)
        done = self._read(
            "SELECT COUNT(DISTINCT image) FROM answers WHERE annotator = ? AND study = ?", (annotator, study)
        )[0][0]
        # left = open images (taken < k; the counts_next index) - those of them this annotator answered
        #        + images leased to them that are full (taken >= k); each a small query, not a scan with
        #        two correlated subqueries per image (47 ms on 38,400 images, 0.6 ms this way)
        open_ = self._read("SELECT COUNT(*) FROM counts WHERE study = ? AND taken < ?", (study, self.k))[0][0]
        answered_open = self._read(
            "SELECT COUNT(DISTINCT a.image) FROM answers a JOIN counts c ON c.image = a.image "
            "WHERE a.annotator = ? AND a.study = ? AND c.taken < ?",
            (annotator, study, self.k),
        )[0][0]
        leased_full = self._read(
            "SELECT COUNT(*) FROM leases l JOIN counts c ON c.image = l.image WHERE l.annotator = ? "
            "AND l.study = ? AND c.taken >= ? AND NOT EXISTS (SELECT 1 FROM answers a WHERE "
            "a.annotator = l.annotator AND a.image = l.image)",
            (annotator, study, self.k),
        )[0][0]
        return int(done), int(done + open_ - answered_open + leased_full)

    def annotators(self) -> dict[str, dict[int, int]]:
        """Images answered per annotator and study: ``{annotator: {study: images}}``."""
        out: dict[str, dict[int, int]] = {}
        for name, study, n in self._read(
            "SELECT annotator, study, COUNT(DISTINCT image) FROM answers "
            "GROUP BY annotator, study ORDER BY annotator, study"
        ):
            out.setdefault(name, {})[int(study)] = int(n)
        return out

    def complete(self, study: int) -> tuple[int, int]:
        """``(images with k annotators, images)`` of ``study``."""
        row = self._read("SELECT SUM(n >= ?), COUNT(*) FROM counts WHERE study = ?", (self.k, study))[0]
        return int(row[0] or 0), int(row[1])

    # ------------------------------------------------------------------ export
    def answer_count(self) -> int:
        """How many answers (rows) are stored; they are only ever appended."""
        return int(self._read("SELECT COUNT(*) FROM answers")[0][0])

    def rows(self) -> list[tuple[str, str, int, str, str]]:
        """Every answer as ``(annotator, image, study, question, answer)``, in submit order."""
        return [
            tuple(r) for r in self._read("SELECT annotator, image, study, question, answer FROM answers ORDER BY rowid")
        ]

    def export(self) -> datasets.Dataset:
        """The answers as a ``datasets.Dataset`` with :data:`EXPORT_COLUMNS`."""
        import datasets

        rows = self.rows()
        columns = {c: [r[i] for r in rows] for i, c in enumerate(EXPORT_COLUMNS)}
        features = datasets.Features(
            {
                "annotator": datasets.Value("string"),
                "image": datasets.Value("string"),
                "study": datasets.Value("int32"),
                "question": datasets.Value("string"),
                "answer": datasets.Value("string"),
            }
        )
        return datasets.Dataset.from_dict(columns, features=features)

    def to_parquet(self, path: str | Path) -> Path:
        """Write :meth:`export` to ``path`` (Parquet, replaced atomically) and return it."""
        from ..fileio import write_parquet

        return write_parquet(self.export(), path)


def _item(row: tuple) -> ImageItem:
    image, study, ref, target, choices, meta = row
    return ImageItem(image, int(study), ref, target, tuple(json.loads(choices)), json.loads(meta))


_check_annotator = annotator_id
