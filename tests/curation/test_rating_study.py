"""ConceptBed's rating study (App. G) in the annotation store: the items folder (the served app:
test_study_app.py), refusals in one line with nothing lost, the export round trip,
Krippendorff's alpha and Table 3 on known answers, simulated raters on the world's truth, the
store migration and the ``annotate --items`` command."""

from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest

from concept_grounding.conceptbed.human_ratings import SimulatedRater, export_rating_items, simulate_ratings, table3
from concept_grounding.curation.annotations import SCHEMA_VERSION, AnnotationError, AnnotationStore, study1_item
from concept_grounding.curation.rating_store import RatingStore, run_raters
from concept_grounding.curation.rating_study import interval_alpha
from concept_grounding.loaders.ratings import RATING_COLUMNS, read_rating_items, read_rating_truth
from concept_grounding.world import BirdWorld, WorldConfig

LEARNERS = ("exact", "another species")


def _records(per: int = 2) -> list[dict]:
    """World renders as rating records with exact truth: per concept (species 0 and 1), the
    'exact' learner draws the concept's species (truth 1), 'another species' the next one
    (truth 0); three other renders of the species are the references. Plus two caption items."""
    world = BirdWorld(WorldConfig(image_size=32))
    n = world.num_classes
    out = []
    for c in range(2):
        refs = [world.sample(c + j * n).image for j in range(1, 4)]
        for learner, drawn in zip(LEARNERS, (c, (c + 1) % n)):
            for j in range(per):
                out.append(
                    {
                        "image": world.sample(drawn + (5 + j) * n).image,
                        "learner": learner,
                        "task": "object",
                        "concept": f"c{c}",
                        "kind": "concept",
                        "references": refs,
                        "truth": float(drawn == c),
                    }
                )
    for learner, truth in zip(LEARNERS, (1.0, 0.0)):
        out.append(
            {
                "image": world.sample(7 * n).image,
                "learner": learner,
                "task": "composition",
                "concept": "c0",
                "kind": "caption",
                "caption": "a photo of V* on a branch",
                "truth": truth,
            }
        )
    return out


@pytest.fixture(scope="module")
def items_folder(tmp_path_factory):
    return export_rating_items(tmp_path_factory.mktemp("items"), _records())


@pytest.fixture
def store(tmp_path, items_folder):
    s = RatingStore(tmp_path / "a.db", k=2)
    s.add_rating_items(read_rating_items(items_folder))
    return s


def test_items_folder_round_trip_dedupes_references_and_refuses_bad_records(items_folder, tmp_path):
    items = read_rating_items(items_folder)
    assert len(items) == 10 and {it.kind for it in items} == {"concept", "caption"}
    assert len(list((items_folder / "references").iterdir())) == 6  # 3 per concept, shared by its 4 items
    assert all(len(it.references) == 3 for it in items if it.kind == "concept")
    truth = read_rating_truth(items_folder)
    assert sorted(truth.values()) == [0.0] * 5 + [1.0] * 5
    assert export_rating_items(items_folder, _records()[:1]) and len(read_rating_items(items_folder)) == 10  # same ids
    good = _records()[0]
    for bad, needle in [
        ({**good, "kind": "side-by-side"}, "kind must be one of"),
        ({**good, "references": good["references"][:2]}, "needs 3 reference images"),
        ({**good, "kind": "caption", "caption": ""}, "'caption' must be one line"),
        ({**good, "truth": 1.5}, "truth must be a number in [0, 1]"),
        ({**good, "image": np.zeros((4, 4), np.uint8)}, "records[1].image"),
    ]:
        with pytest.raises(Exception, match=needle.replace("[", r"\[").replace("]", r"\]")) as err:
            export_rating_items(tmp_path / "bad", [good, bad])
        assert "\n" not in str(err.value) and not (tmp_path / "bad" / "items.jsonl").exists()


def test_each_rater_meets_every_item_once_in_their_own_fixed_order(store, tmp_path, items_folder):
    orders = {}
    for rater in ("ann", "bob"):
        seen = []
        while (item := store.next_rating(rater)) is not None:
            assert store.next_rating(rater).id == item.id  # leased: the same until rated
            store.submit_rating(rater, item.id, 3)
            seen.append(item.id)
        orders[rater] = seen
    ids = {it.id for it in store.rating_items()}
    assert set(orders["ann"]) == set(orders["bob"]) == ids and len(orders["ann"]) == len(ids)
    assert orders["ann"] != orders["bob"]  # shuffled per rater
    assert store.next_rating("carol") is None and store.rating_complete() == (10, 10)  # k = 2 honoured
    again = RatingStore(tmp_path / "b.db", k=2)
    again.add_rating_items(read_rating_items(items_folder))
    assert again.next_rating("ann").id == orders["ann"][0]  # deterministic


def test_out_of_range_rating_refused_in_one_line_nothing_lost(store):
    item = store.next_rating("ann")
    for bad in (0, 6, "7", "", "3.5", "x" * 10_000, True, None, -1):
        with pytest.raises(AnnotationError, match="is not one of 1-5") as err:
            store.submit_rating("ann", item.id, bad)
        assert "\n" not in str(err.value) and len(str(err.value)) < 200
    assert store.rating_rows() == [] and store.open_rating("ann") == item.id
    store.submit_rating("ann", item.id, "5")
    with pytest.raises(AnnotationError, match="already rated it"):
        store.submit_rating("ann", item.id, 4)
    with pytest.raises(AnnotationError, match="forged or stale"):
        store.submit_rating("ann", "r-forged", 4)
    assert [r[-1] for r in store.rating_rows()] == [5]


def test_export_round_trip_parquet_and_dataset(store, tmp_path):
    import pandas as pd

    raters = {n: SimulatedRater(n, noise=0.3) for n in ("ann", "bob")}
    assert run_raters(store, list(raters), lambda n, it: raters[n].rate(it, 1.0 if "c0" in it.concept else 0.0)) == 20
    ds = store.export_ratings()
    assert tuple(ds.column_names) == RATING_COLUMNS and len(ds) == 20
    back = pd.read_parquet(store.ratings_to_parquet(tmp_path / "r.parquet"))
    assert [tuple(r) for r in back.itertuples(index=False)] == store.rating_rows()
    assert interval_alpha(back[["rater", "item", "rating"]].itertuples(index=False)) == store.rating_alpha()


def test_alpha_known_answers():
    same = [(r, f"i{j}", v) for r in ("a", "b", "c") for j, v in enumerate([1, 3, 5, 2, 4])]
    assert interval_alpha(same) == pytest.approx(1.0)
    # by hand: values 1,1 | 2,2 | 3,4 -> D_o = 2/6, D_e = 82/30, alpha = 1 - 5/41
    small = [("a", "i1", 1), ("b", "i1", 1), ("a", "i2", 2), ("b", "i2", 2), ("a", "i3", 3), ("b", "i3", 4)]
    assert interval_alpha(small) == pytest.approx(36 / 41)
    assert interval_alpha(small + [("c", "i9", 5)]) == pytest.approx(36 / 41)  # a lone rating is not pairable
    assert interval_alpha([("a", "i1", 3), ("b", "i1", 3)]) is None


def test_table3_known_answers():
    ratings = [
        dict(zip(RATING_COLUMNS, (f"r{k}", f"{l}{t}{i}", "concept", l, t, "c", v)))
        for l, base in (("A", 5), ("B", 3), ("C", 1))
        for t, shift in (("object", 0), ("domain", 0))
        for i in range(2)
        for k, v in enumerate((base, base - shift))
    ]
    human = {"A": 5.0, "B": 3.0, "C": 1.0}
    minus = {l: {"object": -h, "domain": -h} for l, h in human.items()}
    plus = {l: {"object": 2 * h + 1, "domain": 2 * h + 1} for l, h in human.items()}
    flat = {l: {"object": 0.5, "domain": 0.5} for l in human}
    out = table3(ratings, {"ccd": minus, "dino": plus, "clip": flat})
    assert out["table3"]["ccd"] == pytest.approx(-1.0) and out["table3"]["dino"] == pytest.approx(1.0)
    assert out["table3"]["clip"] is None and out["n"]["ccd"] == 6
    assert out["mean_scores"] == {l: {"object": h, "domain": h} for l, h in human.items()}
    assert out["per_task"]["object"]["r"]["ccd"] == pytest.approx(-1.0) and out["per_task"]["domain"]["human"] == human


def test_simulated_raters_follow_the_worlds_truth(items_folder):
    items, truth = read_rating_items(items_folder), read_rating_truth(items_folder)
    exact = simulate_ratings(items, k=3, noise=0.0, seed=0, truth_fn=lambda it: truth[it.id])
    assert all(r["rating"] == 1 + 4 * truth[r["item"]] for r in exact) and len(exact) == 30
    noisy = simulate_ratings(items, k=3, noise=1.0, seed=0, truth_fn=lambda it: truth[it.id])
    assert noisy == simulate_ratings(items, k=3, noise=1.0, seed=0, truth_fn=lambda it: truth[it.id])
    assert noisy != simulate_ratings(items, k=3, noise=1.0, seed=1, truth_fn=lambda it: truth[it.id])
    mean = {l: np.mean([r["rating"] for r in noisy if r["learner"] == l]) for l in LEARNERS}
    assert mean["exact"] > 4 and mean["another species"] < 2
    ccd = {"exact": {"object": 0.0, "composition": 0.1}, "another species": {"object": 0.8, "composition": 0.9}}
    assert table3(exact, {"ccd": ccd})["table3"]["ccd"] < -0.95  # 4 cells: the two learners x two tasks
    random = [SimulatedRater("x", accuracy=0.0).rate(it, 1.0) for it in items]
    assert set(random) <= {1, 2, 3, 4, 5} and len(set(random)) > 1


def test_older_stores_gain_the_rating_tables(tmp_path, items_folder):
    path = tmp_path / "old.db"
    old = AnnotationStore(path, k=2)
    old.add_images([study1_item("1:c0", "017.Cardinal", "has_crown_color::pink", candidate="c0")])
    old.submit("ann", old.next_image("ann", 1).image, {"q1": "yes", "q2": "no"})
    old.close()
    with sqlite3.connect(path) as con:  # as version 2 wrote it
        con.executescript(
            "DROP TABLE rating_leases; DROP TABLE ratings; DROP TABLE rating_items; PRAGMA user_version=2;"
        )
    readonly = RatingStore(path, read_only=True)
    assert readonly.rating_rows() == [] and readonly.rating_complete() == (0, 0) and len(readonly.rows()) == 2
    store = RatingStore(path)
    assert store.k == 2 and len(store.rows()) == 2
    assert store.add_rating_items(read_rating_items(items_folder)) == 10
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4


def _counted_everywhere(store: RatingStore, raters) -> None:
    """Each rater's progress from the trigger-kept counts equals the one counted from the rows."""
    for rater in raters:
        assert store.rating_progress(rater) == store._progress_counted(rater), rater


def test_progress_counts_follow_leases_submits_refusals_and_expiry(tmp_path, items_folder):
    now = [0.0]
    store = RatingStore(tmp_path / "p.db", k=2, lease_seconds=10, clock=lambda: now[0])
    store.add_rating_items(read_rating_items(items_folder))
    raters = [f"r{i}" for i in range(4)]
    rng = np.random.default_rng(0)
    for _ in range(120):
        rater = raters[int(rng.integers(len(raters)))]
        item = store.next_rating(rater)
        if item is not None and rng.random() < 0.7:
            store.submit_rating(rater, item.id, int(rng.integers(1, 6)))
        elif item is not None and rng.random() < 0.5:  # an item not leased to them: stored, or refused
            other = store.rating_items()[int(rng.integers(10))].id
            try:
                store.submit_rating(rater, other, 3)
            except AnnotationError as err:
                assert err.brief in ("a second submit", "item full")  # noqa: PT017 - the submit may be stored instead
        now[0] += float(rng.uniform(0, 4))  # leases run out now and then: taken goes down again
        _counted_everywhere(store, raters)
    assert store.rating_count() > 10 and store.rating_complete()[0] > 0
    assert sum(n for (n,) in store._read("SELECT items FROM rating_taken")) == 10


def test_version_3_store_gains_filled_counts(tmp_path, items_folder):
    path = tmp_path / "v3.db"
    store = RatingStore(path, k=2)
    store.add_rating_items(read_rating_items(items_folder))
    run_raters(store, ["a", "b"], lambda n, it: 3, limit=4)
    store.next_rating("c")  # a lease open
    expected = {r: store.rating_progress(r) for r in "abc"}
    store.close()
    with sqlite3.connect(path) as con:  # as version 3 wrote it: no counts, no triggers
        con.executescript(
            "DROP TABLE rating_taken; DROP TABLE rating_rater_taken; DROP INDEX ratings_by_item; "
            + "".join(
                f"DROP TRIGGER {t};"
                for t in (
                    "rating_items_added",
                    "rating_items_removed",
                    "rating_items_retaken",
                    "ratings_added",
                    "ratings_removed",
                )
            )
            + "PRAGMA user_version=3;"
        )
    readonly = RatingStore(path, read_only=True)
    assert {r: readonly.rating_progress(r) for r in "abc"} == expected  # counted from the rows
    upgraded = RatingStore(path)
    assert {r: upgraded.rating_progress(r) for r in "abc"} == expected
    run_raters(upgraded, ["c", "d"], lambda n, it: 5, limit=3)
    _counted_everywhere(upgraded, "abcd")
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA user_version").fetchone()[0] == 4


def test_concurrent_raters_never_exceed_k(tmp_path, items_folder):
    store = RatingStore(tmp_path / "c.db", k=2)
    store.add_rating_items(read_rating_items(items_folder))
    done = []

    def rate(name):
        own = RatingStore(tmp_path / "c.db")
        done.append(run_raters(own, [name], lambda n, it: 4))

    threads = [threading.Thread(target=rate, args=(f"r{i}",)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = store.rating_rows()
    per = {}
    for r in rows:
        per[r[1]] = per.get(r[1], 0) + 1
    assert sum(done) == len(rows) == 20 and set(per.values()) == {2}
    assert len({(r[0], r[1]) for r in rows}) == len(rows)


def test_annotate_command_rating_study(tmp_path, items_folder, capsys):
    import pandas as pd

    from concept_grounding.cli import main

    db = tmp_path / "a.db"
    assert (
        main(
            [
                "annotate",
                "--items",
                str(items_folder),
                "--db",
                str(db),
                "--simulate",
                "1,1,1",
                "--rating-noise",
                "0",
                "--export",
                str(tmp_path / "r.parquet"),
                "--status",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "30 ratings submitted by 3 simulated raters (not people)" in out
    assert "Krippendorff's alpha (interval) 1.000" in out and "rating: 10 of 10 images have their 3 raters" in out
    ratings = pd.read_parquet(tmp_path / "r.parquet")
    truth = read_rating_truth(items_folder)
    assert (ratings["rating"] == 1 + 4 * ratings["item"].map(truth)).all()
    empty = tmp_path / "empty"
    export_rating_items(empty, [{k: v for k, v in r.items() if k != "truth"} for r in _records(1)])
    assert main(["annotate", "--items", str(empty), "--db", str(tmp_path / "b.db"), "--simulate", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lack one in" in err[0]
    assert (
        main(["annotate", "--items", str(items_folder), "--db", str(db), "--space-folder", str(tmp_path / "sp")]) == 2
    )
    assert "a Space holds SUB's studies" in capsys.readouterr().err and not (tmp_path / "sp").exists()
    assert main(["annotate", "--db", str(tmp_path / "none.db")]) == 2
    assert "--items (ConceptBed's rating study)" in capsys.readouterr().err
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "items.jsonl").write_text('{"id": "x"\n')
    assert main(["annotate", "--items", str(tmp_path / "broken"), "--db", str(db), "--status"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "items.jsonl" in err[0]
