"""Every CCI image-folder command on a folder of real photos of mixed sizes and aspects.

The photos are scikit-learn's bundled ``china.jpg`` and ``flower.jpg`` (and scikit-image's
``astronaut`` / ``coffee`` where scikit-image is installed), cropped to different sizes, so no
two images of a class share a shape. Before the fix, ``explain --images`` failed after all its
work with ``heat: shape (...) differs from image (...)`` and ``cci-bench`` / ``diagnose`` with
``all input arrays must have the same shape`` in ``to_pixel_values``'s ``np.stack``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from concept_grounding.cli import main

#: (height, width) crops: landscape, portrait, small, thin
CROPS = ((150, 226), (90, 60), (49, 117), (40, 40))


def _photos() -> dict[str, np.ndarray]:
    """Real photos bundled with scikit-learn (and scikit-image where installed), by class name."""
    from sklearn.datasets import load_sample_images

    china, flower = load_sample_images().images
    photos = {"temple": china, "flower": flower}
    try:
        from skimage import data
    except ImportError:
        return photos
    photos.update(astronaut=data.astronaut(), coffee=data.coffee())
    return photos


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """An ImageNet-style folder (one sub-folder per class) of photos in 4 sizes, with masks and class names."""
    root = tmp_path_factory.mktemp("photos")
    for name, photo in _photos().items():
        for k, (h, w) in enumerate(CROPS):
            (root / name).mkdir(exist_ok=True)
            (root / "masks" / name).mkdir(parents=True, exist_ok=True)
            Image.fromarray(photo[:h, :w]).save(root / name / f"{k}.png")
            mask = np.zeros((h, w), np.uint8)
            mask[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4] = 255
            Image.fromarray(mask).save(root / "masks" / name / f"{k}.png")
    names = sorted(p.name for p in root.iterdir() if p.name != "masks")
    (root / "names.txt").write_text("\n".join(f"a {n}" for n in names) + "\n")
    return root


def _files(root):
    return sorted(p for p in root.glob("*/*.png") if p.parent.name != "masks")


def test_the_folder_mixes_sizes(photos):
    assert len({Image.open(p).size for p in _files(photos)}) == len(CROPS)


def test_explain_draws_each_map_at_its_photo_size(photos, tmp_path):
    from concept_grounding.cci.explain_job import ExplainConfig, run_explain

    files = _files(photos)[: len(CROPS)]  # one class: every size
    assert (
        main(
            [
                "explain",
                "--images",
                *map(str, files),
                "--texts",
                "a photo",
                "--clusters",
                "3",
                "--out",
                str(tmp_path / "explain"),
            ]
        )
        == 0
    )
    saved = json.loads((tmp_path / "explain" / "explain.json").read_text())["images"]
    assert len(saved) == len(files)
    report = (tmp_path / "explain" / "report.md").read_text()
    assert report.startswith("# CCI explanations\n") and "shipped world CLIP" in report  # a trained default
    assert "knows only the bird world" in report

    images = [np.asarray(Image.open(p).convert("RGB")) for p in files[:2]]
    result = run_explain(ExplainConfig(images=images, texts=["a photo"], clusters=3, baselines=True))
    assert [m.shape for m in result.maps] == [im.shape[:2] for im in images]
    assert all([m.shape for m in maps] == [im.shape[:2] for im in images] for maps in result.baselines.values())
    assert set(result.baselines) == {"Grad-CAM", "Grad-ECLIP", "MaskCLIP", "rollout"}  # what --baselines' help names


def test_random_weights_only_by_name_and_said_first(photos, tmp_path):
    files = _files(photos)[:2]
    assert (
        main(
            [
                "explain",
                "--images",
                *map(str, files),
                "--texts",
                "a photo",
                "--clusters",
                "2",
                "--model",
                "random-clip:1",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert "RANDOM-WEIGHT" in (tmp_path / "report.md").read_text().splitlines()[0]


def test_cci_bench_on_the_photo_folder(photos, tmp_path):
    out = tmp_path / "bench"
    assert (
        main(
            [
                "cci-bench",
                "--images",
                str(photos),
                "--class-names",
                str(photos / "names.txt"),
                "--steps",
                "2",
                "--methods",
                "cci",
                "random",
                "--clusters",
                "3",
                "--no-progress",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [(r["model"], r["method"]) for r in rows] == [("world-clip", "cci"), ("world-clip", "random")]
    assert all(0.0 <= v <= 1.0 for r in rows for v in r["scores"].values())
    assert "RANDOM" not in (out / "report.md").read_text().splitlines()[0]


def test_diagnose_and_covar_on_the_photo_folder(photos, tmp_path):
    assert (
        main(
            [
                "diagnose",
                "--images",
                str(photos),
                "--class-names",
                str(photos / "names.txt"),
                "--clusters",
                "3",
                "--out",
                str(tmp_path / "diagnose"),
            ]
        )
        == 0
    )
    models = json.loads((tmp_path / "diagnose" / "diagnose.json").read_text())["models"]
    assert models[0]["images"] == len(_files(photos)) and not models[0]["random_weights"]
    assert (
        main(
            [
                "covar",
                "--images",
                str(photos),
                "--class-names",
                str(photos / "names.txt"),
                "--judge",
                "text",
                "--objects",
                "2",
                "--backgrounds",
                "1",
                "--clusters",
                "3",
                "--steps",
                "2",
                "--out",
                str(tmp_path / "covar"),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "covar" / "covar.json").read_text())["rows"] == 2 * 12


@pytest.mark.parametrize("command", ["cci-bench", "diagnose"])
def test_an_unreadable_photo_is_refused_before_any_work(photos, tmp_path, capsys, command):
    import shutil

    folder = tmp_path / "photos"
    shutil.copytree(photos, folder)
    (folder / "temple" / "9.png").write_bytes(b"not a png")
    out = tmp_path / "out"
    assert main([command, "--images", str(folder), "--class-names", str(folder / "names.txt"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--images" in err and "9.png: not an image PIL can read" in err
    assert not out.exists()
