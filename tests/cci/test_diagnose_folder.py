"""``concept-grounding diagnose``: BG-Er / Fine-Er / FG-Er on an image folder
and on CounterAnimals' easy / hard layout, exported by the world with exact masks; the
diagnosis with computed masks against the one with the given masks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from concept_grounding.cli import main

SIZE = 32
CLASSES = ("017.Cardinal", "073.Blue_Jay", "020.Yellow_breasted_Chat")


@pytest.fixture(scope="module")
def counter(tmp_path_factory):
    from concept_grounding.cci.layouts import export_world_counter_animals

    return export_world_counter_animals(
        tmp_path_factory.mktemp("ca") / "counteranimals", per_class=2, image_size=SIZE, class_names=CLASSES
    )


def test_the_counter_animals_export_keeps_the_birds_and_changes_the_backgrounds(counter):
    from PIL import Image

    from concept_grounding.cci.diagnose_job import read_subsets

    subsets = read_subsets(counter, counter / "class_names.txt")
    assert list(subsets) == ["easy", "hard"] and all(len(s.paths) == 6 for s in subsets.values())
    for path, mask_path in zip(subsets["hard"].paths, subsets["hard"].masks):
        from concept_grounding.world import BirdWorld, WorldConfig

        sample = BirdWorld(WorldConfig(image_size=SIZE, class_names=CLASSES)).sample(int(path.stem))
        image, mask = np.asarray(Image.open(path)), np.asarray(Image.open(mask_path)) > 127
        assert np.array_equal(mask, sample.mask) and np.array_equal(image[mask], sample.image[mask])
        assert not np.array_equal(image[~mask], sample.image[~mask])  # a new background


class ExactSegmenter:
    """A 'segmenter' that returns the folder's own masks: the computed diagnosis must agree fully."""

    def __init__(self, root):
        self.root = root

    def __call__(self, image, prompt, *, source):
        from PIL import Image

        return np.asarray(Image.open(source.parent.parent / "masks" / source.parent.name / source.name)) > 127


def test_the_diagnosis_with_exact_computed_masks_agrees_fully(counter):
    from concept_grounding.cci.diagnose_job import diagnose_folder

    result = diagnose_folder(
        counter, class_names=counter / "class_names.txt", size=SIZE, clusters=3, segmenter=ExactSegmenter(counter)
    )
    assert set(result.shares) == {"easy", "hard", "all"} and result.images == 12
    assert result.agreement["category_agreement"] == 1.0 and result.agreement["mask_iou"] == 1.0
    assert result.computed_shares == result.shares
    for subset in ("easy", "hard"):
        v = result.shares[subset]
        assert v["errors"] == round((1 - v["accuracy"]) * 6)
        if v["errors"]:
            assert v["BG-Er"] + v["Fine-Er"] + v["FG-Er"] == pytest.approx(1.0)


def test_diagnose_command_on_a_folder_and_its_errors(counter, tmp_path, capsys):
    out = tmp_path / "out"
    assert (
        main(
            [
                "diagnose",
                "--images",
                str(counter / "easy"),
                "--class-names",
                str(counter / "class_names.txt"),
                "--size",
                str(SIZE),
                "--clusters",
                "3",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    saved = json.loads((out / "diagnose.json").read_text())["models"][0]
    assert set(saved["shares"]) == {"all"} and saved["images"] == 6 and not saved["agreement"]
    assert "BG-Er" in (out / "report.md").read_text()
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(counter / "easy", bare, ignore=shutil.ignore_patterns("masks"))
    for argv, named in (
        (["--images", str(bare)], "--images"),
        (["--images", str(counter), "--detector", "x"], "--segmenter"),
    ):
        never = tmp_path / "never"
        capsys.readouterr()
        assert main(["diagnose", *argv, "--size", str(SIZE), "--out", str(never)]) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
        assert len(errors) == 1 and named in errors[0], errors
        assert not never.exists()


def test_diagnose_with_a_grounded_segmenter_states_the_agreement(counter, tmp_path):
    from test_covar_folder import _save_tiny_grounded_segmenter

    owl, sam = _save_tiny_grounded_segmenter(tmp_path / "models")
    out = tmp_path / "out"
    from concept_grounding.cci.segment import GroundedSegmenter

    calls = []
    box = GroundedSegmenter.box
    GroundedSegmenter.box = lambda self, *a: calls.append(a) or box(self, *a)
    try:
        assert (
            main(
                [
                    "diagnose",
                    "--images",
                    str(counter),
                    "--class-names",
                    str(counter / "class_names.txt"),
                    "--detector",
                    str(owl),
                    "--segmenter",
                    str(sam),
                    "--detector-threshold",
                    "0",
                    "--size",
                    str(SIZE),
                    "--models",
                    "random-clip",
                    "random-clip:1",
                    "--clusters",
                    "3",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
    finally:
        GroundedSegmenter.box = box
    saved = json.loads((out / "diagnose.json").read_text())["models"]
    assert len(saved) == 2 and saved[0]["agreement"]["mask_iou"] == saved[1]["agreement"]["mask_iou"]
    assert saved[0]["agreement"]["images"] == 12 and 0.0 <= saved[0]["agreement"]["category_agreement"] <= 1.0
    assert len(calls) == 12  # each image detected once, for both models
    assert len(list((out / "mask_cache").iterdir())) == 12
    assert "With the segmenter's masks instead" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"models": ()}, "models"),
        ({"clusters": 0}, "clusters"),
        ({"threshold": 2.0}, "threshold"),
        ({"segmenter": "sam"}, "detector and segmenter"),
        ({"size": 16}, "size"),
        ({"max_images": 0}, "max_images"),
    ],
)
def test_diagnose_config_refuses_bad_values(kwargs, message):
    from concept_grounding.cci.diagnose_job import DiagnoseConfig

    with pytest.raises(ValueError, match=message):
        DiagnoseConfig(images="val", **kwargs)


def test_diagnose_flags_build_its_config(counter, tmp_path):
    import argparse

    from concept_grounding.cci.diagnose_job import DiagnoseConfig
    from concept_grounding.commands import diagnose

    parser = argparse.ArgumentParser()
    diagnose.add_arguments(parser)
    args = parser.parse_args(
        [
            "--images",
            str(counter),
            "--models",
            "",
            "random-clip:1",
            "--detector",
            "d",
            "--segmenter",
            "s",
            "--out",
            str(tmp_path),
        ]
    )
    assert diagnose.config_from_args(args) == DiagnoseConfig(
        images=str(counter),
        models=("world-clip", "random-clip:1"),
        detector="d",
        segmenter="s",
        mask_cache=str(tmp_path / "mask_cache"),
    )
    defaults = diagnose.config_from_args(parser.parse_args(["--images", str(counter)]))
    assert (
        defaults == DiagnoseConfig(images=str(counter))
        and parser.parse_args(["--images", str(counter)]).out.name == "diagnose"
    )
