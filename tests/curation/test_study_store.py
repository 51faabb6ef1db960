"""The study store: k responses per record, never twice by one annotator, resumable, both distributions, leases,
concurrent writers (threads and processes), hashed tokens, every bad input refused with one line and nothing written."""

from __future__ import annotations

import os
import random
import sqlite3
import stat
import threading

import pytest

from concept_grounding.curation.annotation_items import AnnotationError, token_hash
from concept_grounding.curation.study import (
    CONCEPTBED_RATING,
    SUB_STUDY_1,
    SUB_STUDY_2,
    Record,
    image_item,
    rating_item,
    rating_record,
    sub_record,
)
from concept_grounding.curation.study_store import SCHEMA_VERSION, StudyStore
from concept_grounding.loaders.ratings import RatingItem

CHOICES = ("has_crown_color::pink", "has_crown_color::blue", "has_crown_color::black")
META = {"plus": "pink crown", "reference": "Cardinal"}


def _sub1(i: int) -> Record:
    return Record(f"1:c{i}", "sub-1", {"image": f"c{i}"}, metadata=META)


def _sub2(i: int) -> Record:
    return Record(f"2:c{i}", "sub-2", {"image": f"c{i}"}, {"present": CHOICES})


def _rating(i: int) -> Record:
    return Record(f"r{i}", "conceptbed-rating", {"image": f"r{i}.png"}, metadata={"question": "How well?"})


def _store(tmp_path, n=6, k=3, **kw) -> StudyStore:
    store = StudyStore(tmp_path / "a.db", k=k, **kw)
    store.add_records("sub-1", [_sub1(i) for i in range(n)])
    store.add_records("sub-2", [_sub2(i) for i in range(n)])
    store.add_records("conceptbed-rating", [_rating(i) for i in range(n)])
    return store


ANSWERS = {"sub-1": {"q1": "yes", "q2": "no"}, "sub-2": {"present": CHOICES[0]}, "conceptbed-rating": {"rating": 3}}


def _drain(store, name, study="sub-1"):
    seen = []
    while (record := store.next_record(name, study)) is not None:
        store.submit(name, study, record.id, ANSWERS[study])
        seen.append(record.id)
    return seen


@pytest.mark.parametrize("study", ["sub-1", "conceptbed-rating"])
def test_every_record_answered_by_k_never_twice_by_one(tmp_path, study):
    store = _store(tmp_path, n=5, k=3)
    seen = {name: _drain(store, name, study) for name in ("a", "b", "c", "d")}
    counts: dict[str, int] = {}
    for name, ids in seen.items():
        assert len(ids) == len(set(ids)), name
        for i in ids:
            counts[i] = counts.get(i, 0) + 1
    assert set(counts.values()) == {3} and len(counts) == 5
    assert seen["d"] == [] and store.complete(study) == (5, 5)
    assert store.response_count() == 15 and store.complete("sub-2") == (0, 5)


def test_finish_first_and_shuffled_orders(tmp_path):
    store = _store(tmp_path, n=8, k=2)
    first = store.next_record("a", "sub-1")
    assert first.id == "1:c0"  # insertion order
    store.submit("a", "sub-1", first.id, ANSWERS["sub-1"])
    assert store.next_record("b", "sub-1").id == "1:c0"  # the started record is finished first
    orders = {name: _drain(store, name, "conceptbed-rating") for name in ("a", "b")}
    assert sorted(orders["a"]) == sorted(orders["b"]) == [f"r{i}" for i in range(8)]
    assert orders["a"] != orders["b"] and orders["a"] != sorted(orders["a"])  # each annotator's own order
    again = StudyStore(tmp_path / "b.db", k=2)
    again.add_records("conceptbed-rating", [_rating(i) for i in range(8)])
    assert again.next_record("a", "conceptbed-rating").id == orders["a"][0]  # deterministic


def test_resumes_where_each_annotator_left_off(tmp_path):
    store = _store(tmp_path, n=4, k=2)
    first = store.next_record("a", "sub-1")
    store.submit("a", "sub-1", first.id, {"q1": "somewhat", "q2": "no"})
    store.close()
    reopened = StudyStore(tmp_path / "a.db", k=2)
    assert reopened.progress("A ", "sub-1") == (1, 4)  # annotator ids normalised
    assert reopened.next_record("a", "sub-1").id != first.id
    assert reopened.next_record("b", "sub-1").id == first.id
    assert reopened.responses("sub-1")[0].answers == {"q1": "somewhat", "q2": "no"}


@pytest.mark.parametrize(
    ("study", "record", "answers", "words"),
    [
        ("sub-1", "1:forged", {"q1": "yes", "q2": "no"}, "forged or stale"),
        ("sub-1", "1:c0", {"q1": "maybe", "q2": "no"}, "q1: 'maybe' is not one of yes, somewhat, no"),
        ("sub-1", "1:c0", {"q1": "yes"}, "answer q2 before submitting"),
        ("sub-1", "1:c0", {"q1": "yes", "q2": "no", "q3": "x"}, "asks no question 'q3'"),
        ("sub-1", "1:c0", ["yes", "no"], "must be a mapping"),
        ("sub-2", "2:c0", {"present": "has_wing_color::red"}, "not one of"),
        ("conceptbed-rating", "r0", {"rating": 6}, "rating: 6 is not one of 1, 2, 3, 4, 5"),
        ("conceptbed-rating", "r0", {"rating": True}, "is not one of"),
        ("sub-3", "1:c0", {}, "no study 'sub-3'"),
        ("sub-1", "x" * 5000, {}, "forged or stale"),
    ],
)
def test_bad_input_one_line_nothing_written(tmp_path, study, record, answers, words):
    store = _store(tmp_path)
    with pytest.raises(AnnotationError) as err:
        store.submit("a", study, record, answers)
    assert words in str(err.value) and "\n" not in str(err.value) and len(str(err.value)) < 300
    assert store.response_count() == 0


def test_bad_records_refused(tmp_path):
    store = StudyStore(tmp_path / "a.db")
    for study, record, words in [
        ("sub-2", Record("2:x", "sub-2", {"image": "x"}, {"present": ("a",)}), "needs at least 2 options"),
        ("sub-1", Record("1:x", "sub-1", {}), "lacks the field 'image'"),
        ("sub-1", Record("1:x", "sub-2", {"image": "x"}), "of study 'sub-2', not 'sub-1'"),
        ("sub-1", {"id": "1:x"}, "records must be Record"),
    ]:
        with pytest.raises(AnnotationError, match=words):
            store.add_records(study, [record])
    assert store.records("sub-1") == [] and store.records("sub-2") == []


def test_repeated_and_stale_submits_refused_first_kept(tmp_path):
    store = _store(tmp_path, n=3, k=1)
    a = store.next_record("a", "sub-1")
    store.submit("a", "sub-1", a.id, ANSWERS["sub-1"])
    with pytest.raises(AnnotationError, match="already answered it") as err:
        store.submit("a", "sub-1", a.id, {"q1": "no", "q2": "yes"})
    assert err.value.brief == "a second submit"
    b = store.next_record("b", "sub-1")
    with pytest.raises(AnnotationError, match="already has its 1 annotators") as err:
        store.submit("c", "sub-1", b.id, ANSWERS["sub-1"])  # no lease: refused while b holds it
    assert err.value.brief == "record full"
    assert [(r.annotator, r.record) for r in store.responses("sub-1")] == [("a", a.id)]


def test_leases_same_record_until_answered_and_abandoned_ones_run_out(tmp_path):
    now = [1000.0]
    store = StudyStore(tmp_path / "a.db", k=1, lease_seconds=60, clock=lambda: now[0])
    store.add_records("sub-1", [_sub1(0)])
    assert store.next_record("a", "sub-1").id == "1:c0"
    assert store.next_record("a", "sub-1").id == "1:c0" and store.open_record("a", "sub-1") == "1:c0"
    assert store.next_record("b", "sub-1") is None
    assert store.progress("a", "sub-1") == (0, 1) and store.progress("b", "sub-1") == (0, 0)
    now[0] += 61
    assert store.open_record("a", "sub-1") is None
    assert store.next_record("b", "sub-1").id == "1:c0"  # a's lease ran out
    store.submit("b", "sub-1", "1:c0", {"q1": "no", "q2": "no"})
    with pytest.raises(AnnotationError, match="already has its 1 annotators"):
        store.submit("a", "sub-1", "1:c0", ANSWERS["sub-1"])  # a comes back too late: refused, b's kept
    assert [r.annotator for r in store.responses("sub-1")] == ["b"]


def _progress_by_definition(store, annotator, study):
    """``progress``'s definition, one record at a time."""
    con = store.connection()
    answered = {
        r[0] for r in con.execute("SELECT record FROM responses WHERE annotator = ? AND study = ?", (annotator, study))
    }
    leased = {
        r[0] for r in con.execute("SELECT record FROM leases WHERE annotator = ? AND study = ?", (annotator, study))
    }
    left = sum(
        1
        for rec, taken in con.execute("SELECT id, taken FROM records WHERE study = ?", (study,))
        if rec not in answered and (taken < store.k or rec in leased)
    )
    return len(answered), len(answered) + left


def _counts_by_definition(store):
    """Every count the store keeps equals the one counted from the rows."""
    con = store.connection()
    for study, rec, n, taken in con.execute("SELECT study, id, n, taken FROM records"):
        responses = con.execute("SELECT COUNT(*) FROM responses WHERE study = ? AND record = ?", (study, rec))
        leases = con.execute("SELECT COUNT(*) FROM leases WHERE study = ? AND record = ?", (study, rec))
        got = responses.fetchone()[0]
        assert (n, taken) == (got, got + leases.fetchone()[0]), (study, rec)
    open_ = dict(con.execute("SELECT study, SUM(taken < ?) FROM records GROUP BY study", (store.k,)))
    assert dict(con.execute("SELECT study, n FROM open_records")) == open_
    answered = con.execute(
        "SELECT r.annotator, r.study, COUNT(*), SUM(c.taken < ?) FROM responses r JOIN records c ON c.study = r.study "
        "AND c.id = r.record GROUP BY r.annotator, r.study ORDER BY 1, 2",
        (store.k,),
    ).fetchall()
    assert con.execute("SELECT * FROM annotator_counts ORDER BY 1, 2").fetchall() == answered


def test_progress_and_counts_match_their_definition_through_leases_refusals_and_expiry(tmp_path):
    now = [0.0]
    store = _store(tmp_path, n=8, k=2, lease_seconds=10, clock=lambda: now[0])
    rng = random.Random(0)
    names, studies = ("a", "b", "c", "d"), ("sub-1", "sub-2", "conceptbed-rating")
    for _ in range(150):
        name, study = rng.choice(names), rng.choice(studies)
        record = store.next_record(name, study)
        if record is not None and rng.random() < 0.6:
            store.submit(name, study, record.id, ANSWERS[study])
        elif record is not None and rng.random() < 0.5:  # a record not leased to them: stored, or refused
            other = rng.choice(store.records(study)).id
            try:
                store.submit(name, study, other, ANSWERS[study])
            except AnnotationError as err:
                assert err.brief in ("a second submit", "record full")  # noqa: PT017 - it may be stored instead
        now[0] += rng.choice((0.0, 0.0, 4.0))
        for who in names:
            for s in studies:
                assert store.progress(who, s) == _progress_by_definition(store, who, s), (who, s)
        _counts_by_definition(store)
    assert store.response_count() > 20


def test_concurrent_writers_never_exceed_k_lose_nothing(tmp_path):
    store = _store(tmp_path, n=20, k=3, timeout=30)
    seen: dict[str, int] = {}
    errors: list[BaseException] = []

    def work(name):
        own = StudyStore(tmp_path / "a.db", k=3, timeout=30)
        try:
            seen[name] = len(_drain(own, name, "sub-1")) + len(_drain(own, name, "conceptbed-rating"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"ann{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and sum(seen.values()) == 2 * 20 * 3 == store.response_count()
    assert store.complete("sub-1") == store.complete("conceptbed-rating") == (20, 20)
    _counts_by_definition(store)


def _drain_in_process(args):
    path, name = args
    return len(_drain(StudyStore(path, timeout=30), name, "conceptbed-rating"))


def test_concurrent_processes_lose_nothing(tmp_path):
    import multiprocessing

    store = _store(tmp_path, n=30, k=2)
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        done = pool.map(_drain_in_process, [(str(tmp_path / "a.db"), f"p{i}") for i in range(3)])
    assert sum(done) == 30 * 2 == store.response_count() and store.complete("conceptbed-rating") == (30, 30)


def test_tokens_hashed_issued_once_replaced_on_demand(tmp_path):
    store = _store(tmp_path)
    token = store.issue_token(" Ann ")
    assert store.annotator_for_token(token) == "ann" and store.issue_token("ann") is None
    raw = (tmp_path / "a.db").read_bytes() + (tmp_path / "a.db-wal").read_bytes()
    assert token.encode() not in raw and token_hash(token) in store.read("SELECT token_hash FROM annotators")[0]
    new = store.issue_token("ann", replace=True)
    assert store.annotator_for_token(token) is None and store.annotator_for_token(new) == "ann"
    _drain(store, "bob")  # answering registers bob, without a link
    assert store.token_holders() == ["ann"] and store.annotators() == {"bob": {"sub-1": 6}}
    for bad in (None, "", "x" * 10, "y" * 500, 5):
        assert store.annotator_for_token(bad) is None
    with pytest.raises(AnnotationError, match="too long"):
        store.next_record("x" * 100, "sub-1")


def test_writers_of_one_process_take_turns_on_one_lock_per_file(tmp_path):
    store = _store(tmp_path)
    (tmp_path / "sub").mkdir()
    other = StudyStore(tmp_path / "sub" / ".." / "a.db", timeout=0.2)
    assert StudyStore(tmp_path / "b.db").k == 3
    held, release = threading.Event(), threading.Event()

    def hold():
        def wait(con):
            held.set()
            release.wait(5)

        store.write(wait)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        held.wait(5)
        with pytest.raises(AnnotationError, match="locked by another writer for more than 0.2 s"):
            other.submit("a", "sub-1", "1:c0", ANSWERS["sub-1"])
    finally:
        release.set()
        holder.join()
    other.submit("a", "sub-1", "1:c0", ANSWERS["sub-1"])
    assert store.response_count() == 1


def test_locked_read_only_corrupt_other_version_and_full_disk_one_line(tmp_path):
    store = _store(tmp_path)
    blocker = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(AnnotationError, match="locked by another writer"):
            StudyStore(tmp_path / "a.db", timeout=0.2).submit("a", "sub-1", "1:c0", ANSWERS["sub-1"])
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    reader = StudyStore(tmp_path / "a.db", read_only=True)
    with pytest.raises(AnnotationError, match="opened read-only"):
        reader.submit("a", "sub-1", "1:c0", ANSWERS["sub-1"])
    store.connection().execute("PRAGMA query_only=ON")
    with pytest.raises(AnnotationError, match="read-only"):
        store.submit("a", "sub-1", "1:c0", ANSWERS["sub-1"])
    store.connection().execute("PRAGMA query_only=OFF")
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite" * 200)
    with pytest.raises(AnnotationError, match="not an annotation database"):
        StudyStore(bad)
    assert bad.read_bytes() == b"this is not sqlite" * 200
    with pytest.raises(AnnotationError, match="made for k = 3"):
        StudyStore(tmp_path / "a.db", k=2)
    store.submit("a", "sub-1", "1:c0", ANSWERS["sub-1"])
    con = store.connection()
    con.execute(f"PRAGMA max_page_count={con.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(AnnotationError, match="disk is full"):
        store.add_records("sub-1", [Record(f"1:x{i}" + "x" * 900, "sub-1", {"image": "x" * 2000}) for i in range(200)])
    assert len(store.records("sub-1")) == 6 and store.response_count() == 1
    store.close()
    con = sqlite3.connect(tmp_path / "a.db")
    con.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    con.close()
    with pytest.raises(AnnotationError, match=f"schema version {SCHEMA_VERSION + 1}"):
        StudyStore(tmp_path / "a.db")


def _pair_study(k: int):
    """A study declared with ``k`` responses per record (a label question)."""
    from concept_grounding.curation.study import Distribution, Field, Question, Study

    return Study(
        "pairs",
        "Pairs",
        "Pick one.",
        (Field("image", "image"),),
        (Question("pick", "label", "Which?", ("a", "b")),),
        Distribution(k=k),
    )


def test_each_study_keeps_its_declared_k_unless_the_file_was_made_with_another(tmp_path):
    pairs = _pair_study(1)
    store = StudyStore(tmp_path / "a.db", studies=[pairs])
    store.add_records(pairs, [Record(f"p{i}", "pairs", {"image": f"p{i}.png"}) for i in range(2)])
    store.add_records("sub-1", [_sub1(i) for i in range(2)])
    assert store.k_of(pairs) == 1 and store.k_of("sub-1") == 3 == SUB_STUDY_1.distribution.k
    assert _drain(store, "ann", "sub-1") == ["1:c0", "1:c1"]
    for name in ("ann", "bob"):
        while (record := store.next_record(name, "pairs")) is not None:
            store.submit(name, "pairs", record.id, {"pick": "a"})
    assert store.complete("pairs") == (2, 2) and len(store.responses("pairs")) == 2  # k = 1: one answer a record
    assert store.complete("sub-1") == (0, 2) and store.progress("bob", "sub-1") == (0, 2)  # k = 3: still open
    with pytest.raises(AnnotationError, match="studies differ in k") as err:
        store.k  # noqa: B018
    assert "\n" not in str(err.value)
    store.add_records(pairs, [Record("p9", "pairs", {"image": "p9.png"})])
    with pytest.raises(AnnotationError, match="already has its 1 annotators"):
        store.submit("carol", "pairs", "p0", {"pick": "b"})
    # the file keeps the k each study was served with: a later declaration does not change it
    again = StudyStore(tmp_path / "a.db", studies=[_pair_study(4)])
    assert again.k_of("pairs") == 1 and again.k_of("sub-1") == 3
    with pytest.raises(AnnotationError, match="made for k = 1 annotators per record of 'pairs', opened with k = 3"):
        StudyStore(tmp_path / "a.db", k=3, studies=[pairs])
    # a file made with k (annotate --k) keeps it for every study it serves, a study served later too
    made = StudyStore(tmp_path / "b.db", k=2)
    assert {made.k_of(s) for s in ("sub-1", "sub-2", "conceptbed-rating")} == {2} == {made.k}
    later = StudyStore(tmp_path / "b.db", studies=[pairs])
    assert later.k_of(pairs) == 1 and later.k_of("sub-2") == 2
    with pytest.raises(AnnotationError, match="of 'pairs', opened with k = 2"):
        StudyStore(tmp_path / "b.db", k=2, studies=[pairs])
    # a file made before each study kept its own k: its one k holds for all of them
    old = StudyStore(tmp_path / "c.db", k=2)
    old.write(lambda con: con.execute("DELETE FROM settings"))
    old.write(lambda con: con.execute("INSERT INTO settings VALUES ('k', '4')"))
    assert StudyStore(tmp_path / "c.db", studies=[pairs]).k_of(pairs) == 4 == StudyStore(tmp_path / "c.db").k
    assert StudyStore(tmp_path / "c.db", read_only=True).k_of("conceptbed-rating") == 4


def test_read_only_file(tmp_path):
    store = _store(tmp_path)
    store.close()
    db = tmp_path / "a.db"
    for p in (db, tmp_path):
        p.chmod(stat.S_IREAD | stat.S_IEXEC if p.is_dir() else stat.S_IREAD)
    try:
        if os.access(db, os.W_OK):
            pytest.skip("running as a user who can write read-only files (root)")
        assert StudyStore(db, read_only=True).response_count() == 0
        with pytest.raises(AnnotationError, match="read-only"):
            StudyStore(db, k=3).submit("a", "sub-1", "1:c0", ANSWERS["sub-1"])
    finally:
        tmp_path.chmod(stat.S_IRWXU)
        db.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_sub_and_rating_items_round_trip_as_records():
    from concept_grounding.curation.annotation_items import study1_item, study2_item

    one = study1_item("1:c0", "017.Cardinal", CHOICES[0], candidate="c0")
    two = study2_item("2:c0", "017.Cardinal", CHOICES[1], CHOICES, candidate="c0", pairing="p")
    for item in (one, two):
        record = sub_record(item)
        assert image_item(record) == item and record.fields == {"image": "c0"}
    assert "pink" in SUB_STUDY_1.questions[0].text(sub_record(one)) and "Cardinal" in SUB_STUDY_1.questions[1].text(
        sub_record(one)
    )
    assert sub_record(two).options == {"present": CHOICES} and SUB_STUDY_2.name == sub_record(two).study
    item = RatingItem("r-1", "concept", "LoRA", "object", "c0", "images/r-1.png", ("a.png", "b.png", "c.png"))
    record = rating_record(item)
    assert rating_item(record) == item and "reference images" in CONCEPTBED_RATING.questions[0].text(record)
    caption = RatingItem("r-2", "caption", "LoRA", "composition", "c0", "images/r-2.png", (), "V* on a branch")
    assert rating_item(rating_record(caption)) == caption


def test_export_one_row_per_response_with_fields_and_metadata_and_parquet(tmp_path):
    import pandas as pd

    from concept_grounding.curation.study_export import export_columns, long_answers
    from concept_grounding.loaders.ratings import ratings_frame

    store = StudyStore(tmp_path / "a.db", k=2)
    items = [
        RatingItem("r-1", "concept", "LoRA", "object", "c0", "images/r-1.png", ("a.png", "b.png", "c.png")),
        RatingItem("r-2", "caption", "DreamBooth", "composition", "c1", "images/r-2.png", (), "V* on a branch"),
    ]
    store.add_records(CONCEPTBED_RATING, [rating_record(it) for it in items])
    store.submit("ann", "conceptbed-rating", "r-2", {"rating": 4})
    store.submit("bob", "conceptbed-rating", "r-1", {"rating": "2"})
    ds = store.export("conceptbed-rating")
    assert tuple(ds.column_names) == export_columns(
        CONCEPTBED_RATING, ("concept", "kind", "learner", "question", "task")
    )
    assert (
        ds[0]["references"] is None
        and ds[0]["caption"] == "V* on a branch"
        and ds[1]["references"] == ["a.png", "b.png", "c.png"]
    )
    assert ratings_frame(ds).values.tolist() == [
        ["ann", "r-2", "caption", "DreamBooth", "composition", "c1", 4],
        ["bob", "r-1", "concept", "LoRA", "object", "c0", 2],
    ]
    back = pd.read_parquet(store.to_parquet("conceptbed-rating", tmp_path / "r.parquet"))
    assert ratings_frame(back).equals(ratings_frame(ds))
    store.add_records("sub-1", [_sub1(0)])
    store.submit("ann", "sub-1", "1:c0", {"q1": "yes", "q2": "no"})
    sub = store.export("sub-1")
    assert long_answers(sub, [SUB_STUDY_1]) == [
        ("ann", "1:c0", "sub-1", "q1", "yes"),
        ("ann", "1:c0", "sub-1", "q2", "no"),
    ]
    assert sub[0]["plus"] == "pink crown" and sub[0]["image"] == "c0"
    assert len(store.export("sub-2")) == 0


def test_agreement_per_question_by_its_level():
    import krippendorff
    import numpy as np

    from concept_grounding.curation.agreement import study_alpha
    from concept_grounding.curation.study import Response

    likert = [["yes", "yes", "no", "somewhat"], ["yes", "somewhat", "no", "no"], ["no", "yes", "somewhat", "no"]]
    responses = [
        Response(f"a{a}", "sub-1", f"1:c{i}", {"q1": v, "q2": "no" if i % 2 else "yes"})
        for a, row in enumerate(likert)
        for i, v in enumerate(row)
    ]
    out = study_alpha(SUB_STUDY_1, responses)
    ranks = np.array([[{"yes": 0, "somewhat": 1, "no": 2}[v] for v in row] for row in likert], float)
    assert out["q1"] == pytest.approx(krippendorff.alpha(reliability_data=ranks, level_of_measurement="ordinal"))
    assert out["q1"] != pytest.approx(krippendorff.alpha(reliability_data=ranks, level_of_measurement="nominal"))
    assert out["q2"] == pytest.approx(1.0)  # every annotator agrees on every record
    ratings = [
        Response(a, "conceptbed-rating", f"r{i}", {"rating": str(v)})
        for a, vs in (("a", "1234"), ("b", "1244"))
        for i, v in enumerate(vs)
    ]
    assert study_alpha(CONCEPTBED_RATING, ratings)["rating"] == pytest.approx(
        krippendorff.alpha(
            reliability_data=np.array([[1, 2, 3, 4], [1, 2, 4, 4]], float), level_of_measurement="interval"
        )
    )
    assert study_alpha(SUB_STUDY_2, []) == {"present": None}
