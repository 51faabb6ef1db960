"""``covar`` on an image folder with given masks (issue 35, item 3, partly): the world's export of
the ImageNet-style layout read back as COVAR objects is exactly the world's birds and masks, the
command runs on it, and a folder without masks or the attribute judge are one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from concept_grounding.cli import main

SIZE = 32
CLASSES = ("017.Cardinal", "073.Blue_Jay", "020.Yellow_breasted_Chat")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from concept_grounding.cci.layouts import export_world_image_folder

    return export_world_image_folder(tmp_path_factory.mktemp("covar") / "val", per_class=2, image_size=SIZE,
                                     class_names=CLASSES)


def test_folder_objects_are_the_world_birds_with_their_exact_masks(folder):
    from concept_grounding.cci.covar_job import folder_objects
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=SIZE, class_names=CLASSES))
    objects, names = folder_objects(str(folder), str(folder / "class_names.txt"), 4, SIZE)
    assert names == ["cardinal", "yellow breasted chat", "blue jay"]
    assert [o.label for o in objects] == [0, 1, 2, 0]  # the classes take turns
    files = sorted(p for p in folder.rglob("*.png") if "masks" not in p.parts and p.parent != folder)
    by_class = {label: sorted(p for p in files if p.parent.name == sorted(CLASSES)[label]) for label in range(3)}
    picked = [by_class[0][0], by_class[1][0], by_class[2][0], by_class[0][1]]
    for obj, path in zip(objects, picked):
        sample = world.sample(int(path.stem))
        assert np.array_equal(obj.image, sample.image) and np.array_equal(obj.mask, sample.mask)
        assert sorted(CLASSES)[obj.label] == world.class_names[sample.label]


def test_covar_command_on_an_image_folder(folder, tmp_path):
    out = tmp_path / "out"
    assert main(["covar", "--images", str(folder), "--class-names", str(folder / "class_names.txt"), "--objects", "2",
                 "--backgrounds", "1", "--size", str(SIZE), "--clusters", "3", "--steps", "2", "--out", str(out)]) == 0
    summary = json.loads((out / "covar.json").read_text())
    assert summary["rows"] == 2 * 12
    assert "pointing_game" not in summary["truth"]["CCI"] and "foreground_share" in summary["truth"]["CCI"]
    assert "image folder" in (out / "report.md").read_text()


def test_covar_folder_errors_name_the_flag(folder, tmp_path, capsys):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(folder, bare, ignore=shutil.ignore_patterns("masks"))
    for argv, named in ((["--images", str(bare)], "--images"),
                        (["--images", str(folder), "--judge", "attributes"], "--judge")):
        out = tmp_path / "never"
        assert main(["covar", *argv, "--objects", "1", "--backgrounds", "1", "--size", str(SIZE), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and named in err[0], err
