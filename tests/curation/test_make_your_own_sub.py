"""The README's "Make your own SUB" chain, scripted on the bird world at small sizes: candidates classes ->
attributes -> plan -> generate -> filter -> annotate --simulate -> curate -> bench --sub, each step run as the
README types it, its outputs checked, and its ``next:`` line naming the step that follows with the folder it
just wrote.

Two stand-ins keep it fast and its answers known: the world Flux samples in one step (its images are the
plumbing here, not a finding), and the filter's scorer is an oracle that sees every asked S+ (so every image
is kept and the rest of the chain has candidates; ``filter --scorer world-judge`` on the world Flux keeps
about 1 % of images, ``docs/tdg_world``). The simulated annotators answer the truth of what generate was
asked (no ``truth.jsonl``), so curate keeps every image and the Human rows are 100 %.
"""

from __future__ import annotations

import json
import shlex
import textwrap
from pathlib import Path

import pytest

from concept_grounding.cli import main
from concept_grounding.vocabulary import load_vocabulary

CLASSES = ("017.Cardinal", "073.Blue_Jay")
#: two S+ of two attribute groups the shipped judge is validated on, absent from both classes
ATTRIBUTES = ("has_wing_color::yellow", "has_eye_color::yellow")


def _run(capsys, *argv: str) -> list[str]:
    """Run one command in-process; its stdout lines (the last one is its ``next:`` line)."""
    assert main(list(argv)) == 0, argv
    return capsys.readouterr().out.strip().splitlines()


def _next(lines: list[str]) -> list[str]:
    """The ``next:`` line's command, as the shell splits it (comments dropped)."""
    assert lines[-1].startswith("next: "), lines
    return shlex.split(lines[-1].removeprefix("next: "), comments=True)


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def oracle_module(tmp_path, monkeypatch):
    """``chain_oracle:sees_asked``: p = 0.9 for the chain's S+ and 0.05 for every other attribute."""
    (tmp_path / "chain_oracle.py").write_text(
        textwrap.dedent(f"""
        import numpy as np
        from concept_grounding.vocabulary import load_vocabulary

        def sees_asked(images):
            p = np.full((len(images), 312), 0.05)
            p[:, [load_vocabulary().attribute_index(a) for a in {ATTRIBUTES!r}]] = 0.9
            return p
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "chain_oracle:sees_asked"


def test_make_your_own_sub_chain_runs_on_the_world(tmp_path, capsys, monkeypatch, oracle_module):
    monkeypatch.chdir(tmp_path)
    vocab = load_vocabulary()

    # 1. candidates: the classes the judge recognises, the attributes it answers, the plan
    lines = _run(
        capsys, "candidates", "classes", "--out", "cand", "--classes", *CLASSES, "--per-class", "2", "--no-progress"
    )
    assert json.loads((tmp_path / "cand" / "classes.json").read_text())["kept"] == list(CLASSES)
    assert _next(lines)[1:] == ["candidates", "attributes", "--out", "cand"]
    lines = _run(
        capsys,
        "candidates",
        "attributes",
        "--out",
        "cand",
        "--attributes",
        *ATTRIBUTES,
        "--per-class",
        "1",
        "--no-progress",
    )
    assert sorted(json.loads((tmp_path / "cand" / "attributes.json").read_text())["kept"]) == sorted(ATTRIBUTES)
    plan_cmd = _next(lines)
    assert plan_cmd[1:3] == ["candidates", "plan"] and "cand/classes.json" in plan_cmd
    plan_cmd[plan_cmd.index("--images-per-pairing") + 1] = "1"  # small
    lines = _run(capsys, *plan_cmd[1:])
    pairings = _rows(tmp_path / "cand" / "pairings.jsonl")
    assert {(p["reference_class"], p["target_attribute"]) for p in pairings} == {
        (c, a) for c in CLASSES for a in ATTRIBUTES
    }
    generate_cmd = _next(lines)
    assert generate_cmd[1:] == ["generate", "--pairings", "cand/pairings.jsonl", "--out", "cand-gen"]

    # 2. generate: the plan's size, an estimate, the images with the asked truth, a contact sheet
    lines = _run(capsys, *generate_cmd[1:], "--steps", "1", "--batch-size", "4")
    capsys.readouterr()
    gen = tmp_path / "cand-gen"
    generated = _rows(gen / "metadata.jsonl")
    assert len(generated) == 4 and lines[0].startswith("wrote 4 new images (4 planned)")
    assert "contact sheet with the world judge's verdicts" in lines[0] and (gen / ".contact_sheet.png").is_file()
    assert {
        r["removed_attributes"]
        == [vocab.attributes[i] for i in vocab.groups[r["group"]] if vocab.attributes[i] in r["removed_attributes"]]
        for r in generated
    } == {True}
    filter_cmd = _next(lines)
    assert filter_cmd[1:] == ["filter", "--in", "cand-gen", "--out", "cand-gen-kept", "--scorer", "world-judge"]

    # 3. filter (an oracle that sees every asked S+, in place of the judge: see the module docstring)
    lines = _run(capsys, *filter_cmd[1:-1], "oracle", "--oracle", oracle_module, "--keep-fraction", "1")
    kept = _rows(tmp_path / "cand-gen-kept" / "metadata.jsonl")
    assert lines[0].startswith("kept 4 of 4 images") and len(kept) == 4
    assert (tmp_path / "cand-gen-kept" / "filter_sheet.png").is_file()
    annotate_cmd = _next(lines)
    assert annotate_cmd[1:] == ["annotate", "--candidates", "cand-gen-kept", "--db", "cand-gen-kept-annotations.db"]

    # 4. simulated annotators on generated candidates: the truth of what was asked
    lines = _run(capsys, *annotate_cmd[1:], "--simulate", "1", "--k", "1", "--per-pairing", "1")
    assert any("answer what generate was asked" in line for line in lines)
    assert any(line.endswith("answers submitted by 1 simulated annotator") for line in lines)
    curate_cmd = _next(lines)
    assert curate_cmd[1:] == [
        "curate",
        "--candidates",
        "cand-gen-kept",
        "--annotations",
        "cand-gen-kept-annotations.db",
        "--out",
        "cand-gen-kept-curated",
    ]

    # 5. curate: a perfect annotator of what was asked keeps every image
    lines = _run(capsys, *curate_cmd[1:])
    assert lines[0].startswith("kept 4 images, 2 of 2 attributes; Human s+/s- binary 100.0/100.0")
    dataset = tmp_path / "cand-gen-kept-curated" / "dataset"
    assert dataset.is_dir()
    bench_cmd = _next(lines)
    assert bench_cmd[1:] == ["bench", "--sub", "cand-gen-kept-curated/dataset", "--out", "cand-gen-kept-curated-bench"]

    # 6. bench --sub <curated>: trains on the world (no --cub-root needed) and scores the curated SUB
    lines = _run(
        capsys,
        *bench_cmd[1:],
        "--classes",
        *CLASSES,
        "--train-per-class",
        "4",
        "--test-per-class",
        "2",
        "--epochs",
        "1",
        "--no-clip",
        "--no-posthoc",
        "--models",
        "CBM (ind., per-img.)",
        "--size",
        "32",
    )
    results = json.loads((tmp_path / "cand-gen-kept-curated-bench" / "results.json").read_text())
    assert results["source"] == "world"
    scored = set(
        results["table1"][0]["breakdown"]["attribute"]["names"]
    )  # the curated SUB's S+ and S-, not the world's
    assert scored and scored <= set(ATTRIBUTES) | {a for r in generated for a in r["removed_attributes"]}
    sub_cmd = _next(lines)
    assert sub_cmd[1:5] == ["sub", "--model", "cand-gen-kept-curated-bench/models/cbm-ind-per-img", "--sub"]
    assert Path(sub_cmd[5]).resolve() == dataset.resolve()


def test_bench_sub_of_classes_outside_the_world_names_cub_root(tmp_path, capsys):
    """A SUB whose classes the world does not draw is refused in one line naming --sub and --cub-root."""
    from PIL import Image

    (tmp_path / "sub" / "images").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(tmp_path / "sub" / "images" / "0.png")
    (tmp_path / "sub" / "metadata.jsonl").write_text(
        json.dumps(
            {
                "file_name": "images/0.png",
                "reference_class": "001.Black_footed_Albatross",
                "target_attribute": "has_crown_color::pink",
                "removed_attributes": [],
            }
        )
        + "\n"
    )
    assert main(["bench", "--sub", str(tmp_path / "sub"), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        "--sub:" in err and "001.Black_footed_Albatross" in err and "--cub-root" in err and len(err.splitlines()) == 1
    )
    assert not (tmp_path / "b").exists()
