"""SUB's curation by the paper's rules, with known answers from the bird world:
simulated annotators of known accuracy drive the annotation store, the world's labels are
the truth."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from concept_grounding.curation.curate import (
    agreement,
    annotator_accuracy,
    answers_frame,
    attribute_scores,
    candidates_frame,
    class_agreement,
    pairing_scores,
)
from concept_grounding.curation.curate_inputs import CurateConfig, gold_answers
from concept_grounding.curation.curate_job import run_curate
from concept_grounding.curation.curate_report import CurateResult
from concept_grounding.curation.sampling import study_items
from concept_grounding.curation.simulate import (
    SimulatedAnnotator,
    WorldTask,
    simulate_sub,
    world_candidates,
    write_candidates,
)
from concept_grounding.curation.study import sub_records
from concept_grounding.curation.study_store import StudyStore
from concept_grounding.evaluation.human_rows import human_rows, human_table_rows

FAILED = "has_breast_color::white"
DEVIATING = ("159.Black_and_white_Warbler", "has_crown_color::grey")
SUB = ("sub-1", "sub-2")
TASK = WorldTask(
    classes=4, images_per_pairing=12, same_pairings=1, failed_attributes=(FAILED,), deviating_pairings=(DEVIATING,)
)


def _curate(out, config: CurateConfig) -> CurateResult:
    """The ``curate`` job: run, then save under ``out``."""
    res = run_curate(config)
    res.save(out)
    return res


@pytest.fixture(scope="module")
def world_task(tmp_path_factory):
    """The candidates of :data:`TASK` written (rendered) to a folder, and their truth."""
    folder = tmp_path_factory.mktemp("gen")
    world = TASK.world()
    cands = world_candidates(TASK, world)
    write_candidates(cands, folder, world, render=True)
    rows = [json.loads(line) for line in (folder / "metadata.jsonl").read_text().splitlines()]
    return folder, rows, {c.id: c for c in cands}


def _annotate(tmp_path, rows, truth, annotators, k):
    store = StudyStore(tmp_path / "a.db", k=k)
    for study, records in sub_records(study_items(rows, seed=0)).items():
        store.add_records(study, records)
    simulate_sub(store, annotators, truth)
    return store


def _rows(store):
    """The store's answers to SUB's studies (its export), as ``curate`` reads them."""
    return answers_frame(store.export(SUB))


def test_task_breaks_what_it_says(world_task):
    _, rows, truth = world_task
    pairings = {(r["reference_class"], r["target_attribute"]) for r in rows}
    assert DEVIATING in pairings and any(t == FAILED for _, t in pairings)
    assert all(not c.applied for c in truth.values() if c.target_attribute == FAILED)
    assert all(c.deviates for c in truth.values() if (c.reference_class, c.target_attribute) == DEVIATING)


def test_discard_rules_drop_exactly_what_the_world_marks_bad(world_task, tmp_path):
    _, rows, truth = world_task
    perfect = [SimulatedAnnotator(f"p{i}", 1.0, seed=i) for i in range(3)]
    store = _annotate(tmp_path, rows, truth, perfect, k=3)
    answers, cands = _rows(store), candidates_frame(rows)
    attrs = attribute_scores(answers, cands)

    sampled = {r.metadata["candidate"] for r in store.records("sub-1")}
    applied = pd.Series({c.id: c.applied for c in truth.values()})
    by_attr = pd.Series({c.id: c.target_attribute for c in truth.values()})
    truth_bad_attrs = set(applied[list(sampled)].groupby(by_attr[list(sampled)]).mean().loc[lambda s: s < 0.9].index)
    assert set(attrs.index[~attrs.kept]) == truth_bad_attrs == {FAILED}

    world = TASK.world()
    class_sets = {
        c: {world.vocab.attributes[i] for i in np.flatnonzero(world.class_attributes[k])}
        for k, c in enumerate(world.class_names)
    }
    pairs = pairing_scores(answers, cands, class_attributes=class_sets)
    dropped = set(pairs.index[pairs.reason != ""])
    same = {
        (r["reference_class"], r["target_attribute"])
        for r in rows
        if r["target_attribute"] in class_sets[r["reference_class"]]
    }
    failed = {(r["reference_class"], r["target_attribute"]) for r in rows if r["target_attribute"] == FAILED}
    assert len(same) == TASK.classes
    assert dropped == same | failed | {DEVIATING}
    assert pairs.loc[DEVIATING, "reason"] == "excessive modification"
    assert all("low accuracy" in pairs.loc[p, "reason"] for p in failed)


def test_curation_recovers_each_annotators_accuracy(world_task, tmp_path):
    folder, rows, truth = world_task
    accuracies = {"a70": 0.70, "a85": 0.85, "a95": 0.95, "a100": 1.0}
    anns = [SimulatedAnnotator(n, a, seed=7) for n, a in accuracies.items()]
    store = _annotate(tmp_path, rows, truth, anns, k=len(anns))
    measured = annotator_accuracy(_rows(store), gold_answers(folder / "truth.jsonl"))
    for name, acc in accuracies.items():
        row = measured.loc[name]
        assert row.low <= acc <= row.high, (name, acc, row.to_dict())
        assert row.high - row.low < 0.1
    assert measured.loc["a100", "accuracy"] == 1.0


def test_alpha_matches_the_library_on_a_hand_made_table():
    import krippendorff

    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the 4 coders x 12 units
    # nominal example: alpha = 0.743.
    table = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ]
    names = {
        1: "has_crown_color::blue",
        2: "has_crown_color::red",
        3: "has_crown_color::black",
        4: "has_crown_color::pink",
        5: "has_crown_color::grey",
    }
    rows = [
        (f"coder{a}", f"2:u{u}", 2, "present", names[v])
        for a, coder in enumerate(table)
        for u, v in enumerate(coder)
        if v is not None
    ]
    # study 1, ordinal: no < somewhat < yes
    likert = [
        ["yes", "yes", "no", "somewhat", None],
        ["yes", "somewhat", "no", "no", "yes"],
        [None, "yes", "somewhat", "no", "yes"],
    ]
    rows += [
        (f"coder{a}", f"1:u{u}", 1, "q1", v)
        for a, coder in enumerate(likert)
        for u, v in enumerate(coder)
        if v is not None
    ]
    alpha = agreement(answers_frame(rows))
    assert alpha["study2/present"] == pytest.approx(0.743, abs=5e-4)
    numeric = np.array([[{"no": 0, "somewhat": 1, "yes": 2}[v] if v else np.nan for v in c] for c in likert])
    assert alpha["study1/q1"] == pytest.approx(
        krippendorff.alpha(reliability_data=numeric, level_of_measurement="ordinal"), abs=1e-12
    )
    assert alpha["study1/q1"] != pytest.approx(
        krippendorff.alpha(reliability_data=numeric, level_of_measurement="nominal"), abs=1e-3
    )
    # one S+ group here: its per-group alpha is the pooled one; too big a dense tensor keeps only per-group values
    assert alpha["study2/present/crown_color"] == alpha["study2/present"]
    small = agreement(answers_frame(rows), max_dense=0)
    assert "study2/present" not in small and small["study2/present/crown_color"] == pytest.approx(0.743, abs=5e-4)


def test_human_rows_of_a_perfect_annotator_are_100(world_task, tmp_path):
    folder, rows, truth = world_task
    _annotate(tmp_path, rows, truth, [SimulatedAnnotator("perfect", 1.0)], k=1)
    res = _curate(tmp_path / "out", CurateConfig(folder, tmp_path / "a.db", truth=folder / "truth.jsonl"))
    for mode in ("binary", "group"):
        assert res.human[mode]["s_plus"] == 1.0 and res.human[mode]["s_minus"] == 1.0, mode
        assert res.human[mode]["n_s_plus"] > 0 and res.human[mode]["n_s_minus"] > 0
    rows = human_table_rows(res.human)
    assert rows["table1"]["s_plus"] == rows["table2"]["s_minus"] == 1.0 and "computed" in rows["table1"]["name"]
    assert rows["table1"]["chance_s_plus"] == 0.5 and rows["table2"]["chance_s_plus"] < 0.5


def test_bench_report_human_rows_are_computed_from_the_curated_answers(world_task, tmp_path):
    """Tables 1-2's Human rows come from the study-2 answers beside the SUB source (a
    perfect annotator: 100 / 100); the paper's numbers only on a line marked "as published"."""
    from types import SimpleNamespace

    from concept_grounding.bench.report import HUMAN_AS_PUBLISHED, bench_markdown, human_report_rows

    folder, rows, truth = world_task
    _annotate(tmp_path, rows, truth, [SimulatedAnnotator("perfect", 1.0)], k=1)
    _curate(tmp_path / "cur", CurateConfig(folder, tmp_path / "a.db", write_images=False))
    config = SimpleNamespace(
        sub=str(tmp_path / "cur" / "dataset"),
        concepts="cbm_112",
        threads=1,
        world=SimpleNamespace(image_size=64, seed=0),
    )
    split = SimpleNamespace(num_rows=1)
    data = SimpleNamespace(source="cub", train=split, test=split, sub=split, class_names=["a", "b"])
    t2 = [{"name": "CLIP", "s_plus": 0.25, "s_minus": 0.75, "chance_s_plus": 0.2, "chance_s_minus": 0.8}]
    report = bench_markdown(config, data, [0], [], t2, None, {}, [])
    computed = [line for line in report.splitlines() if "computed" in line]
    assert len(computed) == 2 and all("| 100.0 | 100.0 |" in line for line in computed)
    published = [line for line in report.splitlines() if "as published" in line]
    assert len(published) == 2 and "| 94.0 | 96.8 |" in published[0] and "| 92.4 | 97.3 |" in published[1]
    assert HUMAN_AS_PUBLISHED["table1"]["s_plus"] == 94.0
    # no answers beside the source (SUB's own copy, a Hub id): no computed row; the world: no published row
    assert [r["name"] for r in human_report_rows("Jessica-bader/SUB", "cub")["table1"]] == [
        published[0].split(" | ")[0][2:]
    ]
    assert human_report_rows(str(tmp_path / "cur" / "dataset"), "world")["table2"][0]["s_plus"] == 1.0
    assert human_report_rows(None, "world") == {"table1": [], "table2": []}


def test_human_rows_of_a_noisy_annotator_follow_its_accuracy(world_task, tmp_path):
    _, rows, truth = world_task
    store = _annotate(tmp_path, rows, truth, [SimulatedAnnotator("half", 0.5, seed=3)], k=1)
    cands = candidates_frame(rows)
    good = [
        c.id
        for c in truth.values()
        if c.applied
        and not c.deviates
        and (c.reference_class, c.target_attribute) in {(r["reference_class"], r["target_attribute"]) for r in rows}
    ]
    res = human_rows(_rows(store), cands, kept=good)
    n = res["binary"]["n_s_plus"]
    low, high = 0.5 - 2.6 * np.sqrt(0.25 / n), 0.5 + 2.6 * np.sqrt(0.25 / n)
    assert low <= res["binary"]["s_plus"] <= high
    assert res["group"]["s_plus"] == res["binary"]["s_plus"]  # one-hot: the argmax is the choice


def test_curate_writes_a_dataset_load_sub_reads(world_task, tmp_path):
    from concept_grounding.loaders import load_sub

    folder, rows, truth = world_task
    store = _annotate(tmp_path, rows, truth, [SimulatedAnnotator(f"p{i}", 1.0, seed=i) for i in range(3)], k=3)
    store.to_parquet(SUB, tmp_path / "ann.parquet")
    res = _curate(tmp_path / "out", CurateConfig(folder, tmp_path / "ann.parquet"))
    ds = load_sub(tmp_path / "out" / "dataset")
    assert len(ds) == len(res.kept) > 0
    assert FAILED not in set(ds["target_attribute"])
    assert DEVIATING not in set(zip(ds["reference_class"], ds["target_attribute"]))
    assert ds[0]["image"] is not None
    report = (tmp_path / "out" / "curation.md").read_text()
    assert "excessive modification" in report and "low accuracy" in report and "S+ = S-" in report
    for png in ("fig6_agreement.png", "fig9_faithfulness.png"):
        assert (tmp_path / "out" / png).read_bytes()[:4] == b"\x89PNG"


def test_class_agreement_known_answer():
    labels = np.array([[1, 0], [0, 0], [1, 1], [1, 1]])
    classes = np.array([0, 0, 1, 1])
    class_labels = np.array([[1, 0], [1, 1]])
    assert class_agreement(labels, classes, class_labels, [0, 1]).tolist() == [0.75, 1.0]


def test_sub_evaluates_the_curated_dataset(world_task, tmp_path, capsys):
    """The chain's last link: ``concept-grounding sub`` scores a model on the curated dataset."""
    pytest.importorskip("torch")
    from concept_grounding.cli import main

    folder, rows, truth = world_task
    _annotate(tmp_path, rows, truth, [SimulatedAnnotator("perfect", 1.0)], k=1)
    res = _curate(tmp_path / "out", CurateConfig(folder, tmp_path / "a.db"))
    (tmp_path / "tiny_cbm.py").write_text(
        "import torch\n\ndef build():\n    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 312))\n"
    )
    assert (
        main(
            [
                "sub",
                "--model",
                f"{tmp_path / 'tiny_cbm.py'}:build",
                "--concept-names",
                "cub_312",
                "--no-normalize",
                "--sub",
                str(tmp_path / "out" / "dataset"),
                "--out",
                str(tmp_path / "rep"),
                "--image-size",
                "64",
                "--no-progress",
            ]
        )
        == 0
    )
    assert f"{len(res.kept)} images" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("row", "words"),
    [
        (("a", "1:c0", 1, "q1", "maybe"), "'maybe' to q1"),
        (("a", "1:c0", 1, "q9", "yes"), "no question 'q9'"),
        (("a", "1:c0", 1, "q1", "yes"), "answered q1 of '1:c0' twice"),
    ],
)
def test_bad_exported_answers_are_refused_naming_the_row(row, words):
    rows = [("a", "1:c0", 1, "q1", "yes"), ("a", "1:c0", 1, "q2", "no"), row]
    with pytest.raises(ValueError, match="answers row 2") as err:
        answers_frame(rows)
    assert words in str(err.value)


def test_study2_answer_outside_the_group_is_refused():
    cands = candidates_frame(
        [
            {
                "id": "c0",
                "file_name": "x.png",
                "reference_class": "017.Cardinal",
                "target_attribute": "has_crown_color::pink",
                "removed_attributes": [],
            }
        ]
    )
    answers = answers_frame([("a", "2:c0", 2, "present", "has_wing_color::red")])
    with pytest.raises(ValueError, match="not an attribute of 'has_crown_color::pink'"):
        human_rows(answers, cands)


def test_attributes_without_answers_are_dropped_and_named(world_task, tmp_path):
    folder, rows, truth = world_task
    store = _annotate(tmp_path, rows, truth, [SimulatedAnnotator("perfect", 1.0)], k=1)
    answers = _rows(store)
    only = answers[answers.candidate.map(lambda c: truth[c].target_attribute == FAILED)]
    only[["annotator", "image", "study", "question", "answer"]].to_parquet(tmp_path / "only.parquet", index=False)
    res = _curate(tmp_path / "out", CurateConfig(folder, tmp_path / "only.parquet"))
    assert res.kept == [] and res.dataset is None and res.human is None
    summary = json.loads((tmp_path / "out" / "curation.json").read_text())
    assert FAILED not in summary["unanswered_attributes"]
    assert set(summary["unanswered_attributes"]) == {r["target_attribute"] for r in rows} - {FAILED}
    assert "Attributes without study-1 answers" in (tmp_path / "out" / "curation.md").read_text()
