"""ConceptBed's rating study (Patel et al., App. G; docs/human_validation.md) in the annotation store.

:class:`RatingStore` is an :class:`~.annotations.AnnotationStore` (the same SQLite file, its ``k``,
tokens, locks and one-line refusals) with the rating study's calls beside SUB's: items in
(:meth:`~RatingStore.add_rating_items`), each rater's next item in their own pseudo-random order
(:meth:`~RatingStore.next_rating`), one checked 1-5 rating per transaction
(:meth:`~RatingStore.submit_rating`), the export and Krippendorff's alpha (interval).

>>> import tempfile, os
>>> store = RatingStore(os.path.join(tempfile.mkdtemp(), "a.db"), k=2)
>>> store.add_rating_items([RatingItem("r-1", "caption", "LoRA", "composition", "c0", "images/r-1.png", (),
...                                    "V* on a branch")])
1
>>> store.next_rating("ann").id
'r-1'
>>> store.submit_rating("ann", "r-1", "4")
>>> store.next_rating("ann") is None, store.rating_progress("ann"), store.rating_rows()
(True, (1, 1), [('ann', 'r-1', 'caption', 'LoRA', 'composition', 'c0', 4)])
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..loaders.ratings import RATING_COLUMNS, RATING_KINDS, RatingItem
from .annotation_items import AnnotationError, annotator_id, quote
from .annotations import AnnotationStore
from .rating_study import check_rating, interval_alpha

if TYPE_CHECKING:
    import datasets

__all__ = ["RatingStore", "RatingItem", "run_raters", "SHUFFLE_PRIME"]

#: the range of the items' ``shuffle`` numbers and of the points a rater's order draws
SHUFFLE_PRIME = 2_147_483_647  # 2^31 - 1

_COLUMNS = "item, kind, learner, task, concept, file_name, refs, caption"

#: the items leased to rater ?1 that k (?2) others hold or rated (still counted as available to them)
_LEASED_FULL = (
    "(SELECT COUNT(*) FROM rating_leases l JOIN rating_items r ON r.item = l.item WHERE l.rater = ?1 AND r.taken >= ?2)"
)


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "little")


def _point(rater: str, done: int) -> int:
    """Where ``rater``'s ``done``-th pick lands among the items' ``shuffle`` numbers."""
    return _digest(f"next\0{rater}\0{done}") % SHUFFLE_PRIME


class RatingStore(AnnotationStore):
    """The annotation store with ConceptBed's rating study (module docstring); arguments as
    :class:`~.annotations.AnnotationStore`'s (``k`` raters per item, shared with SUB's studies)."""

    def _has_table(self, name: str) -> bool:
        """Whether the file has table ``name``; once it has, remembered (tables are never dropped)."""
        known = self.__dict__.setdefault("_tables_seen", set())
        if name not in known and self._read("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)):
            known.add(name)
        return name in known

    def _has_ratings(self) -> bool:
        """Whether the file has the rating tables (a version-2 file opened read-only has not)."""
        return self._has_table("rating_items")

    def add_rating_items(self, items: Iterable[RatingItem]) -> int:
        """Add items to rate (ids already present are kept as they are); returns how many were new."""
        items = list(items)
        for it in items:
            if it.kind not in RATING_KINDS:
                raise AnnotationError(f"item {quote(it.id)}: kind must be one of {list(RATING_KINDS)}")
        added = 0

        def insert(con: sqlite3.Connection) -> None:
            nonlocal added
            start = con.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM rating_items").fetchone()[0]
            for i, it in enumerate(items):
                cur = con.execute(
                    "INSERT OR IGNORE INTO rating_items (item, kind, learner, task, concept, file_name, "
                    "refs, caption, position, shuffle) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        it.id,
                        it.kind,
                        it.learner,
                        it.task,
                        it.concept,
                        it.file_name,
                        json.dumps(list(it.references)),
                        it.caption,
                        start + i,
                        _digest(f"item\0{it.id}") % SHUFFLE_PRIME,
                    ),
                )
                added += cur.rowcount

        self._write(insert)
        return added

    def rating_item(self, item: str) -> RatingItem:
        """The stored item ``item``; an unknown id raises :class:`AnnotationError` (one line)."""
        rows = (
            self._read(f"SELECT {_COLUMNS} FROM rating_items WHERE item = ?", (item,))
            if isinstance(item, str) and len(item) <= 1000 and self._has_ratings()
            else []
        )
        if not rows:
            raise AnnotationError(
                f"item {quote(item)}: not in {self.path} (a forged or stale id)", brief="unknown item"
            )
        return _rating_item(rows[0])

    def rating_items(self) -> list[RatingItem]:
        """Every stored item, in insertion order."""
        if not self._has_ratings():
            return []
        return [_rating_item(r) for r in self._read(f"SELECT {_COLUMNS} FROM rating_items ORDER BY position")]

    def next_rating(self, rater: str) -> RatingItem | None:
        """``rater``'s next item (module docstring), leased for ``lease_seconds``; ``None`` when
        none is left for them. The order is the rater's own: their ``d``-th pick is the first
        open item (fewer than ``k`` raters, not rated by them) at or after a point drawn from
        ``(rater, d)`` among the items' random ``shuffle`` numbers (wrapping round), a seek
        on an index rather than a sort of every open item."""
        rater = annotator_id(rater)
        found: list[str] = []
        pick = (
            "SELECT r.item FROM rating_items r WHERE r.shuffle >= ? AND r.taken < ? AND NOT EXISTS (SELECT 1 FROM "
            "ratings x WHERE x.rater = ? AND x.item = r.item) ORDER BY r.shuffle LIMIT 1"
        )

        def lease(con: sqlite3.Connection) -> None:
            now = self.clock()
            con.execute(
                "UPDATE rating_items SET taken = taken - (SELECT COUNT(*) FROM rating_leases l WHERE "
                "l.item = rating_items.item AND l.expires < ?) WHERE item IN (SELECT item FROM rating_leases "
                "WHERE expires < ?)",
                (now, now),
            )
            con.execute("DELETE FROM rating_leases WHERE expires < ?", (now,))
            held = con.execute("SELECT item FROM rating_leases WHERE rater = ? LIMIT 1", (rater,)).fetchone()
            if held:
                con.execute(
                    "UPDATE rating_leases SET expires = ? WHERE rater = ? AND item = ?",
                    (now + self.lease_seconds, rater, held[0]),
                )
                found.append(held[0])
                return
            done = con.execute("SELECT COUNT(*) FROM ratings WHERE rater = ?", (rater,)).fetchone()[0]
            point = _point(rater, done)
            row = (
                con.execute(pick, (point, self.k, rater)).fetchone() or con.execute(pick, (0, self.k, rater)).fetchone()
            )
            if row:
                con.execute("INSERT INTO rating_leases VALUES (?, ?, ?)", (rater, row[0], now + self.lease_seconds))
                con.execute("UPDATE rating_items SET taken = taken + 1 WHERE item = ?", (row[0],))
                found.append(row[0])

        self._write(lease)
        return self.rating_item(found[0]) if found else None

    def submit_rating(self, rater: str, item: str, rating: object) -> None:
        """Store ``rater``'s ``rating`` (1-5, or its text) of ``item``. Refused in one line with
        nothing written: an unknown item, a rating outside 1-5, an item this rater already rated,
        or (without a lease on it from :meth:`next_rating`) one that ``k`` raters hold or rated."""
        rater = annotator_id(rater)
        stored = self.rating_item(item)
        try:
            value = check_rating(rating)
        except AnnotationError as err:
            raise AnnotationError(f"item {stored.id!r}: {err}", brief=err.brief) from None

        def insert(con: sqlite3.Connection) -> None:
            if con.execute("SELECT 1 FROM ratings WHERE rater = ? AND item = ?", (rater, stored.id)).fetchone():
                raise AnnotationError(
                    f"item {stored.id!r}: {rater!r} already rated it (a second submit)", brief="a second submit"
                )
            if not con.execute("DELETE FROM rating_leases WHERE rater = ? AND item = ?", (rater, stored.id)).rowcount:
                taken = con.execute("SELECT taken FROM rating_items WHERE item = ?", (stored.id,)).fetchone()[0]
                if taken >= self.k:
                    raise AnnotationError(f"item {stored.id!r}: already has its {self.k} raters", brief="item full")
                con.execute("UPDATE rating_items SET taken = taken + 1 WHERE item = ?", (stored.id,))
            con.execute("INSERT INTO ratings (rater, item, rating) VALUES (?, ?, ?)", (rater, stored.id, value))
            con.execute("UPDATE rating_items SET n = n + 1 WHERE item = ?", (stored.id,))

        self._write(insert)

    def open_rating(self, rater: str) -> str | None:
        """The item leased to ``rater`` now (on their screen, not yet rated), or ``None``."""
        if not self._has_ratings():
            return None
        rows = self._read(
            "SELECT item FROM rating_leases WHERE rater = ? AND expires >= ? LIMIT 1",
            (annotator_id(rater), self.clock()),
        )
        return rows[0][0] if rows else None

    def rating_progress(self, rater: str) -> tuple[int, int]:
        """``(rated, rated + still available)`` items for ``rater`` (available: not rated by
        them, and leased to them or held by fewer than ``k``)."""
        rater = annotator_id(rater)
        if not self._has_ratings():
            return 0, 0
        if not self._has_table("rating_taken"):  # a version-3 file opened read-only: counted from the rows
            return self._progress_counted(rater)
        done, open_, rated_open, leased_full = self._read(
            "SELECT (SELECT COALESCE(SUM(items), 0) FROM rating_rater_taken WHERE rater = ?1), "
            "(SELECT COALESCE(SUM(items), 0) FROM rating_taken WHERE taken < ?2), "
            "(SELECT COALESCE(SUM(items), 0) FROM rating_rater_taken WHERE rater = ?1 AND taken < ?2), " + _LEASED_FULL,
            (rater, self.k),
        )[0]
        return int(done), int(done + open_ - rated_open + leased_full)

    def _progress_counted(self, rater: str) -> tuple[int, int]:
        """:meth:`rating_progress` counted from the ratings and items themselves (a scan of the
        open items: what the trigger-kept counts of :data:`.rating_study.RATING_COUNTERS` spare)."""
        done, open_, rated_open, leased_full = self._read(
            "SELECT (SELECT COUNT(*) FROM ratings WHERE rater = ?1), "
            "(SELECT COUNT(*) FROM rating_items WHERE taken < ?2), "
            "(SELECT COUNT(*) FROM ratings x JOIN rating_items r ON r.item = x.item "
            "WHERE x.rater = ?1 AND r.taken < ?2), " + _LEASED_FULL,
            (rater, self.k),
        )[0]
        return int(done), int(done + open_ - rated_open + leased_full)

    def rating_complete(self) -> tuple[int, int]:
        """``(items with k ratings, items)``."""
        if not self._has_ratings():
            return 0, 0
        row = self._read("SELECT SUM(n >= ?), COUNT(*) FROM rating_items", (self.k,))[0]
        return int(row[0] or 0), int(row[1])

    def raters(self) -> dict[str, int]:
        """Items rated per rater."""
        if not self._has_ratings():
            return {}
        return {r: int(n) for r, n in self._read("SELECT rater, COUNT(*) FROM ratings GROUP BY rater ORDER BY rater")}

    def rating_count(self) -> int:
        """How many ratings are stored; they are only ever appended."""
        return int(self._read("SELECT COUNT(*) FROM ratings")[0][0]) if self._has_ratings() else 0

    def rating_rows(self) -> list[tuple]:
        """Every rating as a :data:`~concept_grounding.loaders.ratings.RATING_COLUMNS` tuple, in submit order."""
        if not self._has_ratings():
            return []
        return [
            tuple(r)
            for r in self._read(
                "SELECT x.rater, x.item, r.kind, r.learner, r.task, r.concept, x.rating FROM ratings x "
                "JOIN rating_items r ON r.item = x.item ORDER BY x.rowid"
            )
        ]

    def rating_alpha(self) -> float | None:
        """Krippendorff's alpha (interval) of the ratings (:func:`.rating_study.interval_alpha`)."""
        return interval_alpha((r[0], r[1], r[6]) for r in self.rating_rows())

    def export_ratings(self) -> datasets.Dataset:
        """The ratings as a ``datasets.Dataset`` with :data:`~concept_grounding.loaders.ratings.RATING_COLUMNS`."""
        import datasets

        rows = self.rating_rows()
        features = datasets.Features(
            {c: datasets.Value("int32" if c == "rating" else "string") for c in RATING_COLUMNS}
        )
        return datasets.Dataset.from_dict(
            {c: [r[i] for r in rows] for i, c in enumerate(RATING_COLUMNS)}, features=features
        )

    def ratings_to_parquet(self, path: str | Path) -> Path:
        """Write :meth:`export_ratings` to ``path`` (Parquet, replaced atomically) and return it."""
        from ..fileio import write_parquet

        return write_parquet(self.export_ratings(), path)


def _rating_item(row: tuple) -> RatingItem:
    item, kind, learner, task, concept, file_name, refs, caption = row
    return RatingItem(item, kind, learner, task, concept, file_name, tuple(json.loads(refs)), caption)


def run_raters(
    store: RatingStore, raters: Sequence[str], rate: Callable[[str, RatingItem], int], limit: int | None = None
) -> int:
    """Each rater in turn takes :meth:`RatingStore.next_rating` and submits ``rate(rater, item)``
    until none is left (or ``limit`` items each), through the same calls as the app; returns
    the number of ratings submitted."""
    n = 0
    for rater in raters:
        done = 0
        while limit is None or done < limit:
            item = store.next_rating(rater)
            if item is None:
                break
            store.submit_rating(rater, item.id, rate(rater, item))
            done += 1
            n += 1
    return n
