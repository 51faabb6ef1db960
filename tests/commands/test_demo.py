"""`make demo`'s job, at quick settings: every stage writes its report and the index links it."""

import json

import pytest

from concept_grounding.cli import main


@pytest.mark.slow  # every stage of the demo, at quick settings
def test_quick_demo_writes_every_stage_and_resumes(tmp_path):
    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--out", str(out)]) == 0
    index = (out / "README.md").read_text()
    for link in (
        "world/summary.md",
        "bench/report.md",
        "candidates/",
        "tdg/filter/filter_report.md",
        "cci/explain/report.md",
        "cci/covar/report.md",
        "human/curate/curation.md",
        "human/sub/report.md",
        "conceptbed/report.md",
    ):
        assert link in index
    assert (out / "world" / "CUB_200_2011" / "images.txt").is_file()
    assert (out / "world" / "SUB" / "metadata.jsonl").is_file()
    assert (out / "bench" / "results.json").is_file()
    assert (out / "candidates" / "classes.json").is_file() and (out / "candidates" / "attributes.png").is_file()
    assert (out / "tdg" / "filter" / "filter_evidence.jsonl").is_file()
    assert any((out / "tdg" / "images").rglob("*.png")) and (out / "tdg" / "pairs.png").is_file()
    assert any((out / "tdg" / "images" / ".guides").rglob("*.png"))
    assert "world CLIP trained by the bench stage" in index and "world attribute oracle" in index
    # the human stage: generate -> filter -> simulated annotators -> curate -> load_sub -> evaluate_sub
    assert (out / "human" / "annotations.db").is_file() and (out / "human" / "filter" / "metadata.jsonl").is_file()
    assert (out / "human" / "curate" / "dataset" / "data").is_dir() and "per-img.)" in index.split("human/sub")[-1]
    cb = json.loads((out / "conceptbed" / "results.json").read_text())
    assert cb["table1"]["Original"]["object"] == 0.0 and "table2" in cb and cb["oracles"]["vqa"]["accuracy"] >= 0.9
    timings = json.loads((out / "timings.json").read_text())
    # A second run with --resume skips every finished stage and rewrites the same index.
    (out / "bench" / "report.md").write_text("kept")
    assert main(["demo", "--quick", "--resume", "--out", str(out)]) == 0
    assert (out / "bench" / "report.md").read_text() == "kept"
    assert json.loads((out / "timings.json").read_text()) == timings


def test_the_default_demo_leaves_out_repeated_rows_two_learners_and_the_large_oracle_and_says_so(tmp_path):
    from concept_grounding.bench.config import MODEL_VARIANTS
    from concept_grounding.conceptbed.config import DEFAULT_LEARNERS
    from concept_grounding.demo import DemoResult, dropped
    from concept_grounding.demo_config import REPEATED_MODELS, DemoConfig, bench_config, conceptbed_config

    bench, bench_full = bench_config(DemoConfig()), bench_config(DemoConfig(full=True))
    assert bench_full.models == tuple(MODEL_VARIANTS) and set(bench.models) == set(MODEL_VARIANTS) - set(
        REPEATED_MODELS
    )
    assert len(REPEATED_MODELS) == 2 and bench.world == bench_full.world and bench.epochs == bench_full.epochs

    default, full = conceptbed_config(tmp_path, DemoConfig()), conceptbed_config(tmp_path, DemoConfig(full=True))
    assert default.learners == ("Textual Inversion", "LoRA", "Original") and default.table8 == ("small", "medium")
    assert full.learners == DEFAULT_LEARNERS and full.table8 == ("small", "medium", "large")
    assert (default.tasks, default.quick, default.cache) == (full.tasks, full.quick, full.cache)
    index = DemoResult(DemoConfig(), ["- a stage"], {"world": 1.0}).save(tmp_path / "d").read_text()
    assert (
        "DreamBooth" in index
        and "soft per-img." in index
        and "`concept-grounding demo --full` runs everything" in index
    )
    assert "soft per-img." not in dropped(DemoConfig(stages="conceptbed")) and "Table 8" not in dropped(
        DemoConfig(stages="bench")
    )
    for config in (DemoConfig(full=True), DemoConfig(quick=True), DemoConfig(stages="world,tdg")):
        assert dropped(config) is None


def test_with_two_free_cores_conceptbed_runs_in_a_second_process_beside_the_others(tmp_path, monkeypatch):
    import os

    from concept_grounding import demo, demo_stages
    from concept_grounding.cpu import THREADS_ENV
    from concept_grounding.demo_config import DemoConfig

    monkeypatch.setenv(THREADS_ENV, "2")
    assert demo._beside(["world", "conceptbed"]) == ["conceptbed"] and demo._beside(["conceptbed"]) == []
    ran_here = []
    monkeypatch.setitem(
        demo_stages.STAGES, "world", lambda out, config: ran_here.append(os.getpid()) or out.mkdir() or "the world"
    )
    result = demo.run_demo(DemoConfig(out=tmp_path / "d", quick=True, stages="conceptbed,world"))
    assert result.lines[0].startswith("- [ConceptBed](conceptbed/report.md)") and result.lines[1] == "- the world"
    assert list(result.timings) == ["conceptbed", "world"] and ran_here == [os.getpid()]
    assert json.loads((tmp_path / "d" / "conceptbed" / ".done").read_text())[0] == result.lines[0][2:]
    monkeypatch.setenv(THREADS_ENV, "1")
    assert demo._beside(["world", "conceptbed"]) == []


def test_the_stage_table_and_the_stage_names_agree():
    """``--stages`` is parsed against ``STAGE_NAMES`` (below the stages in the layers) and run from ``STAGES``."""
    from concept_grounding.demo_config import STAGE_NAMES
    from concept_grounding.demo_stages import STAGES

    assert tuple(STAGES) == STAGE_NAMES
