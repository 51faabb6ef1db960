"""What ConceptBed's rating study asks (Patel et al., App. G; docs/human_validation.md) and how its answers are
checked and agreed on: the store's tables (:data:`RATING_TABLES`, added to every annotation
store, :mod:`.annotations`), the question's wording per kind, the 1-5 check of a rating, and
Krippendorff's alpha (interval) of raters x items.

>>> check_rating("4"), check_rating(5)
(4, 5)
>>> check_rating("6")
Traceback (most recent call last):
...
concept_grounding.curation.annotation_items.AnnotationError: rating '6' is not one of 1-5
>>> round(interval_alpha([("a", "i1", 1), ("b", "i1", 1), ("a", "i2", 2), ("b", "i2", 2),
...                       ("a", "i3", 3), ("b", "i3", 4)]), 6)
0.878049
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..loaders.ratings import RATING_KINDS, RATING_SCALE, REFERENCES
from .annotation_items import AnnotationError, quote

__all__ = [
    "RATING_TABLES",
    "RATING_COUNTERS",
    "RATING_COUNTERS_FILL",
    "QUESTIONS",
    "check_rating",
    "rating_question",
    "interval_alpha",
]

#: the rating study's tables: its items (with the count of raters holding or having rated each:
#: ``taken``, and of ratings: ``n``), the ratings (1-5, one per rater and item) and the leases
#: of the items open on a rater's screen. ``shuffle`` is a per-item random number below 2^31 - 1
#: (indexed) from which each rater's own order is drawn (:meth:`.rating_store.RatingStore.next_rating`).
RATING_TABLES = """
CREATE TABLE IF NOT EXISTS rating_items (
    item TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    learner TEXT NOT NULL,
    task TEXT NOT NULL,
    concept TEXT NOT NULL,
    file_name TEXT NOT NULL,
    refs TEXT NOT NULL,
    caption TEXT,
    position INTEGER NOT NULL,
    shuffle INTEGER NOT NULL,
    n INTEGER NOT NULL DEFAULT 0,
    taken INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS ratings (
    rater TEXT NOT NULL,
    item TEXT NOT NULL REFERENCES rating_items(item),
    rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
    created REAL NOT NULL DEFAULT (julianday('now')),
    PRIMARY KEY (rater, item)
);
CREATE TABLE IF NOT EXISTS rating_leases (
    rater TEXT NOT NULL,
    item TEXT NOT NULL REFERENCES rating_items(item),
    expires REAL NOT NULL,
    PRIMARY KEY (rater, item)
);
CREATE INDEX IF NOT EXISTS rating_leases_by_rater ON rating_leases (rater);
CREATE INDEX IF NOT EXISTS rating_leases_expiry ON rating_leases (expires);
CREATE INDEX IF NOT EXISTS rating_items_open ON rating_items (taken);
CREATE INDEX IF NOT EXISTS rating_items_shuffle ON rating_items (shuffle);
"""

#: counts kept by triggers so that a rater's progress is a few index lookups, not a scan of every
#: item (:meth:`.rating_store.RatingStore.rating_progress`, on every submit): ``rating_taken``,
#: how many items have each ``taken``; ``rating_rater_taken``, per rater, how many of the items
#: they rated have each ``taken``. Each row of ``rating_items`` or ``ratings`` written, whoever
#: writes it, moves these counts in the same transaction.
RATING_COUNTERS = """
CREATE TABLE IF NOT EXISTS rating_taken (
    taken INTEGER PRIMARY KEY,
    items INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rating_rater_taken (
    rater TEXT NOT NULL,
    taken INTEGER NOT NULL,
    items INTEGER NOT NULL,
    PRIMARY KEY (rater, taken)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ratings_by_item ON ratings (item);
CREATE TRIGGER IF NOT EXISTS rating_items_added AFTER INSERT ON rating_items BEGIN
    INSERT INTO rating_taken VALUES (new.taken, 1) ON CONFLICT (taken) DO UPDATE SET items = items + 1;
END;
CREATE TRIGGER IF NOT EXISTS rating_items_removed AFTER DELETE ON rating_items BEGIN
    UPDATE rating_taken SET items = items - 1 WHERE taken = old.taken;
END;
CREATE TRIGGER IF NOT EXISTS rating_items_retaken AFTER UPDATE OF taken ON rating_items
WHEN new.taken IS NOT old.taken BEGIN
    UPDATE rating_taken SET items = items - 1 WHERE taken = old.taken;
    INSERT INTO rating_taken VALUES (new.taken, 1) ON CONFLICT (taken) DO UPDATE SET items = items + 1;
    UPDATE rating_rater_taken SET items = items - 1
        WHERE taken = old.taken AND rater IN (SELECT rater FROM ratings WHERE item = new.item);
    INSERT INTO rating_rater_taken SELECT rater, new.taken, 1 FROM ratings WHERE item = new.item
        ON CONFLICT (rater, taken) DO UPDATE SET items = items + 1;
END;
CREATE TRIGGER IF NOT EXISTS ratings_added AFTER INSERT ON ratings BEGIN
    INSERT INTO rating_rater_taken SELECT new.rater, taken, 1 FROM rating_items WHERE item = new.item
        ON CONFLICT (rater, taken) DO UPDATE SET items = items + 1;
END;
CREATE TRIGGER IF NOT EXISTS ratings_removed AFTER DELETE ON ratings BEGIN
    UPDATE rating_rater_taken SET items = items - 1
        WHERE rater = old.rater AND taken = (SELECT taken FROM rating_items WHERE item = old.item);
END;
"""

#: :data:`RATING_COUNTERS` filled from a file's items and ratings (once, when an older file gains them)
RATING_COUNTERS_FILL = """
INSERT INTO rating_taken SELECT taken, COUNT(*) FROM rating_items GROUP BY taken;
INSERT INTO rating_rater_taken SELECT x.rater, r.taken, COUNT(*) FROM ratings x JOIN rating_items r ON r.item = x.item
    GROUP BY x.rater, r.taken;
"""

#: the question per kind (App. G: 1 least similar, 5 an exact match)
QUESTIONS = {
    "concept": f"How likely is it that this image shows the same concept as the {REFERENCES} reference images? "
    "1: not at all, 5: exactly the same concept.",
    "caption": "How well does this image match its caption? 1: not at all, 5: an exact match.",
}
assert set(QUESTIONS) == set(RATING_KINDS)


def rating_question(kind: str) -> str:
    """The wording shown for an item of ``kind``."""
    return QUESTIONS[kind]


def check_rating(value: object) -> int:
    """``value`` (an int or its text, as the page sends it) as a rating in 1-5; anything else
    :class:`AnnotationError` in one line (quoting at most 40 characters of it)."""
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) == 1:
        text = int(text)
    if isinstance(text, (int, np.integer)) and not isinstance(text, bool) and int(text) in RATING_SCALE:
        return int(text)
    raise AnnotationError(
        f"rating {quote(value)} is not one of {RATING_SCALE[0]}-{RATING_SCALE[-1]}", brief="rating outside 1-5"
    )


def interval_alpha(rows: Iterable[tuple[str, str, float]]) -> float | None:
    """Krippendorff's alpha, interval level (``krippendorff.alpha``), of ``(rater, item, rating)``
    rows on the raters x items reliability table (NaN where a rater did not rate an item);
    ``None`` when no item has two ratings or only one value occurs."""
    import krippendorff

    rows = list(rows)
    raters = sorted({r for r, _, _ in rows})
    items = sorted({i for _, i, _ in rows})
    table = np.full((len(raters), len(items)), np.nan)
    ri, ii = {r: n for n, r in enumerate(raters)}, {i: n for n, i in enumerate(items)}
    for rater, item, value in rows:
        table[ri[rater], ii[item]] = float(value)
    values = table[~np.isnan(table)]
    if not rows or (~np.isnan(table)).sum(0).max() < 2 or np.unique(values).size < 2:
        return None
    return float(krippendorff.alpha(reliability_data=table, level_of_measurement="interval"))
