"""Aysel et al.'s analysis of a user's post-hoc CBM (``concept-grounding analyse`` and
``analyse_posthoc``) on the tiny CUB fixture: the project's PostHocCBM and the same model
brought as a plain backbone + CAV matrix + classifier give the same numbers, which are the
metric functions' on the model's own outputs."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch

from concept_grounding.cli import main
from concept_grounding.evaluation.posthoc import analyse_posthoc, feature_map_posthoc_cbm, parts_at

SIZE = 48
CLASSES = ("017.Cardinal", "073.Blue_Jay", "020.Yellow_breasted_Chat")


@pytest.fixture(scope="module")
def cub_root(tmp_path_factory):
    from concept_grounding.loaders import write_cub
    from concept_grounding.world import BirdWorld, WorldConfig

    root = tmp_path_factory.mktemp("cub") / "CUB_200_2011"
    world = BirdWorld(WorldConfig(image_size=SIZE, class_names=CLASSES))
    write_cub(world.to_dataset_dict(12, 4), root, progress=False)
    return root


@pytest.fixture(scope="module")
def cub(cub_root):
    from concept_grounding.loaders import load_cub

    return load_cub(cub_root, min_class_count=None, progress=False)


@pytest.fixture(scope="module")
def posthoc(cub, tmp_path_factory):
    from concept_grounding.models import to_tensors, train_backbone, train_posthoc_cbm

    columns = [i for i in range(312) if np.asarray(cub["train"]["attributes"])[:, i].any()][:24]
    train = to_tensors(cub["train"], columns, SIZE, "image")
    backbone = train_backbone(train, {"kind": "cnn", "pool": "avg"}, epochs=1, progress=False)
    model = train_posthoc_cbm(backbone, train, n_pos=10, n_neg=10, progress=False)
    folder = tmp_path_factory.mktemp("models") / "posthoc-cbm"
    model.save_pretrained(folder)
    return model, folder


def _by_hand(model, cub):
    from concept_grounding.metrics import concept_existence, concept_global_importance, concept_location
    from concept_grounding.models import predict
    from concept_grounding.models.data import images_to_tensor
    from concept_grounding.vocabulary import load_vocabulary

    cols = load_vocabulary().attribute_indices(model.concept_names)
    test = cub["test"]
    images = images_to_tensor(test["image"], SIZE)
    out = predict(model, images)
    u, pred, labels = out.concept_scores.numpy(), out.class_logits.argmax(1).numpy(), np.asarray(test["label"])
    theta = model.theta.numpy()
    V = np.zeros((len(CLASSES), len(cols)))
    V[labels] = np.asarray(test["class_attributes"])[:, cols]
    cgim = concept_global_importance(theta, V.T, u, pred, labels)
    existence = concept_existence(theta, u, pred, np.asarray(test["attributes"])[:, cols], labels)
    xy, visible = parts_at(test, SIZE)
    maps = model.concept_activation_maps(images, upsample=False).numpy()
    location = concept_location(
        maps,
        xy,
        visible,
        theta=theta,
        concept_scores=u,
        predictions=pred,
        references=labels,
        concept_names=list(model.concept_names),
        image_size=(SIZE, SIZE),
    )
    return cgim, existence, location


def _assert_same(result, cgim, existence, location):
    for t in (1, 2, 3):
        assert result.cgim[f"concept_type{t}"] == pytest.approx(cgim[f"concept_type{t}"], nan_ok=True)
        assert result.cgim[f"class_type{t}"] == pytest.approx(cgim[f"class_type{t}"], nan_ok=True)
    for l in (1, 3, 5):
        assert result.existence[f"existence@{l}"] == pytest.approx(existence[f"existence@{l}"])
        for a in (1, 3, 6):
            key = f"location@{l}_alpha{a}"
            assert result.location[key] == pytest.approx(location[key], nan_ok=True)


def test_project_posthoc_cbm_via_the_cli_equals_the_metric_functions(posthoc, cub, cub_root, tmp_path):
    model, folder = posthoc
    cgim, existence, location = _by_hand(model, cub)
    out = tmp_path / "report"
    assert (
        main(
            [
                "analyse",
                "--model",
                str(folder),
                "--cub-root",
                str(cub_root),
                "--image-size",
                str(SIZE),
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    saved = json.loads((out / "results.json").read_text())
    assert saved["cgim"]["concept_type1"] == pytest.approx(cgim["concept_type1"])
    assert saved["existence"]["existence@3"] == pytest.approx(existence["existence@3"])
    assert saved["location"]["location@1_alpha3"] == pytest.approx(location["location@1_alpha3"], nan_ok=True)
    assert {"cgim_histograms.png", "coam_gallery.png", "report.md"} <= {p.name for p in out.iterdir()}


def test_the_same_model_as_backbone_plus_cav_matrix_gives_the_same_numbers(posthoc, cub):
    model, _ = posthoc
    expected = _by_hand(model, cub)
    user = feature_map_posthoc_cbm(
        lambda x: model.backbone(x).features,
        model.concept_vectors.clone(),
        list(model.concept_names),
        concept_intercepts=model.concept_intercepts.clone(),
        theta=model.theta.clone(),
        bias=model.classifier.bias.detach().clone(),
    )
    assert type(user) is type(model)  # one PostHocCBM, any backbone
    result = analyse_posthoc(user, cub, image_size=SIZE, progress=False)
    _assert_same(result, *expected)
    with torch.no_grad():
        images = torch.rand(2, 3, SIZE, SIZE)
        assert torch.allclose(user.concept_activation_maps(images), model.concept_activation_maps(images), atol=1e-5)


FACTORY = """
import torch
import torchvision


def build():
    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None)
    trunk = torch.nn.Sequential(*list(net.children())[:-2]).eval()   # (B, 512, h, w)
    return {"backbone": trunk, "concept_vectors": torch.randn(4, 512),
            "concept_names": ["has_crown_color::black", "has_crown_color::red", "has_wing_color::blue",
                              "has_breast_color::yellow"],
            "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
"""


def test_a_plain_torchvision_trunk_with_cavs_and_no_classifier_via_the_cli(cub_root, tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent(FACTORY))
    out = tmp_path / "report"
    assert (
        main(
            [
                "analyse",
                "--model",
                f"{path}:build",
                "--cub-root",
                str(cub_root),
                "--image-size",
                "64",
                "--max-images",
                "6",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    saved = json.loads((out / "results.json").read_text())
    assert len(saved["concept_names"]) == 4 and 0 <= saved["class_accuracy"] <= 1
    assert 0 <= saved["existence"]["existence@1"] <= 1


def test_bad_inputs_are_clear_errors(posthoc, tmp_path, capsys):
    from concept_grounding.evaluation.loading import load_posthoc_model

    with pytest.raises(ValueError, match="concept_names for"):
        feature_map_posthoc_cbm(lambda x: x, torch.zeros(3, 8), ["has_crown_color::black"])
    user = feature_map_posthoc_cbm(lambda x: (x, x), torch.zeros(1, 8), ["has_crown_color::black"])
    with pytest.raises(ValueError, match="features="):
        user(torch.rand(1, 3, 8, 8))
    with pytest.raises(ValueError, match="no classifier"):
        user.theta  # noqa: B018 - the property raises
    cbm = tmp_path / "cbm"
    from concept_grounding.models import ConceptBottleneckModel

    ConceptBottleneckModel(2, 2, concept_names=["has_crown_color::black", "has_crown_color::red"]).save_pretrained(cbm)
    with pytest.raises(ValueError, match="not a post-hoc CBM"):
        load_posthoc_model(str(cbm))
    assert main(["analyse", "--model", str(cbm), "--cub-root", str(tmp_path), "--no-progress"]) == 2
    assert "not a post-hoc CBM" in capsys.readouterr().err
