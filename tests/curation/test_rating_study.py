"""ConceptBed's rating study (App. G) in the annotation store: the items folder (the served app:
test_study_app.py), refusals in one line with nothing lost, the export round trip,
Krippendorff's alpha and Table 3 on known answers, simulated raters on the world's truth, the
store migration and the ``annotate --items`` command."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from concept_grounding.conceptbed.human_ratings import SimulatedRater, export_rating_items, simulate_ratings, table3
from concept_grounding.curation.agreement import alpha, study_alpha
from concept_grounding.curation.annotation_items import AnnotationError
from concept_grounding.curation.simulate import run_annotators
from concept_grounding.curation.study import CONCEPTBED_RATING, rating_item, rating_record
from concept_grounding.curation.study_store import StudyStore
from concept_grounding.loaders.ratings import (
    RATING_COLUMNS,
    ratings_frame,
    read_rating_items,
    read_rating_truth,
    read_ratings,
)
from concept_grounding.world import BirdWorld, WorldConfig

LEARNERS = ("exact", "another species")
RATING = CONCEPTBED_RATING.name


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


def _study_store(path, items_folder, k=2) -> StudyStore:
    s = StudyStore(path, k=k)
    s.add_records(RATING, [rating_record(it) for it in read_rating_items(items_folder)])
    return s


@pytest.fixture
def study(tmp_path, items_folder):
    """The study store holding the items folder's rating items (k = 2)."""
    return _study_store(tmp_path / "a.db", items_folder)


def _rate(store, raters, rate, limit=None) -> int:
    """Simulated raters' ``rate(name, item)`` through the one simulator's loop."""
    return run_annotators(store, RATING, raters, lambda n, rec: {"rating": rate(n, rating_item(rec))}, limit)


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


def test_each_rater_meets_every_item_once_in_their_own_fixed_order(study, tmp_path, items_folder):
    orders = {}
    for rater in ("ann", "bob"):
        seen = []
        while (record := study.next_record(rater, RATING)) is not None:
            assert study.next_record(rater, RATING).id == record.id  # leased: the same until rated
            study.submit(rater, RATING, record.id, {"rating": 3})
            seen.append(record.id)
        orders[rater] = seen
    ids = {r.id for r in study.records(RATING)}
    assert set(orders["ann"]) == set(orders["bob"]) == ids and len(orders["ann"]) == len(ids)
    assert orders["ann"] != orders["bob"]  # shuffled per rater
    assert study.next_record("carol", RATING) is None and study.complete(RATING) == (10, 10)  # k = 2 honoured
    again = _study_store(tmp_path / "b.db", items_folder)
    assert again.next_record("ann", RATING).id == orders["ann"][0]  # deterministic


def test_out_of_range_rating_refused_in_one_line_nothing_lost(study):
    record = study.next_record("ann", RATING)
    for bad in (0, 6, "7", "3.5", "x" * 10_000, True, None, -1):
        with pytest.raises(AnnotationError, match="is not one of|answer rating before submitting") as err:
            study.submit("ann", RATING, record.id, {"rating": bad})
        assert "\n" not in str(err.value) and len(str(err.value)) < 200
    assert study.response_count() == 0 and study.open_record("ann", RATING) == record.id
    study.submit("ann", RATING, record.id, {"rating": "5"})
    with pytest.raises(AnnotationError, match="already answered it"):
        study.submit("ann", RATING, record.id, {"rating": 4})
    with pytest.raises(AnnotationError, match="forged or stale"):
        study.submit("ann", RATING, "r-forged", {"rating": 4})
    assert [r.answers for r in study.responses(RATING)] == [{"rating": "5"}]


def test_export_round_trip_parquet_and_dataset(study, tmp_path):
    import pandas as pd

    from concept_grounding.conceptbed.table3 import RatingCollector

    raters = {n: SimulatedRater(n, noise=0.3) for n in ("ann", "bob")}
    assert _rate(study, list(raters), lambda n, it: raters[n].rate(it, 1.0 if "c0" in it.concept else 0.0)) == 20
    ds = study.export(RATING)
    assert len(ds) == 20 and {"annotator", "record", "image", "references", "caption", "rating"} <= set(ds.column_names)
    path = study.to_parquet(RATING, tmp_path / "r.parquet")
    back = ratings_frame(pd.read_parquet(path))
    assert tuple(back.columns) == RATING_COLUMNS and back.values.tolist() == ratings_frame(ds).values.tolist()
    assert RatingCollector().ratings(str(path), 0)[0].equals(back)  # Table 3 reads the export
    assert alpha(back[["rater", "item", "rating"]].itertuples(index=False), "interval") == pytest.approx(
        study_alpha(CONCEPTBED_RATING, study.responses(RATING))["rating"]
    )


def test_alpha_known_answers():
    same = [(r, f"i{j}", v) for r in ("a", "b", "c") for j, v in enumerate([1, 3, 5, 2, 4])]
    assert alpha(same, "interval") == pytest.approx(1.0)
    # by hand: values 1,1 | 2,2 | 3,4 -> D_o = 2/6, D_e = 82/30, alpha = 1 - 5/41
    small = [("a", "i1", 1), ("b", "i1", 1), ("a", "i2", 2), ("b", "i2", 2), ("a", "i3", 3), ("b", "i3", 4)]
    assert alpha(small, "interval") == pytest.approx(36 / 41)
    assert alpha(small + [("c", "i9", 5)], "interval") == pytest.approx(36 / 41)  # a lone rating is not pairable
    assert alpha([("a", "i1", 3), ("b", "i1", 3)], "interval") is None


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


def test_concurrent_raters_never_exceed_k(tmp_path, items_folder):
    study = _study_store(tmp_path / "c.db", items_folder)
    done = []

    def rate(name):
        done.append(_rate(StudyStore(tmp_path / "c.db"), [name], lambda n, it: 4))

    threads = [threading.Thread(target=rate, args=(f"r{i}",)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    responses = study.responses(RATING)
    per = {}
    for r in responses:
        per[r.record] = per.get(r.record, 0) + 1
    assert sum(done) == len(responses) == 20 and set(per.values()) == {2}
    assert len({(r.annotator, r.record) for r in responses}) == len(responses)


def test_annotate_command_rating_study(tmp_path, items_folder, capsys):

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
    ratings = read_ratings(tmp_path / "r.parquet")  # the study store's export
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
