"""The vectorised metrics equal the per-image loop references of benchmarks/bench_metrics.py."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from concept_grounding import load_vocabulary
from concept_grounding.metrics import (
    concept_confidence_deviation,
    concept_existence,
    concept_global_importance,
    concept_location,
    sub_accuracy,
)
from concept_grounding.metrics.concept_location import concept_part_table

_spec = importlib.util.spec_from_file_location(
    "bench_metrics", Path(__file__).parents[2] / "benchmarks" / "bench_metrics.py"
)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.fixture(params=[0, 1, 2])
def data(request):
    rng = np.random.default_rng(request.param)
    n, L, K = 40, 12, 5
    ref = rng.integers(0, K, n)
    return dict(
        rng=rng,
        theta=rng.normal(size=(L, K)),
        V=(rng.random((L, K)) < 0.4).astype(float),
        u=np.round(rng.normal(size=(n, L)), 1),  # rounding makes ties in the rankings
        labels=(rng.random((n, L)) < 0.4).astype(np.uint8),
        pred=np.where(rng.random(n) < 0.6, ref, rng.integers(0, K, n)),
        ref=ref,
    )


def test_cgim_equals_loop(data):
    d = data
    fast = concept_global_importance(d["theta"], d["V"], d["u"], d["pred"], d["ref"])
    slow = bench.loop_concept_global_importance(d["theta"], d["V"], d["u"], d["pred"], d["ref"])
    for key, value in slow.items():
        np.testing.assert_allclose(fast[key], value, atol=1e-12, equal_nan=True, err_msg=key)


@pytest.mark.parametrize("ranking", ["theta_u", "theta", "u"])
def test_existence_equals_loop(data, ranking):
    d = data
    fast = concept_existence(d["theta"], d["u"], d["pred"], d["labels"], top_l=(1, 3, 5), ranking=ranking)
    slow = bench.loop_concept_existence(d["theta"], d["u"], d["pred"], d["labels"], (1, 3, 5), ranking)
    assert fast["top_concepts"].tolist() == bench.loop_top_concepts(d["theta"], d["u"], d["pred"], 5, ranking)
    for key, value in slow.items():
        assert fast[key] == pytest.approx(value), key


@pytest.mark.parametrize("smooth", [False, True])
def test_location_equals_loop(smooth):
    rng = np.random.default_rng(7)
    vocab = load_vocabulary()
    names = [vocab.attributes[i] for i in vocab.cbm_112[:20]]  # a mix of concepts with and without parts
    n, L, size = 12, len(names), (32, 28)
    maps = rng.normal(size=(n, L, 4, 4))
    if smooth:  # quantised maps: plateaus and exact ties
        maps = np.round(maps)
    xy = rng.uniform(0, 32, size=(n, vocab.num_parts, 2))
    visible = rng.random((n, vocab.num_parts)) < 0.7
    theta, u, pred = rng.normal(size=(L, 3)), rng.normal(size=(n, L)), rng.integers(0, 3, n)
    fast = concept_location(
        maps,
        xy,
        visible,
        theta=theta,
        concept_scores=u,
        predictions=pred,
        concept_names=names,
        image_size=size,
        alphas=(1, 3, 6),
        top_l=(1, 3, 5),
    )
    parts = [tuple(p for p in row if p >= 0) for row in concept_part_table(L, concept_names=names)]
    slow = bench.loop_concept_location(maps, xy, visible, fast["top_concepts"].tolist(), parts, size)
    for key, value in slow.items():
        if key == "hits":
            continue
        np.testing.assert_equal(fast[key], value, err_msg=key)
    hits = [[None if h is None else list(h) for h in row] for row in slow["hits"]]
    expected = [
        [None if not ev else list(hit) for ev, hit in zip(e_row, h_row)]
        for e_row, h_row in zip(fast["evaluated"].tolist(), fast["hits"].tolist())
    ]
    assert hits == expected


@pytest.mark.parametrize("reduction", ["per_concept", "pooled"])
def test_ccd_equals_loop(data, reduction):
    rng = data["rng"]
    gp, rp = rng.dirichlet(np.ones(5), 30), rng.dirichlet(np.ones(5), 20)
    gy, ry = rng.integers(0, 4, 30), np.r_[np.arange(4), rng.integers(0, 5, 16)]
    fast = concept_confidence_deviation(gp, gy, rp, ry, reduction=reduction)["ccd"]
    assert fast == pytest.approx(bench.loop_concept_confidence_deviation(gp, gy, rp, ry, reduction))


def test_sub_binary_equals_loop(data):
    rng = data["rng"]
    vocab = load_vocabulary()
    names = [vocab.attributes[i] for i in vocab.cbm_112]
    targets = [vocab.attributes[i] for i in rng.choice(vocab.sub_attribute_indices, 50)]
    removed = [
        [vocab.attributes[vocab.groups[vocab.group_of(t)][k]] for k in range(rng.integers(0, 3))] for t in targets
    ]
    classes = [vocab.classes[i] for i in rng.integers(0, 5, 50)]
    probs = rng.random((50, len(names)))
    out = sub_accuracy(probs, targets, removed, concept_names=names, reference_classes=classes)
    ref = bench.loop_sub_accuracy_binary(probs, targets, removed, names, classes, vocab.group_of)
    for key in ("s_plus", "s_minus", "chance_s_plus", "chance_s_minus"):
        assert out[key] == pytest.approx(ref[key], nan_ok=True)
    for level, per_key in ref["breakdown"].items():
        got = out["breakdown"][level]
        assert sorted(per_key) == got["names"].tolist()
        for j, name in enumerate(got["names"]):
            assert (got["s_plus"][j], got["s_minus"][j]) == pytest.approx(per_key[name], nan_ok=True)
