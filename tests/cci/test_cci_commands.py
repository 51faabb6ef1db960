"""`concept-grounding explain` and `concept-grounding covar` end to end on tiny settings."""

from __future__ import annotations

import json

import pytest

from concept_grounding.cli import main


def test_explain_command(tmp_path):
    assert (
        main(["explain", "--out", str(tmp_path), "--num", "2", "--size", "32", "--clusters", "3", "--baselines"]) == 0
    )
    rec = json.loads((tmp_path / "explain.json").read_text())
    assert len(rec["images"]) == 2 and len(rec["images"][0]["weights"]) == 3
    assert 0.0 <= rec["images"][0]["foreground_share"] <= 1.0
    assert (tmp_path / "explain.png").stat().st_size > 1000 and "explain.png" in (tmp_path / "report.md").read_text()


def test_explain_command_rejects_text_mismatch(tmp_path, capsys):
    assert (
        main(["explain", "--out", str(tmp_path), "--num", "3", "--size", "32", "--clusters", "2", "--texts", "a", "b"])
        == 2
    )
    assert "error: --texts: 2 texts for 3 images" in capsys.readouterr().err
    assert not (tmp_path / "explain.png").exists()


def test_covar_threshold_is_a_fraction(tmp_path, capsys):
    """covar --threshold 2 used to run (a map threshold above the maximum): now refused at parse time."""
    assert main(["covar", "--out", str(tmp_path), "--threshold", "2"]) == 2
    assert "argument --threshold: must be a number in [0, 1], got '2'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_covar_command(tmp_path):
    assert (
        main(
            [
                "covar",
                "--out",
                str(tmp_path),
                "--objects",
                "1",
                "--backgrounds",
                "1",
                "--size",
                "32",
                "--clusters",
                "3",
                "--steps",
                "2",
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "covar.json").read_text())
    assert summary["rows"] == 12
    assert set(summary["per_transform"]) >= {"all", "identity", "crop"}
    assert set(summary["truth"]) == {"CCI", "random", "gradcam", "grad-eclip", "maskclip", "rollout"}
    assert {"foreground_share", "pointing_game", "Del@1", "Ins@5"} <= set(summary["truth"]["CCI"])
    for name in ("accuracy_bg_er.png", "shares.png", "overlays.png", "report.md"):
        assert (tmp_path / name).exists()


def test_covar_command_with_generated_backgrounds(tmp_path, tiny_inpaint_dir):
    """--inpaint-model: the backgrounds come from a (tiny, saved) diffusers inpainting pipeline."""
    folder = tiny_inpaint_dir
    out = tmp_path / "covar"
    assert (
        main(
            [
                "covar",
                "--out",
                str(out),
                "--objects",
                "1",
                "--size",
                "32",
                "--clusters",
                "3",
                "--steps",
                "2",
                "--inpaint-model",
                str(folder),
                "--inpaint-prompts",
                "a forest",
                "a beach",
                "--inpaint-size",
                "32",
                "--inpaint-steps",
                "2",
                "--save-dataset",
            ]
        )
        == 0
    )
    summary = json.loads((out / "covar.json").read_text())
    assert summary["rows"] == 2 * 12
    assert "2 generated backgrounds" in (out / "report.md").read_text()
    import datasets
    import numpy as np

    ds = datasets.load_from_disk(str(out / "dataset"))
    identity = [np.asarray(r["image"]) for r in ds if r["transform"] == "identity"]
    assert len(identity) == 2 and not np.array_equal(identity[0], identity[1])  # two different scenes


def test_explain_job_on_given_images_has_no_foreground_share(tmp_path):
    """run_explain on caller images (no world masks): one shared text, maps at image size, no FG share."""
    import numpy as np

    from concept_grounding.cci.explain_job import ExplainConfig, run_explain, write_explain_report

    images = list(np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8))
    result = run_explain(ExplainConfig(images=images, texts=["a red bird"], size=32, clusters=2, model="random-clip"))
    assert [m.shape for m in result.maps] == [(32, 32)] * 2 and result.labels.shape == (2, 8, 8)  # 4 px patches
    assert set(np.unique(result.labels)) <= {0, 1} and result.baselines == {}
    assert [r["text"] for r in result.records] == ["a red bird"] * 2
    assert all("foreground_share" not in r and len(r["weights"]) == 2 for r in result.records)
    report = write_explain_report(result, tmp_path / "out")
    assert report.read_text().splitlines()[-1].endswith("| - |")
    assert json.loads((tmp_path / "out" / "explain.json").read_text())["images"] == result.records


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(texts=["a", "b"], num=3), "2 texts for 3 images"),
        (dict(images=[object()]), "texts: give one text per image"),
        (dict(size=36), "size must be a multiple of 8"),
        (dict(method="slow"), "method must be one of"),
    ],
)
def test_explain_config_refuses_bad_values(kwargs, message):
    from concept_grounding.cci.explain_job import ExplainConfig

    with pytest.raises(ValueError, match=message):
        ExplainConfig(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(objects=0), "objects must be an integer >= 1"),
        (dict(threshold=1.5), r"threshold must be in \[0, 1\]"),
        (dict(judge_threshold=-2.0), "judge_threshold"),
        (dict(judge="magic"), "judge must be one of"),
        (dict(inpaint_size=100), "inpaint_size must be a multiple of 8"),
        (dict(inpaint_model="x", inpaint_prompts=()), "inpaint_prompts"),
    ],
)
def test_covar_config_refuses_bad_values(kwargs, message):
    from concept_grounding.cci.covar_config import CovarConfig

    with pytest.raises(ValueError, match=message):
        CovarConfig(**kwargs)
    assert CovarConfig(inpaint_model="x", inpaint_prompts=("a", "b")).num_backgrounds == 2
