"""CGIM (Aysel et al. Eqs. 3-8): known answers, NaN conventions, scale invariance."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from concept_grounding.metrics import concept_global_importance

THETA = np.array([[1.0, -1.0, 0.0], [2.0, 2.0, 0.0]])  # L=2 concepts, K=3 classes
V = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
# 4 test images; classes 0, 0, 1, 2 ; predictions 0, 0, 1, 0 (image 3 wrong -> class 2 has no U*)
U = np.array([[1.0, 0.0], [3.0, 2.0], [0.0, 1.0], [9.0, 9.0]])
PRED, REF = [0, 0, 1, 0], [0, 0, 1, 2]


def test_type1_per_concept_and_per_class():
    out = concept_global_importance(THETA, V)
    s2 = 1 / np.sqrt(2)
    # concept 0: (1,-1,0).(1,0,0) / (sqrt2 * 1) ; concept 1: (2,2,0).(1,1,1) / (sqrt8 * sqrt3)
    np.testing.assert_allclose(out["per_concept_type1"], [s2, 4 / (np.sqrt(8) * np.sqrt(3))])
    # class 0: (1,2).(1,1) / (sqrt5 sqrt2); class 1: (-1,2).(0,1) / sqrt5; class 2: zero theta -> NaN
    np.testing.assert_allclose(out["per_class_type1"][:2], [3 / (np.sqrt(5) * np.sqrt(2)), 2 / np.sqrt(5)])
    assert np.isnan(out["per_class_type1"][2])
    assert out["class_type1"] == pytest.approx(np.mean(out["per_class_type1"][:2]))
    assert "per_concept_type2" not in out


def test_types_2_and_3_use_correct_images_only():
    out = concept_global_importance(THETA, V, U, PRED, REF)
    # U*: class 0 = mean((1,0), (3,2)) = (2, 1); class 1 = (0, 1); class 2: none correct
    assert out["classes_without_correct"] == 1
    # concept 0 over classes 0, 1: U*=(2, 0), V=(1, 0) -> 1 ; concept 1: U*=(1, 1), V=(1, 1) -> 1
    np.testing.assert_allclose(out["per_concept_type2"], [1.0, 1.0])
    # class 0: (2,1).(1,1) / (sqrt5 sqrt2) ; class 1: (0,1).(0,1) -> 1 ; class 2 NaN
    np.testing.assert_allclose(out["per_class_type2"][:2], [3 / np.sqrt(10), 1.0])
    assert np.isnan(out["per_class_type2"][2]) and np.isnan(out["per_class_type3"][2])
    # type 3: theta * U* ; concept 0: (1*2, -1*0) = (2, 0) vs (1, 0) -> 1 ; concept 1: (2, 2) vs (1, 1) -> 1
    np.testing.assert_allclose(out["per_concept_type3"], [1.0, 1.0])
    # class 1: theta*U* = (-1*0, 2*1) = (0, 2) vs V (0, 1) -> 1
    assert out["per_class_type3"][1] == pytest.approx(1.0)


def test_histograms_count_every_finite_score():
    out = concept_global_importance(THETA, V, U, PRED, REF)
    counts = out["histogram_counts"]
    assert counts.shape == (2, 3, 20) and out["histogram_edges"].shape == (21,)
    assert counts[0].sum(axis=1).tolist() == [2, 2, 2]  # per concept: L = 2
    assert counts[1].sum(axis=1).tolist() == [2, 2, 2]  # per class: 3 minus one NaN each
    assert counts[0, 1, -1] == 2  # both type-2 concept scores are 1 -> last bin [0.9, 1]


@pytest.mark.parametrize("scale", [1e-170, 1e170])
def test_extreme_scales_neither_underflow_nor_overflow(scale):
    """Squares of 1e-170 underflow to 0 and of 1e170 overflow: the matrices are rescaled first."""
    ref = concept_global_importance(THETA, V, U, PRED, REF)
    out = concept_global_importance(scale * THETA, V, scale * U, PRED, REF)
    for key in ("per_concept_type1", "per_class_type1", "per_concept_type2", "per_class_type2"):
        np.testing.assert_allclose(out[key], ref[key], rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("values", [[-1.0, -0.95, -0.9, 0.0, 0.1, 0.3, 0.9999, 1.0], [np.nan, 0.2, 0.2, -0.35]])
def test_score_histograms_match_numpy(values):
    from concept_grounding.metrics.concept_global_importance import HISTOGRAM_EDGES, score_histograms

    v = np.array(values)
    expected = np.histogram(v[~np.isnan(v)], bins=HISTOGRAM_EDGES)[0]
    np.testing.assert_array_equal(score_histograms([v, v[::-1]]), [expected, expected])


def test_negative_alignment():
    out = concept_global_importance(-2 * np.ones_like(V), np.ones_like(V))
    assert out["concept_type1"] == pytest.approx(-1.0) and out["class_type1"] == pytest.approx(-1.0)


@pytest.mark.parametrize(
    "args, match",
    [
        ((THETA, V[:, :2]), r"class_attributes must have the shape of theta"),
        ((THETA[0], V), "theta must have 2 dimension"),
        ((THETA, V, U[:, :1], PRED, REF), "concept_scores must have 2 columns"),
        ((THETA, V, U, PRED[:3], REF), "concept_scores and predictions must have the same length"),
        ((THETA, V, U, PRED, [0, 0, 1, 3]), "references must be < 3"),
        ((THETA, V, U), "must be given together"),
        ((np.where(THETA > 1, np.inf, THETA), V), "theta contains NaN or inf"),
        ((np.zeros((0, 3)), np.zeros((0, 3))), "theta is empty"),
    ],
)
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        concept_global_importance(*args)


# rounded to 1e-6: products of tiny values underflow into subnormals, where no float formula is scale-invariant
finite = st.floats(-10, 10, allow_nan=False, width=64).map(lambda v: round(v, 6))


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, (4, 5), elements=finite), arrays(np.float64, (4, 5), elements=st.sampled_from([0.0, 1.0])),
       st.floats(1e-3, 1e3), arrays(np.float64, (6, 4), elements=finite))
def test_invariant_to_positive_scaling_of_theta(theta, V, c, u):
    pred = ref = np.array([0, 1, 2, 3, 4, 0])
    a = concept_global_importance(theta, V, u, pred, ref)
    b = concept_global_importance(c * theta, V, u, pred, ref)
    for key in ("per_concept_type1", "per_class_type1", "per_concept_type3", "per_class_type3"):
        np.testing.assert_allclose(a[key], b[key], atol=1e-9, equal_nan=True)
    for key in ("per_concept_type1", "per_class_type1", "per_concept_type2", "per_concept_type3"):
        v = a[key][~np.isnan(a[key])]
        assert ((v >= -1) & (v <= 1)).all()
