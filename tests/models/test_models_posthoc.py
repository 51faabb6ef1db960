"""CAVs, the concept bank, the sparse classifier, post-hoc CBMs and CoAM (Aysel et al.)."""

import json
import struct

import numpy as np
import pytest
import torch

from concept_grounding.models import (
    ConceptBank,
    PostHocCBM,
    concept_activation_maps,
    fit_sparse_classifier,
    learn_cavs,
    overlay_heatmap,
    predict_classes,
    predict_concepts,
    save_coam_gallery,
    train_backbone,
    train_posthoc_cbm,
    upsample_maps,
)

NAMES = ["has_primary_color::red", "has_primary_color::blue", "has_primary_color::yellow", "has_primary_color::green"]


@pytest.fixture(scope="module")
def toy(toy_concepts):
    """The session's toy concept tensors (conftest), whose concepts are :data:`NAMES`."""
    assert toy_concepts.concept_names == tuple(NAMES)
    return toy_concepts


@pytest.fixture(scope="module")
def posthoc(toy):
    backbone = train_backbone(toy, "cnn", epochs=6, batch_size=16, progress=False)
    return train_posthoc_cbm(backbone, toy, n_pos=8, n_neg=24, progress=False)


def _separable(seed=0, n=200, d=16):
    rng = np.random.default_rng(seed)
    directions = np.linalg.qr(rng.normal(size=(d, 2)))[0].T  # two orthonormal true directions
    x = rng.normal(size=(n, d))
    concepts = np.zeros((n, 2))
    for j, w in enumerate(directions):
        margin = x @ w
        keep = np.abs(margin) > 0.5  # a clear gap: linearly separable
        concepts[:, j] = margin > 0
        x[~keep] += (0.5 + 0.1) * np.sign(margin[~keep])[:, None] * w  # push the near ones out
    return x.astype(np.float32), concepts, directions


def test_cavs_separate_linearly_separable_embeddings():
    x, concepts, directions = _separable()
    bank = learn_cavs(x, concepts, n_pos=100, n_neg=100, C=1.0, progress=False, concept_names=("a", "b"))
    assert bank.vectors.shape == (2, 16) and bank.names == ("a", "b")
    assert bank.train_accuracy.tolist() == [1.0, 1.0]
    decision = torch.from_numpy(x) @ bank.vectors.T + bank.intercepts
    assert torch.equal(decision > 0, torch.from_numpy(concepts > 0.5))
    cosine = torch.nn.functional.cosine_similarity(bank.vectors, torch.from_numpy(directions).float())
    assert (cosine > 0.9).all(), cosine
    assert bank.metadata == {"n_pos": 100, "n_neg": 100, "C": 1.0, "seed": 0}


def test_cav_sampling_uses_n_pos_and_n_neg():
    x, concepts, _ = _separable()
    # with very few examples the SVM still trains, and the choice depends on the seed
    a = learn_cavs(x, concepts, n_pos=3, n_neg=3, seed=0, progress=False)
    b = learn_cavs(x, concepts, n_pos=3, n_neg=3, seed=1, progress=False)
    assert not torch.equal(a.vectors, b.vectors)
    with pytest.warns(UserWarning, match="no positive or no negative"):
        c = learn_cavs(x, np.zeros((200, 1)), progress=False)
    assert float(c.vectors.abs().sum()) == 0 and float(c.intercepts[0]) == -1.0
    with pytest.raises(ValueError, match="C > 0"):
        learn_cavs(x, concepts, C=0.0)


def test_concept_bank_is_safetensors_with_names_in_metadata(tmp_path):
    x, concepts, _ = _separable()
    bank = learn_cavs(x, concepts, progress=False, concept_names=("has_crown_color::black", "has_bill_shape::cone"))
    path = bank.save(tmp_path / "bank.safetensors")
    raw = path.read_bytes()
    header = json.loads(raw[8 : 8 + struct.unpack("<Q", raw[:8])[0]])  # the safetensors layout, no pickle
    assert json.loads(header["__metadata__"]["names"]) == ["has_crown_color::black", "has_bill_shape::cone"]
    assert header["vectors"]["shape"] == [2, 16]
    loaded = ConceptBank.load(path)
    assert torch.equal(loaded.vectors, bank.vectors) and torch.equal(loaded.intercepts, bank.intercepts)
    assert loaded.names == bank.names and loaded.metadata == bank.metadata


def test_coam_equals_the_paper_formula_on_a_hand_made_map():
    # E: d = 2 channels on a 2 x 2 grid; C: two concepts
    E = torch.tensor([[[[1.0, 2.0], [0.0, -1.0]], [[3.0, 0.0], [4.0, 1.0]]]])  # (1, d=2, 2, 2)
    C = torch.tensor([[1.0, 1.0], [2.0, -1.0]])
    F = concept_activation_maps(E, C)
    # F_ij = (1/d) sum_k c_jk E(:, :, k)
    assert F.tolist() == [[[[2.0, 1.0], [2.0, 0.0]], [[-0.5, 2.0], [-2.0, -1.5]]]]
    # the same map as ViT patch tokens (B, N = 4, d) in row-major order gives the same numbers
    tokens = E.flatten(2).transpose(1, 2)
    assert torch.equal(concept_activation_maps(tokens, C), F)
    # GAP is linear: the map's mean is (1/d) c_j . f(X)
    assert torch.allclose(F.mean((2, 3)), (E.mean((2, 3)) @ C.T) / 2)
    with pytest.raises(ValueError, match="square grid"):
        concept_activation_maps(torch.zeros(1, 5, 2), C)
    with pytest.raises(ValueError, match="depth"):
        concept_activation_maps(torch.zeros(1, 3, 2, 2), C)


def test_upsampling_and_overlays(tmp_path):
    maps = torch.zeros(1, 1, 2, 2)
    maps[0, 0, 0, 0] = 1.0
    up = upsample_maps(maps, 8)
    assert up.shape == (1, 1, 8, 8) and float(up[0, 0, 0, 0]) == 1.0 and float(up[0, 0, 7, 7]) == 0.0
    grey = torch.full((3, 8, 8), 0.5)
    overlay = np.asarray(overlay_heatmap(grey, maps[0, 0], alpha=1.0, cmap="gray"))
    assert overlay[0, 0].tolist() == [255, 255, 255] and overlay[7, 7].tolist() == [0, 0, 0]
    path = save_coam_gallery(
        [grey, grey],
        torch.rand(2, 3, 4, 4),
        tmp_path / "g.png",
        concept_names=[["a", "b", "c"], ["d", "e", "f"]],
        row_titles=["x", "y"],
    )
    assert path.stat().st_size > 1000


def test_sparse_classifier_is_sparse_and_fits():
    rng = np.random.default_rng(0)
    labels = torch.as_tensor(rng.integers(0, 3, 300))
    scores = torch.as_tensor(rng.normal(size=(300, 6)), dtype=torch.float32)
    scores[:, 0] += 4 * (labels == 0).float()  # only concepts 0 and 1 carry the class
    scores[:, 1] += 4 * (labels == 1).float()
    for solver in ("fista", "sklearn"):
        theta, b = fit_sparse_classifier(scores, labels, 4, lam=0.05, solver=solver)
        assert theta.shape == (6, 4) and b.shape == (4,)
        assert float((scores @ theta + b).argmax(1).eq(labels).float().mean()) > 0.9
        assert float(b[3]) == -1e4  # class 3 never seen
        assert int((theta[2:] != 0).sum()) <= 2, solver  # noise concepts pruned by the L1 term
        assert theta[0, 0] > 0 and theta[1, 1] > 0


def test_posthoc_cbm_trains_predicts_and_round_trips(toy, posthoc, tmp_path):
    assert posthoc.history["train_accuracy"] >= 0.9
    probs = predict_concepts(posthoc, toy.images)
    assert probs.shape == (32, 4) and float(((probs > 0.5).float() == toy.concepts).float().mean()) >= 0.9
    assert posthoc.theta.shape == (4, 4)
    out = posthoc(toy.images[:3])
    assert torch.allclose(out.concept_scores, out.embeddings @ posthoc.concept_vectors.T, atol=1e-5)
    posthoc.save_pretrained(tmp_path)
    loaded = PostHocCBM.from_pretrained(tmp_path)
    for (name, a), (_, b) in zip(posthoc.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    assert torch.equal(predict_classes(posthoc, toy.images), predict_classes(loaded, toy.images))


def test_posthoc_coam_matches_formula_and_upsamples(toy, posthoc):
    maps = posthoc.concept_activation_maps(toy.images[:2], upsample=False)
    feats = posthoc.backbone(toy.images[:2]).features
    assert maps.shape == (2, 4) + feats.shape[-2:]
    expected = torch.einsum("ld,bdhw->blhw", posthoc.concept_vectors, feats) / feats.shape[1]
    assert torch.allclose(maps, expected, atol=1e-6)
    assert posthoc.concept_activation_maps(toy.images[:2]).shape == (2, 4, 32, 32)


def test_posthoc_on_a_vit_backbone_and_bank_mismatch(toy):
    backbone = train_backbone(
        toy,
        {"kind": "vit", "image_size": 32, "patch_size": 8, "width": 32, "depth": 1, "heads": 2},
        epochs=2,
        batch_size=16,
        progress=False,
    )
    model = train_posthoc_cbm(backbone, toy, n_pos=8, n_neg=8, score="margin", progress=False)
    assert model.concept_activation_maps(toy.images[:1], upsample=False).shape == (1, 4, 4, 4)
    bank = ConceptBank(torch.zeros(3, 32), torch.zeros(3))
    with pytest.raises(ValueError, match="concept_bank has 3 concepts"):
        train_posthoc_cbm(backbone, toy, concept_bank=bank, progress=False)
