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
    ("args", "match"),
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
@given(
    arrays(np.float64, (4, 5), elements=finite),
    arrays(np.float64, (4, 5), elements=st.sampled_from([0.0, 1.0])),
    st.floats(1e-3, 1e3),
    arrays(np.float64, (6, 4), elements=finite),
)
def test_invariant_to_positive_scaling_of_theta(theta, V, c, u):
    pred = ref = np.array([0, 1, 2, 3, 4, 0])
    a = concept_global_importance(theta, V, u, pred, ref)
    b = concept_global_importance(c * theta, V, u, pred, ref)
    for key in ("per_concept_type1", "per_class_type1", "per_concept_type3", "per_class_type3"):
        np.testing.assert_allclose(a[key], b[key], atol=1e-9, equal_nan=True)
    for key in ("per_concept_type1", "per_class_type1", "per_concept_type2", "per_concept_type3"):
        v = a[key][~np.isnan(a[key])]
        assert ((v >= -1) & (v <= 1)).all()


# ------------------------------------------------------------- row / column scale
def _cos(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return a @ b / (np.linalg.norm(a) * np.linalg.norm(b))


@pytest.mark.parametrize("scale", [1e-200, 1e-160, 1e160, 1e200])
def test_a_row_tiny_or_huge_next_to_the_others_keeps_its_score(scale):
    """The old code rescaled whole matrices only: a row of 1e-200 among rows of ~1 squared
    to 0 and scored NaN; a row of 1e200 overflowed."""
    theta = np.array([[1.0, 2.0, 0.0], [1.0, -1.0, 0.5], [0.0, 3.0, 1.0]])
    V = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    theta[0] *= scale
    out = concept_global_importance(theta, V)
    want = [_cos([1, 2, 0], V[0]), _cos(theta[1], V[1]), _cos(theta[2], V[2])]
    np.testing.assert_allclose(out["per_concept_type1"], want, rtol=1e-12)
    # a column whose entries are all tiny keeps its score too
    theta_cols = np.array([[1e-200, 1.0], [2e-200, 1.0]])
    out = concept_global_importance(theta_cols, np.array([[1.0, 1.0], [0.0, 1.0]]))
    np.testing.assert_allclose(out["per_class_type1"], [_cos([1, 2], [1, 0]), 1.0], rtol=1e-12)


def test_a_tiny_concept_row_keeps_its_type2_and_type3_scores():
    u = U.copy()
    u[:, 1] *= 1e-200  # concept 1's scores are tiny: its U* row is 1e-200 * (1, 1)
    out = concept_global_importance(THETA, V, u, PRED, REF)
    ref = concept_global_importance(THETA, V, U, PRED, REF)
    for key in ("per_concept_type2", "per_concept_type3"):
        np.testing.assert_allclose(out[key], ref[key], rtol=1e-12)


def test_exactly_zero_rows_and_columns_score_nan_and_are_left_out():
    """Defined convention: an all-zero vector has no direction -> NaN, skipped by the means
    and the histograms (a V row of zeros too)."""
    theta = np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    V = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    out = concept_global_importance(theta, V)
    assert out["per_concept_type1"][0] == pytest.approx(1.0)
    assert np.isnan(out["per_concept_type1"][1]) and np.isnan(out["per_concept_type1"][2])
    assert out["concept_type1"] == pytest.approx(1.0)
    assert out["histogram_counts"][0, 0].sum() == 1


@pytest.mark.parametrize("scale", [1e-170, 1e170])
def test_type3_survives_products_beyond_float_range(scale):
    """theta * U* of 1e170-scale factors overflowed to inf (NaN scores); of 1e-170, underflowed."""
    ref = concept_global_importance(THETA, V, U, PRED, REF)
    out = concept_global_importance(scale * THETA, V, scale * U, PRED, REF)
    for key in ("per_concept_type3", "per_class_type3"):
        np.testing.assert_allclose(out[key], ref[key], rtol=1e-12, equal_nan=True)


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, (4, 5), elements=finite),
    arrays(np.float64, (4, 5), elements=st.sampled_from([0.0, 1.0])),
    st.lists(st.integers(-250, 250), min_size=4, max_size=4),
    st.lists(st.integers(-250, 250), min_size=5, max_size=5),
)
def test_scores_invariant_to_scaling_each_row_or_column(theta, V, row_exp, col_exp):
    """Cosine is scale-free per vector: scaling concept j's row of theta by 10^e_j leaves
    rho_j unchanged, and scaling class k's column leaves rho_k unchanged, for factors from
    1e-250 to 1e250; every row / column with a non-zero entry (and a non-zero partner in
    V) gets a finite score."""
    base = concept_global_importance(theta, V)
    rows = concept_global_importance(theta * 10.0 ** np.array(row_exp, float)[:, None], V)
    cols = concept_global_importance(theta * 10.0 ** np.array(col_exp, float)[None, :], V)
    np.testing.assert_allclose(
        rows["per_concept_type1"], base["per_concept_type1"], rtol=1e-9, atol=1e-12, equal_nan=True
    )
    np.testing.assert_allclose(cols["per_class_type1"], base["per_class_type1"], rtol=1e-9, atol=1e-12, equal_nan=True)
    defined_rows = (theta != 0).any(axis=1) & (V != 0).any(axis=1)
    assert np.isfinite(rows["per_concept_type1"][defined_rows]).all()
    assert np.isnan(rows["per_concept_type1"][~defined_rows]).all()
    defined_cols = (theta != 0).any(axis=0) & (V != 0).any(axis=0)
    assert np.isfinite(cols["per_class_type1"][defined_cols]).all()
    assert np.isnan(cols["per_class_type1"][~defined_cols]).all()
