"""Concept Confidence Deviation (ConceptBed Eq. 3): known answers, both reductions, VQA mode."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from concept_grounding.metrics import (
    concept_confidence_deviation,
    expected_calibration_error,
)

# 2 concepts; generated: concept 0 -> f = 0.6, 0.4 ; concept 1 -> f = 0.9
GEN = np.array([[0.6, 0.4], [0.4, 0.6], [0.1, 0.9]])
GEN_Y = [0, 0, 1]
# real: concept 0 -> f = 0.8 ; concept 1 -> f = 0.7, 0.9
REAL = np.array([[0.8, 0.2], [0.3, 0.7], [0.1, 0.9]])
REAL_Y = [0, 1, 1]


def test_per_concept_known_answer():
    out = concept_confidence_deviation(GEN, GEN_Y, REAL, REAL_Y)
    # concept 0: -(0.5 - 0.8) = 0.3 ; concept 1: -(0.9 - 0.8) = -0.1 ; mean 0.1
    np.testing.assert_allclose(out["per_concept_ccd"], [0.3, -0.1])
    assert out["ccd"] == pytest.approx(0.1)
    np.testing.assert_array_equal(out["concepts"], [0, 1])
    np.testing.assert_allclose(out["generated_mean"], [0.5, 0.9])
    np.testing.assert_allclose(out["real_mean"], [0.8, 0.8])


def test_pooled_known_answer():
    out = concept_confidence_deviation(GEN, GEN_Y, REAL, REAL_Y, reduction="pooled")
    pooled = (0.8 + 0.7 + 0.9) / 3
    assert out["real_pooled_mean"] == pytest.approx(pooled)
    # ConceptBed's DeltaNew: -(mean over all generated images - pooled real mean)
    assert out["ccd"] == pytest.approx(-((0.6 + 0.4 + 0.9) / 3 - pooled))
    np.testing.assert_allclose(out["per_concept_ccd"], [-(0.5 - pooled), -(0.9 - pooled)])
    # ccd is the generated-count-weighted mean of the per-concept terms
    assert out["ccd"] == pytest.approx(np.average(out["per_concept_ccd"], weights=[2, 1]))


def test_reductions_differ_when_concepts_are_unbalanced():
    a = concept_confidence_deviation(GEN, GEN_Y, REAL, REAL_Y)["ccd"]
    b = concept_confidence_deviation(GEN, GEN_Y, REAL, REAL_Y, reduction="pooled")["ccd"]
    assert a == pytest.approx(0.1) and b == pytest.approx(-(1.9 / 3 - 0.8))


def test_accuracy_msp_ece_on_generated():
    out = concept_confidence_deviation(GEN, GEN_Y, REAL, REAL_Y)
    # argmax: 0 (ok), 1 (wrong: label 0), 1 (ok)
    assert out["accuracy"] == pytest.approx(2 / 3)
    assert out["msp"] == pytest.approx((0.6 + 0.6 + 0.9) / 3)
    # 15 bins: 0.6 -> bin 8 (acc 1/2, conf 0.6), 0.9 -> bin 13 (acc 1, conf 0.9)
    assert out["ece"] == pytest.approx((2 * abs(0.5 - 0.6) + abs(1 - 0.9)) / 3)
    assert out["real_accuracy"] == pytest.approx(1.0)


def test_ece_bins_are_right_closed():
    # 5 bins: 0.2 sits in (0, 0.2], 0.21 in (0.2, 0.4] -> (|1 - 0.2| + |0 - 0.21|) / 2;
    # left-closed bins would pool them: |1 - 0.41| / 2 = 0.295
    assert expected_calibration_error(np.array([0.2, 0.21]), np.array([1, 0]), n_bins=5) == pytest.approx(0.505)
    assert expected_calibration_error(np.array([0.0]), np.array([0]), n_bins=5) == 0.0


def test_vqa_mode_known_answer():
    gen_yes = [0.9, 0.3, 0.6]  # prompt 0: 0.9, 0.3 ; prompt 1: 0.6
    real_yes = [0.8, 0.7]
    out = concept_confidence_deviation(gen_yes, [0, 0, 1], real_yes, [0, 1], mode="vqa")
    # prompt 0: -(0.6 - 0.8) = 0.2 ; prompt 1: -(0.6 - 0.7) = 0.1
    assert out["ccd"] == pytest.approx(0.15)
    assert out["accuracy"] == pytest.approx(2 / 3)  # "yes" when P(yes) > 0.5
    assert out["msp"] == pytest.approx((0.9 + 0.7 + 0.6) / 3)


def test_vqa_exactly_half_is_no():
    out = concept_confidence_deviation([0.5], [0], [0.5], [0], mode="vqa")
    assert out["accuracy"] == 0.0 and out["ccd"] == 0.0


def test_torch_input_is_accepted():
    import torch

    out = concept_confidence_deviation(torch.tensor(GEN), torch.tensor(GEN_Y), torch.tensor(REAL), torch.tensor(REAL_Y))
    assert out["ccd"] == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(generated_probabilities=GEN[:2]), "generated_probabilities and generated_labels"),
        (dict(generated_probabilities=GEN * 2), "generated_probabilities must be probabilities"),
        (dict(real_probabilities=np.where(REAL > 0.85, np.nan, REAL)), "real_probabilities contains NaN"),
        (dict(generated_labels=[0, 0, 2]), "generated_labels must be < 2"),
        (dict(generated_probabilities=GEN[:, 0]), "generated_probabilities must have 2 dimension"),
        (dict(real_probabilities=REAL[:1], real_labels=[0]), r"real_labels has no images of concept\(s\) \[1\]"),
        (dict(generated_probabilities=np.zeros((0, 2)), generated_labels=[]), "generated_probabilities is empty"),
        (dict(reduction="mean"), "reduction must be one of"),
        (dict(mode="clip"), "mode must be one of"),
    ],
)
def test_bad_input(kwargs, match):
    args = dict(generated_probabilities=GEN, generated_labels=GEN_Y, real_probabilities=REAL, real_labels=REAL_Y)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        concept_confidence_deviation(**args)


probs_1d = arrays(np.float64, st.integers(1, 20), elements=st.floats(0, 1))


@settings(max_examples=50, deadline=None)
@given(probs_1d, st.integers(1, 4), st.sampled_from(["per_concept", "pooled"]))
def test_ccd_is_zero_when_generated_equals_real(p, n_concepts, reduction):
    # every concept gets the same images, so the pooled real mean is the mean of concept means
    probs, labels = np.tile(p, n_concepts), np.repeat(np.arange(n_concepts), len(p))
    out = concept_confidence_deviation(probs, labels, probs, labels, mode="vqa", reduction=reduction)
    assert out["ccd"] == pytest.approx(0.0, abs=1e-12)
    if reduction == "per_concept":
        np.testing.assert_allclose(out["per_concept_ccd"], 0.0, atol=1e-12)


@settings(max_examples=50, deadline=None)
@given(probs_1d, st.integers(2, 4))
def test_per_concept_ccd_is_zero_for_any_per_concept_match(p, n_concepts):
    # unbalanced concepts: per-concept CCD is still 0 when each concept's images coincide
    labels = np.arange(len(p)) % n_concepts
    out = concept_confidence_deviation(p, labels, p, labels, mode="vqa")
    assert out["ccd"] == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=50, deadline=None)
@given(probs_1d, probs_1d)
def test_ccd_range_and_calibration_range(gen, real):
    out = concept_confidence_deviation(gen, np.zeros(len(gen), int), real, np.zeros(len(real), int), mode="vqa")
    assert -1.0 <= out["ccd"] <= 1.0
    assert 0.0 <= out["ece"] <= 1.0 and 0.5 <= out["msp"] <= 1.0 and 0.0 <= out["accuracy"] <= 1.0
