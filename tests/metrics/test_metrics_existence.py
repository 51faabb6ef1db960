"""Concept existence (Aysel et al. Eqs. 9-10): known answers for every ranking and flag."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from concept_grounding.metrics import concept_existence
from concept_grounding.metrics.concept_existence import rank_concepts

# L = 4 concepts, K = 2 classes
THETA = np.array([[3.0, -1.0], [1.0, 2.0], [-2.0, 1.0], [0.5, 0.5]])
U = np.array(
    [
        [1.0, 4.0, 1.0, 2.0],  # predicted 0: theta*u = 3, 4, -2, 1 -> order 1, 0, 3, 2
        [2.0, 1.0, 5.0, 0.0],
    ]
)  # predicted 1: theta*u = -2, 2, 5, 0 -> order 2, 1, 3, 0
LABELS = np.array([[1, 0, 0, 1], [0, 0, 1, 1]])
PRED, REF = [0, 1], [0, 0]


def test_theta_u_ranking_known_answer():
    out = concept_existence(THETA, U, PRED, LABELS, REF, top_l=(1, 2, 3))
    assert out["top_concepts"].tolist() == [[1, 0, 3], [2, 1, 3]]
    # image 0: hits 0, 1, 1 -> @1 0, @2 1/2, @3 2/3 ; image 1: 1, 1, 2 -> @1 1, @2 1/2, @3 2/3
    assert out["existence@1"] == pytest.approx(0.5)
    assert out["existence@2"] == pytest.approx(0.5)
    assert out["existence@3"] == pytest.approx(2 / 3)
    assert out["num_correct"] == 1 and out["existence@1_correct"] == 0.0
    np.testing.assert_allclose(out["per_image"], [[0, 0.5, 2 / 3], [1, 0.5, 2 / 3]])


def test_theta_and_u_rankings():
    by_theta = concept_existence(THETA, U, PRED, LABELS, top_l=(1,), ranking="theta")
    assert by_theta["top_concepts"].tolist() == [[0], [1]]  # column 0: 3 ; column 1: 2 (tie 1.0 vs 1.0 below)
    assert by_theta["existence@1"] == pytest.approx(0.5)
    by_u = concept_existence(THETA, U, PRED, LABELS, top_l=(2,), ranking="u")
    assert by_u["top_concepts"].tolist() == [[1, 3], [2, 0]]
    assert by_u["existence@2"] == pytest.approx((0.5 + 0.5) / 2)


def test_by_magnitude():
    out = concept_existence(THETA, U, PRED, LABELS, top_l=(1,), by_magnitude=True)
    assert out["top_concepts"][:, 0].tolist() == [1, 2]  # |4| ; |5|
    theta = np.array([[1.0], [-5.0]])
    out = concept_existence(theta, [[1.0, 1.0]], [0], [[0, 1]], top_l=(1,), by_magnitude=True)
    assert out["existence@1"] == 1.0
    assert concept_existence(theta, [[1.0, 1.0]], [0], [[0, 1]], top_l=(1,))["existence@1"] == 0.0


def test_ties_go_to_lower_index():
    out = concept_existence(np.ones((5, 1)), np.ones((1, 5)), [0], [[0, 0, 1, 1, 1]], top_l=(1, 2, 5))
    assert out["top_concepts"].tolist() == [[0, 1, 2, 3, 4]]
    assert out["existence@2"] == 0.0 and out["existence@5"] == pytest.approx(0.6)
    assert rank_concepts(np.array([[2.0, 1.0, 2.0, 1.0, 1.0, 0.0]]), 3).tolist() == [[0, 2, 1]]


def test_no_correct_image_gives_nan():
    out = concept_existence(THETA, U, PRED, LABELS, [1, 0], top_l=(1,))
    assert out["num_correct"] == 0 and np.isnan(out["existence@1_correct"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(concept_labels=LABELS[:, :3]), "concept_labels must have the shape of concept_scores"),
        (dict(concept_labels=LABELS * 2), "concept_labels must be binary"),
        (dict(predictions=[0, 2]), "predictions must be < 2"),
        (dict(predictions=[0]), "concept_scores and predictions must have the same length"),
        (dict(top_l=(1, 5)), "top_l values must be <= 4"),
        (dict(top_l=(0,)), "top_l must hold positive integers"),
        (dict(ranking="grad"), "ranking must be one of"),
        (dict(concept_scores=U[:, :3]), "concept_scores must have 4 columns"),
        (dict(references=[0]), "predictions and references must have the same length"),
    ],
)
def test_bad_input(kwargs, match):
    args = dict(theta=THETA, concept_scores=U, predictions=PRED, concept_labels=LABELS, top_l=(1, 2))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        concept_existence(**args)


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, (5, 6), elements=st.floats(-3, 3).map(lambda v: round(v, 1))), st.integers(1, 6))
def test_rank_concepts_matches_stable_argsort(key, top):
    expected = np.argsort(-key, axis=1, kind="stable")[:, :top]
    np.testing.assert_array_equal(rank_concepts(key, top), expected)


@settings(max_examples=30, deadline=None)
@given(arrays(np.float64, (6, 5), elements=st.floats(-3, 3)), arrays(np.uint8, (6, 5), elements=st.integers(0, 1)))
def test_scores_in_range(u, labels):
    out = concept_existence(np.ones((5, 2)), u, np.zeros(6, int), labels, top_l=(1, 3, 5))
    assert all(0.0 <= out[f"existence@{l}"] <= 1.0 for l in (1, 3, 5))
    assert out["existence@5"] == pytest.approx(labels.mean())  # l = L covers every concept
