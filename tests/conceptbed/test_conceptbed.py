"""ConceptBed on the world: known answers of the reference learners, oracle refusal, loaders, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from concept_grounding.cli import main
from concept_grounding.conceptbed import (
    ConceptBedConfig,
    ConceptWorld,
    export_world_concepts,
    run_conceptbed,
    task_species,
)
from concept_grounding.conceptbed.report import render_report
from concept_grounding.errors import UsageError
from concept_grounding.loaders import load_conceptbed_layout, load_concepts
from concept_grounding.loaders.errors import DatasetFormatError
from concept_grounding.vocabulary import load_vocabulary

VOCAB = load_vocabulary()
#: a 12-class world: 6 object and 6 fine-grained held-out species (oracles train in seconds)
CLASSES = task_species(VOCAB, "object")[:6] + task_species(VOCAB, "fine_grained_object")[:6]
SMALL = dict(
    concepts=2,
    m=4,
    real=8,
    images=8,
    oracle_per_class=30,
    oracle_epochs=8,
    capacity="small",
    table8=("small", "medium"),
    classes=CLASSES,
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cache = tmp_path_factory.mktemp("oracles")
    config = ConceptBedConfig(
        learners=("Original", "another species", "exact"),
        cache=str(cache),
        tasks=("domain", "object", "fine_grained_object", "composition"),
        **SMALL,
    )
    return run_conceptbed(config)


def test_original_ccd_is_zero_and_references_bracket_it(run):
    t1 = run.results["table1"]
    for task in ("domain", "object", "fine_grained_object"):
        assert t1["Original"][task] == pytest.approx(0.0, abs=1e-12), task
        assert t1["exact"][task] <= t1["Original"][task] + 0.02 <= t1["another species"][task], task
    assert run.results["table7"]["Original"]["ccd"] == pytest.approx(0.0, abs=1e-12)


def test_another_species_scores_the_oracles_full_gap(run):
    """f(y_c | x) ~ 0 on another species, so CCD ~ the real images' mean confidence (the full gap)."""
    for task in ("object", "fine_grained_object"):
        ccd = run.results["table1"]["another species"][task]
        assert ccd > 0.85, (task, ccd)
    assert run.results["table1"]["another species"]["domain"] > 0.1  # the next style: a smaller gap
    assert run.results["table7"]["another species"]["accuracy"] < 0.1


def test_results_hold_every_table_and_oracles_pass(run, tmp_path):
    r = run.results
    assert set(r["table7"]["exact"]) == {"accuracy", "msp", "ece", "ccd"}
    assert set(r["table8"]) == {"small", "medium"} and set(r["table8"]["small"]) == set(r["table1"])
    assert all(o["accuracy"] >= 0.95 for t, o in r["oracles"].items() if t != "vqa")
    dino = r["baselines"]["dino"]
    assert dino["Original"]["object"] > dino["another species"]["object"]
    ceiling = r["baselines"]["dino_ceiling"]
    assert set(ceiling) == set(r["table1"]["Original"]) and ceiling["object"] > dino["another species"]["object"]
    assert abs(r["sensitivity"]["object"][0]) < 1e-12 < r["sensitivity"]["object"][-1]
    report = run.save(tmp_path)
    assert report.name == "report.md" and (tmp_path / "fig4_contact_sheet.png").is_file()
    assert (tmp_path / "fig5_sensitivity.png").is_file() and "Table 8" in report.read_text()
    from concept_grounding.eval_results import model_folder_name, read_eval_results

    hub = read_eval_results(tmp_path)  # one .eval_results file per learner: its Table 1 CCDs
    for learner, row in r["table1"].items():
        got = {e["dataset"]["task_id"]: e["value"] for e in hub[model_folder_name(learner)]["conceptbed"]}
        assert got == {f"ccd/{t}": v for t, v in row.items() if v == v}


def test_an_oracle_below_the_bar_is_refused_and_nothing_is_cached(tmp_path):
    config = ConceptBedConfig(
        learners=("Original",),
        tasks=("object",),
        cache=str(tmp_path / "c"),
        **{**SMALL, "oracle_per_class": 2, "oracle_epochs": 1},
    )
    with pytest.raises(UsageError, match=r"--oracle-per-class: the species judge .* below 95%"):
        run_conceptbed(config)
    assert not (tmp_path / "c").exists()


def test_unknown_and_uninstalled_learners_are_one_line(tmp_path, capsys):
    assert main(["conceptbed", "--out", str(tmp_path / "o"), "--learners", "Dreambooth"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--learners: unknown learner 'Dreambooth'" in err and "DreamBooth" in err
    assert not (tmp_path / "o").exists()
    import importlib.util

    if importlib.util.find_spec("concept_grounding.learners") is None:
        assert main(["conceptbed", "--out", str(tmp_path / "o"), "--learners", "LoRA"]) == 2
        assert "the concept learners are not installed" in capsys.readouterr().err


def _png(path, size=(32, 32)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.zeros((*size[::-1], 3), np.uint8)).save(path)


def test_world_concept_folder_round_trips(tmp_path):
    cw = ConceptWorld(m=3, real=2, classes=CLASSES)
    concepts = cw.concepts("object", 2) + cw.concepts("domain", 1)
    export_world_concepts(tmp_path, concepts)
    ds = load_concepts(tmp_path, m=3)
    assert set(ds["task"]) == {"object", "domain"} and len(ds) == 3 * 5
    row = ds[0]
    assert np.array_equal(np.asarray(row["image"]), concepts[0].train[0]) and row["concept"] == concepts[0].name
    with pytest.raises(DatasetFormatError, match="fewer than m = 4"):
        load_concepts(tmp_path, m=4)
    _png(tmp_path / "object" / concepts[0].name / "real" / "9999.png", size=(40, 40))
    with pytest.raises(DatasetFormatError, match="mixed sizes"):
        load_concepts(tmp_path, m=3)


def test_conceptbed_published_layout(tmp_path):
    for i in range(3):
        _png(tmp_path / "imagenet" / "n01530575" / f"{i}.jpeg")
        _png(tmp_path / "PACS" / "sketch" / "dog" / f"{i}.jpg")
        _png(tmp_path / "cub" / "017.Cardinal" / f"{i}.jpg")
    ds = load_conceptbed_layout(tmp_path, m=2)
    tasks = dict(zip(ds["concept"], ds["task"]))
    assert tasks == {"n01530575": "object", "sketch": "domain", "017.Cardinal": "fine_grained_object"}
    assert ds["split"].count("train") == 6 and ds["split"].count("real") == 3
    with pytest.raises(DatasetFormatError, match="fewer than m = 5"):
        load_conceptbed_layout(tmp_path, m=5)


def test_every_cell_has_its_interval(run):
    """Tables 1, 7, 8 and 2: a ``[lo, hi]`` per cell around the value (ECE's may lie above it:
    docs/conceptbed/intervals.md); the report prints ``value [lo, hi]``."""
    r, bounds = run.results, run.results["intervals"]
    for learner, row in r["table1"].items():
        for task, value in row.items():
            lo, hi = bounds["table1"][learner][task]
            assert lo <= value + 1e-12 and value - 1e-12 <= hi, (learner, task, lo, value, hi)
    for learner, row in r["table7"].items():
        assert set(bounds["table7"][learner]) == set(row)
        lo, hi = bounds["table7"][learner]["ccd"]
        assert lo <= row["ccd"] + 1e-12 <= hi + 2e-12, learner
    assert {c: set(v) for c, v in bounds["table8"].items()} == {c: set(v) for c, v in r["table8"].items()}
    t2 = bounds["table2"]["another species"]["relation"]
    assert t2["ccd"][0] <= r["table2"]["another species"]["relation"]["ccd"] <= t2["ccd"][1]
    lo, hi = bounds["table1"]["another species"]["object"]
    assert f"{r['table1']['another species']['object']:.4f} [{lo:.4f}, {hi:.4f}]" in render_report(r)
    assert isinstance(r["config"]["threads"], int) and "real minus generated" in render_report(r)


def test_table2_original_is_the_reference_and_compositions_are_judged(run):
    """Original: the world's exact drawing of each prompt (CCD 0 by construction); another
    species draws the same compositions of another species: its questions are answered alike."""
    r = run.results
    t2, vqa = r["table2"], r["oracles"]["vqa"]
    assert set(t2) == {"Original", "another species", "exact"}
    assert r["table2_categories"] == ["relation", "action", "attribute", "counting", "composite"]
    assert vqa["accuracy"] >= 0.9 and set(vqa["per_question"]) >= {"count", "scene", "facing", "attribute"}
    for category in ("relation", "action", "counting", "composite"):
        row = t2["Original"][category]
        assert row["ccd"] == pytest.approx(0.0, abs=1e-12) and row["accuracy"] >= 0.9, (category, row)
        assert row["clip"] > 5.0, (category, row)  # the composition CLIP reads the prompt (the old one scored 0)
        other = t2["another species"][category]
        assert abs(other["ccd"]) < 0.15 and other["clip"] is not None, (category, other)
    assert "## Table 2" in render_report(r) and "VQA oracle validation" in render_report(r)


def test_table3_from_simulated_raters_and_the_items_people_rate(run, tmp_path):
    """The reference learners bracket the truth, so the simulated raters' mean rating falls as
    CCD rises (r < 0) and rises with the DINO-style cosine; the items folder is the one
    ``annotate --items`` serves."""
    from concept_grounding.loaders.ratings import read_rating_items

    r = run.results
    assert set(r["table3"]) == {"ccd", "dino", "clip"} and "SIMULATED" in r["table3_detail"]["raters"]
    assert r["table3"]["ccd"] < -0.5 and r["table3"]["dino"] > 0.0, r["table3"]
    scores = r["table3_detail"]["mean_scores"]
    assert scores["Original"]["object"] > scores["another species"]["object"]
    run.save(tmp_path)
    items = read_rating_items(tmp_path / "ratings")
    kinds = {item.kind for item in items}
    assert kinds == {"concept", "caption"} and "SIMULATED" in (tmp_path / "report.md").read_text()
