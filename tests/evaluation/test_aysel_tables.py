"""Aysel et al. in full: every ranking and l / alpha of Tables 1-2 on all and
on correctly classified images, Table 3's sweep with the no-bottleneck baseline, Figs. 3-4,
Algorithm 2's binary branch and Tables 6-8, by ``concept-grounding analyse`` on the bird world.

The known answers come from the world's exact truth: an oracle backbone whose feature map
lights exactly the pixels of each present concept's body parts scores 1.0 on concept
existence (ranked by u-hat) and on concept location; the same oracle lighting the background
instead keeps existence at 1.0 and drops location to 0.0."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch

from concept_grounding.cli import main

SIZE = 48
CLASSES = ("017.Cardinal", "073.Blue_Jay", "020.Yellow_breasted_Chat")


@pytest.fixture(scope="module")
def world():
    from concept_grounding.world import BirdWorld, WorldConfig

    return BirdWorld(WorldConfig(image_size=SIZE, class_names=CLASSES)).to_dataset_dict(12, 4, progress=False)


@pytest.fixture(scope="module")
def columns(world):
    from concept_grounding.evaluation.posthoc import default_concept_columns
    from concept_grounding.vocabulary import load_vocabulary

    vocab = load_vocabulary()
    return [i for i in default_concept_columns(world["train"], vocab) if vocab.parts_of(i)]


def _oracle(world, columns, *, background: bool):
    """A PostHocCBM whose feature map is the world's truth: channel j is 1 on the pixels of
    concept j's parts (``background``: on every pixel more than one pixel away from the bird)
    where concept j is present.

    The margin: the world puts pixel centres at integer coordinates, CLM takes the pixel
    ``floor(x), floor(y)``, so a centre near a thin part's edge (a 48 px beak) can fall one
    pixel outside the bird."""
    from concept_grounding.evaluation.posthoc import feature_map_posthoc_cbm
    from concept_grounding.models.data import images_to_tensor
    from concept_grounding.vocabulary import load_vocabulary
    from concept_grounding.world.sample import dilate_mask

    vocab = load_vocabulary()
    names = [vocab.attributes[i] for i in columns]
    parts = [[vocab.part_index(p) + 1 for p in vocab.parts_of(i)] for i in columns]
    truth = {}
    for split in ("train", "test"):
        data = world[split]
        images = images_to_tensor(data["image"], SIZE)
        present = np.asarray(data["attributes"], np.uint8)[:, columns] > 0
        for x, part_map, mask, row in zip(images, data["part_map"], data["mask"], present):
            part_map, bird = np.asarray(part_map), np.asarray(mask) > 0
            E = np.zeros((len(columns), SIZE, SIZE), np.float32)
            for j, on in enumerate(row):
                if on:
                    E[j] = ~dilate_mask(bird, 1) if background else np.isin(part_map, parts[j])
            truth[x.numpy().tobytes()] = torch.from_numpy(E)

    def backbone(x):
        return torch.stack([truth[img.numpy().tobytes()] for img in x])

    K = len(world["test"].features["label"].names)
    V = np.zeros((K, len(columns)))
    V[np.asarray(world["train"]["label"])] = np.asarray(world["train"]["class_attributes"])[:, columns]
    return feature_map_posthoc_cbm(backbone, torch.eye(len(columns)), names, theta=V.T), V


@pytest.mark.parametrize("background", [False, True])
def test_oracle_feature_maps_give_the_known_existence_and_location(world, columns, background):
    from concept_grounding.evaluation.posthoc import analyse_posthoc

    model, _ = _oracle(world, columns, background=background)
    result = analyse_posthoc(model, world, image_size=SIZE, progress=False)
    assert set(result.existence_by_ranking) == set(result.location_by_ranking) == {"theta_u", "theta", "u"}
    by_u = result.existence_by_ranking["u"]
    for l in (1, 3, 5):
        # u_ij = (present part area) / (H W) > 0 exactly on present concepts; ties among the 0s are absent ones
        present = np.asarray(world["test"]["attributes"])[:, columns] > 0
        expected = np.minimum(present.sum(1), l) / l
        assert by_u[f"existence@{l}"] == pytest.approx(expected.mean())
    assert by_u["existence@1"] == 1.0
    location = result.location_by_ranking["u"]["location@1_alpha1"]
    assert location == (0.0 if background else 1.0)
    # theta = V^T: CGIM type 1 is exactly 1 for every concept and class with a non-zero vector
    assert result.cgim["concept_type1"] == pytest.approx(1.0)
    assert result.cgim["class_type1"] == pytest.approx(1.0)


def test_every_ranking_is_the_metric_function_with_that_ranking(world, columns):
    from concept_grounding.evaluation.posthoc import aysel_metrics, parts_at
    from concept_grounding.metrics import concept_existence, concept_location
    from concept_grounding.models.data import images_to_tensor

    model, V = _oracle(world, columns, background=False)
    test = world["test"]
    images = images_to_tensor(test["image"], SIZE)
    xy, vis = parts_at(test, SIZE)
    labels = np.asarray(test["label"])
    concepts = np.asarray(test["attributes"])[:, columns]
    result = aysel_metrics(model, images, labels, concepts, V, xy, vis)
    with torch.no_grad():
        out = model(images)
    u, pred = out.concept_scores.numpy(), out.class_logits.argmax(1).numpy()
    for ranking in ("theta", "u", "theta_u"):
        ex = concept_existence(V.T, u, pred, concepts, labels, ranking=ranking)
        loc = concept_location(
            result.maps,
            xy,
            vis,
            theta=V.T,
            concept_scores=u,
            predictions=pred,
            references=labels,
            concept_names=list(model.concept_names),
            image_size=(SIZE, SIZE),
            ranking=ranking,
        )
        for l in (1, 3, 5):
            for suffix in ("", "_correct"):
                assert result.existence_by_ranking[ranking][f"existence@{l}{suffix}"] == pytest.approx(
                    ex[f"existence@{l}{suffix}"], nan_ok=True
                )
                for a in (1, 3, 6):
                    key = f"location@{l}_alpha{a}{suffix}"
                    assert result.location_by_ranking[ranking][key] == pytest.approx(loc[key], nan_ok=True)
    assert result.existence is result.existence_by_ranking["theta_u"]


def test_the_sweep_rebuilds_the_model_of_each_setting(world):
    from concept_grounding.evaluation.posthoc import cav_sweep, default_concept_columns
    from concept_grounding.models import fit_sparse_classifier, to_tensors, train_backbone, train_posthoc_cbm
    from concept_grounding.models.concept_bank import embed_images
    from concept_grounding.models.data import images_to_tensor
    from concept_grounding.vocabulary import load_vocabulary

    cols = default_concept_columns(world["train"], load_vocabulary())
    train, test = world["train"], world["test"]
    tensors = to_tensors(train, cols, SIZE, "image")
    net = train_backbone(tensors, {"kind": "cnn", "pool": "avg"}, epochs=1, progress=False)
    test_images, test_labels = images_to_tensor(test["image"], SIZE), np.asarray(test["label"])
    sweep = cav_sweep(
        train_posthoc_cbm(net, tensors, n_pos=10, n_neg=10, progress=False),
        tensors.images,
        np.asarray(train["attributes"])[:, cols],
        np.asarray(train["label"]),
        test_images,
        test_labels,
        len(CLASSES),
        Cs=(0.01, 1.0),
        sizes=(5, 10),
        progress=False,
    )
    assert [(r["C"], r["n"]) for r in sweep.rows] == [(0.01, 5), (1.0, 5), (0.01, 10), (1.0, 10)]
    for C, n in ((0.01, 5), (1.0, 10)):
        rebuilt = train_posthoc_cbm(net, tensors, n_pos=n, n_neg=n, C=C, progress=False)
        with torch.no_grad():
            acc = float((rebuilt(test_images).class_logits.argmax(1).numpy() == test_labels).mean())
        assert sweep.accuracy(C, n) == pytest.approx(acc)
    f_train, f_test = embed_images(net, tensors.images), embed_images(net, test_images)
    theta, bias = fit_sparse_classifier(f_train, tensors.labels, len(CLASSES))
    assert sweep.no_bottleneck_accuracy == pytest.approx(
        float(((f_test @ theta + bias).argmax(1).numpy() == test_labels).mean())
    )
    with pytest.raises(ValueError, match="C > 0"):
        cav_sweep(rebuilt, tensors.images, np.zeros((1, 1)), np.zeros(1), test_images, test_labels, 3, Cs=())


def test_class_maps_split_the_logit_and_algorithm_2_keeps_the_thresholded_region():
    from concept_grounding.evaluation.posthoc import feature_map_posthoc_cbm
    from concept_grounding.models.coam import class_activation_maps, coam_overlays
    from concept_grounding.vocabulary import load_vocabulary

    torch.manual_seed(0)
    names = list(load_vocabulary().attributes[:5])
    model = feature_map_posthoc_cbm(
        torch.nn.Conv2d(3, 8, 3, stride=4), torch.randn(5, 8), names, theta=torch.randn(5, 3), bias=torch.randn(3)
    ).eval()  # GAP over its map: f(X)
    images = torch.rand(4, 3, 32, 32)
    with torch.no_grad():
        out = model(images)
        maps = model.concept_activation_maps(images, upsample=False)
        classes = torch.tensor([0, 1, 2, 1])
        G = class_activation_maps(maps, model.theta, classes)
    d = 8
    logits = out.class_logits[torch.arange(4), classes] - model.classifier.bias[classes]
    assert torch.allclose(G.mean(dim=(1, 2)) * d, logits, rtol=1e-4, atol=1e-4)
    part = torch.zeros(2, 32, 32)
    part[0, 4:10, 20:30] = 1.0
    binary = coam_overlays(torch.ones(3, 32, 32), part, coloured=False, threshold=0.5)
    kept = np.asarray(binary[0])[..., 0] > 0
    assert kept.sum() == 60 and kept[4:10, 20:30].all()
    assert not np.asarray(binary[1]).any()  # a constant map keeps nothing
    coloured = coam_overlays(torch.zeros(3, 32, 32), part, coloured=True, beta=1.0)
    assert np.asarray(coloured[0]).shape == (32, 32, 3)
    with pytest.raises(ValueError, match="threshold"):
        coam_overlays(torch.ones(3, 8, 8), part, coloured=False, threshold=2.0)


def test_analyse_on_the_world_writes_every_table(tmp_path):
    out = tmp_path / "report"
    assert (
        main(
            [
                "analyse",
                "--classes",
                *CLASSES,
                "--train-per-class",
                "12",
                "--test-per-class",
                "4",
                "--image-size",
                str(SIZE),
                "--epochs",
                "1",
                "--sweep",
                "--sweep-c",
                "0.1",
                "1",
                "--sweep-n",
                "5",
                "10",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    saved = json.loads((out / "results.json").read_text())
    assert set(saved["existence_by_ranking"]) == {"theta_u", "theta", "u"}
    for ranking in ("theta_u", "theta", "u"):
        assert {f"existence@{l}{s}" for l in (1, 3, 5) for s in ("", "_correct")} <= set(
            saved["existence_by_ranking"][ranking]
        )
        assert {f"location@{l}_alpha{a}{s}" for l in (1, 3, 5) for a in (1, 3, 6) for s in ("", "_correct")} <= set(
            saved["location_by_ranking"][ranking]
        )
    assert len(saved["sweep"]["rows"]) == 4 and 0 <= saved["sweep"]["no_bottleneck_accuracy"] <= 1
    report = (out / "report.md").read_text()
    for heading in ("Table 1", "Table 2", "Table 3", "Fig. 3", "Fig. 4", "Table 6", "Tables 7-8", "Algorithm 2"):
        assert heading in report
    rows = [line for line in report.splitlines() if line.startswith(("| entire test set", "| correct class set"))]
    assert len(rows) == 2 * 3 + 2 * 3 * 3  # Table 1: subset x ranking; Table 2: subset x alpha x ranking
    assert "model w/o bottleneck" in report
    with (out / "cgim_per_concept.csv").open() as handle:
        rows = list(csv.reader(handle))
    assert len(rows) == 1 + len(saved["concept_names"])
    with (out / "cgim_per_class.csv").open() as handle:
        assert len(list(csv.reader(handle))) == 1 + len(CLASSES)
    assert {"coam_gallery.png", "coam_class_maps.png", "coam_binary.png", "cgim_histograms.png"} <= {
        p.name for p in out.iterdir()
    }


def test_gallery_marks_must_match_the_maps(tmp_path):
    from concept_grounding.models.coam import save_coam_gallery

    with pytest.raises(ValueError, match="marks"):
        save_coam_gallery([torch.rand(3, 8, 8)], torch.rand(1, 2, 4, 4), tmp_path / "g.png", marks=[[True]])
    path = save_coam_gallery(
        [torch.rand(3, 8, 8)],
        torch.rand(1, 2, 4, 4),
        tmp_path / "g.png",
        marks=[[True, False]],
        class_maps=torch.rand(1, 4, 4),
        class_titles=["Cardinal"],
    )
    assert path.exists()


def test_the_guide_analyse_lines_parse(tmp_path):
    import re
    import shlex
    from pathlib import Path

    from concept_grounding.cli import build_parser

    readme = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "evaluate-your-own-model.md").read_text()
    lines = [
        re.sub(r"\s+#.*$", "", line)
        for block in re.findall(r"```sh\n(.*?)```", readme, flags=re.S)
        for line in block.replace("\\\n", " ").splitlines()
        if "concept-grounding analyse" in line
    ]
    assert len(lines) >= 2
    for line in lines:
        argv = [str(tmp_path) if a == "CUB_200_2011" else a for a in shlex.split(line)]
        args = build_parser().parse_args(argv[argv.index("analyse") :])
        assert args.sweep


def test_analyse_trains_the_paper_model_on_a_cub_folder(world, tmp_path):
    """``--cub-root`` without ``--model``: the post-hoc CBM is trained on the folder's training split."""
    from concept_grounding.loaders import write_cub

    root = tmp_path / "CUB_200_2011"
    write_cub(world, root, progress=False)
    out = tmp_path / "report"
    assert (
        main(
            [
                "analyse",
                "--cub-root",
                str(root),
                "--image-size",
                str(SIZE),
                "--epochs",
                "1",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    saved = json.loads((out / "results.json").read_text())
    assert len(saved["concept_names"]) > 0 and "sweep" not in saved
    assert "Not run" in (out / "report.md").read_text()  # Table 3 says why it is empty
