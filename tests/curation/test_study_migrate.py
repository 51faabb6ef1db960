"""Annotation files of schema versions 1-4 (each built here with that version's own CREATE statements) open in the
study store with every image, answer, rating item, rating, lease and token kept: converted in one transaction when
opened for writing, read through a converted copy (the file untouched) when opened read-only."""

from __future__ import annotations

import json
import sqlite3

import pytest

from concept_grounding.curation import study_migrate
from concept_grounding.curation.annotation_items import AnnotationError, token_hash
from concept_grounding.curation.study_store import SCHEMA_VERSION, StudyStore

# ---------------------------------------------------------------- the older versions' tables, as they were written
V1 = """
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
TOKENS = """
CREATE TABLE IF NOT EXISTS tokens (
    annotator TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    created REAL NOT NULL DEFAULT (julianday('now'))
);
"""
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

CHOICES = ["has_crown_color::pink", "has_crown_color::blue"]
TOKEN = "t" * 32
#: (annotator, image, question, answer) as the old store wrote them, one row per question
ANSWERS = [
    ("ann", "1:c0", "q1", "yes"),
    ("ann", "1:c0", "q2", "no"),
    ("bob", "1:c0", "q1", "somewhat"),
    ("bob", "1:c0", "q2", "yes"),
    ("ann", "2:c0", "present", CHOICES[1]),
]
RATINGS = [("ann", "r-1", 4), ("bob", "r-1", 5), ("bob", "r-2", 1)]


def _old_file(path, version: int) -> None:
    """A file of ``version`` holding images of both SUB studies, answers, a live lease and, from version 2, a token;
    from version 3, rating items, ratings and a rating lease (from version 4 with its trigger-kept counts)."""
    con = sqlite3.connect(path, isolation_level=None)
    con.executescript(
        V1
        + (TOKENS if version >= 2 else "")
        + (RATING_TABLES if version >= 3 else "")
        + (RATING_COUNTERS if version >= 4 else "")
        + f"PRAGMA user_version={version};"
    )
    con.execute("INSERT INTO settings VALUES ('k', '2')")
    images = [
        ("1:c0", 1, "017.Cardinal", CHOICES[0], "[]", json.dumps({"candidate": "c0"}), 0),
        ("1:c1", 1, "017.Cardinal", CHOICES[0], "[]", json.dumps({"candidate": "c1"}), 1),
        ("2:c0", 2, "017.Cardinal", CHOICES[0], json.dumps(CHOICES), json.dumps({"candidate": "c0"}), 2),
    ]
    con.executemany("INSERT INTO images VALUES (?, ?, ?, ?, ?, ?, ?)", images)
    taken = {"1:c0": (2, 2), "1:c1": (0, 1), "2:c0": (1, 1)}
    con.executemany("INSERT INTO counts VALUES (?, ?, ?, ?, ?)", [(i[0], i[1], *taken[i[0]], i[6]) for i in images])
    con.executemany(
        "INSERT INTO answers (annotator, image, study, question, answer) VALUES (?, ?, ?, ?, ?)",
        [(a, i, int(i[0]), q, v) for a, i, q, v in ANSWERS],
    )
    con.execute("INSERT INTO leases VALUES ('carol', '1:c1', 1, 4e9)")
    if version >= 2:
        con.execute("INSERT INTO tokens (annotator, hash) VALUES ('ann', ?)", (token_hash(TOKEN),))
    if version >= 3:
        for n, (item, kind) in enumerate((("r-1", "concept"), ("r-2", "caption"), ("r-3", "concept"))):
            con.execute(
                "INSERT INTO rating_items (item, kind, learner, task, concept, file_name, refs, caption, position, "
                "shuffle) VALUES (?, ?, 'LoRA', 'object', 'c0', ?, ?, ?, ?, ?)",
                (
                    item,
                    kind,
                    f"images/{item}.png",
                    json.dumps(["a.png", "b.png", "c.png"] if kind == "concept" else []),
                    "V* on a branch" if kind == "caption" else None,
                    n,
                    1000 + n,
                ),
            )
        con.executemany("INSERT INTO ratings (rater, item, rating) VALUES (?, ?, ?)", RATINGS)
        con.execute("UPDATE rating_items SET n = 2, taken = 2 WHERE item = 'r-1'")
        con.execute("UPDATE rating_items SET n = 1, taken = 2 WHERE item = 'r-2'")
        con.execute("INSERT INTO rating_leases VALUES ('ann', 'r-2', 4e9)")
    con.close()


def _kept(store: StudyStore, version: int) -> None:
    """Every answer, rating, lease and token of :func:`_old_file` is in ``store``."""
    sub = [
        (r.annotator, r.record, q, a)
        for s in ("sub-1", "sub-2")
        for r in store.responses(s)
        for q, a in r.answers.items()
    ]
    assert sorted(sub) == sorted(ANSWERS)
    assert [r.id for r in store.records("sub-1")] == ["1:c0", "1:c1"] and store.records("sub-2")[0].options == {
        "present": tuple(CHOICES)
    }
    assert store.records("sub-1")[0].metadata["candidate"] == "c0" and store.k == 2
    assert store.complete("sub-1") == (1, 2) and store.open_record("carol", "sub-1") == "1:c1"
    ratings = [(r.annotator, r.record, int(r.answers["rating"])) for r in store.responses("conceptbed-rating")]
    if version >= 3:
        assert ratings == RATINGS and store.open_record("ann", "conceptbed-rating") == "r-2"
        items = store.records("conceptbed-rating")
        assert [r.id for r in items] == ["r-1", "r-2", "r-3"] and items[1].fields["caption"] == "V* on a branch"
        assert items[0].fields["references"] == ["a.png", "b.png", "c.png"] and items[0].metadata["learner"] == "LoRA"
        assert store.complete("conceptbed-rating") == (1, 3)
        shuffles = [s for (s,) in store.read("SELECT shuffle FROM records WHERE study = 'conceptbed-rating'")]
        assert sorted(shuffles) == [1000, 1001, 1002]  # each rater's order kept
    else:
        assert ratings == []
    assert store.annotator_for_token(TOKEN) == ("ann" if version >= 2 else None)
    counted = store.read("SELECT id, n, taken FROM records WHERE study IN ('sub-1', 'sub-2') ORDER BY study, position")
    assert counted == [("1:c0", 2, 2), ("1:c1", 0, 1), ("2:c0", 1, 1)]


def _version(path) -> int:
    with sqlite3.connect(path) as con:
        return con.execute("PRAGMA user_version").fetchone()[0]


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_older_file_opened_for_writing_keeps_everything(tmp_path, version):
    path = tmp_path / f"v{version}.db"
    _old_file(path, version)
    store = StudyStore(path)
    assert _version(path) == SCHEMA_VERSION
    _kept(store, version)
    tables = {r[0] for r in store.read("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}
    assert tables == {"settings", "records", "responses", "leases", "annotators", "open_records", "annotator_counts"}
    _kept(StudyStore(path, k=2), version)  # reopened: nothing converted twice
    assert store.next_record("bob", "sub-1").id == "1:c1"  # and it goes on: bob joins carol on 1:c1
    assert store.next_record("dan", "sub-1") is None  # k = 2: 1:c0 full, 1:c1 held by carol and bob
    store.submit("carol", "sub-1", "1:c1", {"q1": "no", "q2": "no"})
    assert store.progress("carol", "sub-1") == (1, 1) and store.progress("bob", "sub-1") == (1, 2)
    rating = [("conceptbed-rating", 1)] if version >= 3 else []
    assert store.read("SELECT * FROM open_records ORDER BY study") == [*rating, ("sub-1", 0), ("sub-2", 1)]


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_older_file_opened_read_only_is_read_converted_and_left_as_it_is(tmp_path, version):
    path = tmp_path / f"v{version}.db"
    _old_file(path, version)
    before = path.read_bytes()
    store = StudyStore(path, read_only=True)
    _kept(store, version)
    assert path.read_bytes() == before and _version(path) == version
    with pytest.raises(AnnotationError, match="opened read-only"):
        store.submit("carol", "sub-1", "1:c1", {"q1": "no", "q2": "no"})


def test_a_conversion_that_fails_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "v4.db"
    _old_file(path, 4)

    def boom(con):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(study_migrate, "recount", boom)
    with pytest.raises(AnnotationError, match="disk I/O error") as err:
        StudyStore(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    assert _version(path) == 4
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == len(ANSWERS)
        assert con.execute("SELECT COUNT(*) FROM ratings").fetchone()[0] == len(RATINGS)
    monkeypatch.undo()
    _kept(StudyStore(path), 4)
