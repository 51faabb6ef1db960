"""ConceptBed's rating study (Patel et al., App. G) through the calls the rating tab made before the study store: a
thin compatibility layer over :class:`~.study_store.StudyStore` (items are records of ``conceptbed-rating``,
:func:`~.study.rating_record`, handed out in each rater's own shuffled order), kept only until the app reads the study
store itself. New code uses :class:`~.study_store.StudyStore`.

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

from collections.abc import Iterable

from ..loaders.ratings import RatingItem
from .annotation_items import AnnotationError, quote
from .annotations import AnnotationStore
from .rating_study import check_rating
from .study import CONCEPTBED_RATING, rating_item, rating_record

__all__ = ["RatingStore", "RatingItem"]

_NAME = CONCEPTBED_RATING.name


class RatingStore(AnnotationStore):
    """The annotation store with the rating tab's calls (module docstring)."""

    def add_rating_items(self, items: Iterable[RatingItem]) -> int:
        """Add items to rate (ids already present are kept as they are); returns how many were new."""
        return self.add_records(_NAME, [rating_record(it) for it in items])

    def rating_item(self, item: object) -> RatingItem:
        """The stored item ``item``; an unknown id raises :class:`AnnotationError` (one line)."""
        try:
            return rating_item(self.record(_NAME, item))
        except AnnotationError:
            raise AnnotationError(
                f"item {quote(item)}: not in {self.path} (a forged or stale id)", brief="unknown item"
            ) from None

    def rating_items(self) -> list[RatingItem]:
        """Every stored item, in insertion order."""
        return [rating_item(r) for r in self.records(_NAME)]

    def next_rating(self, rater: str) -> RatingItem | None:
        """:meth:`~.study_store.StudyStore.next_record` of the rating study (the rater's own order)."""
        record = self.next_record(rater, _NAME)
        return None if record is None else rating_item(record)

    def submit_rating(self, rater: str, item: str, rating: object) -> None:
        """Store ``rater``'s ``rating`` (1-5, or its text) of ``item`` (:meth:`~.study_store.StudyStore.submit`)."""
        stored = self.rating_item(item)
        try:
            value = check_rating(rating)
        except AnnotationError as err:
            raise AnnotationError(f"item {stored.id!r}: {err}", brief=err.brief) from None
        self.submit_response(rater, _NAME, stored.id, {"rating": value})

    def open_rating(self, rater: str) -> str | None:
        """The item leased to ``rater`` now (on their screen, not yet rated), or ``None``."""
        return self.open_record(rater, _NAME)

    def rating_progress(self, rater: str) -> tuple[int, int]:
        """:meth:`~.study_store.StudyStore.progress` of the rating study."""
        return self.progress(rater, _NAME)

    def rating_complete(self) -> tuple[int, int]:
        """``(items with k ratings, items)``."""
        return self.complete(_NAME)

    def rating_rows(self) -> list[tuple]:
        """Every rating as a :data:`~concept_grounding.loaders.ratings.RATING_COLUMNS` tuple, in submit order."""
        items = {r.id: r.metadata for r in self.records(_NAME)}
        return [
            (
                r.annotator,
                r.record,
                *(items[r.record][c] for c in ("kind", "learner", "task", "concept")),
                int(r.answers["rating"]),
            )
            for r in self.responses(_NAME)
        ]
