"""SUB accuracy (Bader et al. Sec. 5.5-5.6, App. F): binary and group modes, chance, breakdowns."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from concept_grounding import load_vocabulary
from concept_grounding.metrics import concept_accuracy, sub_accuracy

DAGGER, CONE, NEEDLE = "has_bill_shape::dagger", "has_bill_shape::cone", "has_bill_shape::needle"
BLUE, BROWN = "has_crown_color::blue", "has_crown_color::brown"
NAMES = [DAGGER, CONE, BLUE, BROWN]  # a model that knows 4 concepts (no needle)
PROBS = np.array(
    [
        [0.9, 0.2, 0.1, 0.1],  # S+ dagger (0.9 ok), S- cone (0.2 ok)
        [0.4, 0.7, 0.1, 0.1],  # S+ dagger (0.4 miss), S- cone (0.7 miss)
        [0.1, 0.1, 0.8, 0.5],  # S+ blue (ok), S- brown (0.5 <= 0.5 ok)
        [0.1, 0.1, 0.1, 0.1],  # S+ needle: unknown to the model -> skipped ; S- dagger (ok)
    ]
)
TARGETS = [DAGGER, DAGGER, BLUE, NEEDLE]
REMOVED = [[CONE], [CONE], [BROWN], [DAGGER]]
CLASSES = ["017.Cardinal", "017.Cardinal", "073.Blue_Jay", "073.Blue_Jay"]


def test_binary_known_answer():
    out = sub_accuracy(PROBS, TARGETS, REMOVED, concept_names=NAMES, reference_classes=CLASSES)
    assert out["s_plus"] == pytest.approx(2 / 3) and out["n_s_plus"] == 3 and out["skipped_target"] == 1
    assert out["s_minus"] == pytest.approx(3 / 4) and out["n_s_minus"] == 4 and out["skipped_removed"] == 0
    assert out["chance_s_plus"] == 0.5 and out["chance_s_minus"] == 0.5


def test_binary_breakdowns():
    out = sub_accuracy(PROBS, TARGETS, REMOVED, concept_names=NAMES, reference_classes=CLASSES)
    attr = out["breakdown"]["attribute"]
    assert attr["names"].tolist() == [DAGGER, NEEDLE, BLUE]
    np.testing.assert_allclose(attr["s_plus"], [0.5, np.nan, 1.0])
    assert attr["n_s_plus"].tolist() == [2, 0, 1]
    np.testing.assert_allclose(attr["s_minus"], [0.5, 1.0, 1.0])
    group = out["breakdown"]["group"]
    assert group["names"].tolist() == ["bill_shape", "crown_color"]
    np.testing.assert_allclose(group["s_plus"], [0.5, 1.0])
    np.testing.assert_allclose(group["s_minus"], [2 / 3, 1.0])
    cls = out["breakdown"]["class"]
    np.testing.assert_allclose(cls["s_plus"], [0.5, 1.0])
    assert cls["n_s_plus"].tolist() == [2, 1]


def test_binary_removed_attribute_unknown_to_model_is_skipped():
    out = sub_accuracy(PROBS[:1], [DAGGER], [[CONE, NEEDLE]], concept_names=NAMES)
    assert out["n_s_minus"] == 1 and out["skipped_removed"] == 1 and out["s_minus"] == 1.0


def test_group_mode_known_answer_with_none():
    vocab = load_vocabulary()
    names = [vocab.attributes[i] for i in vocab.groups["bill_shape"]]  # 9 values
    sims = np.zeros((3, 9))
    sims[0, names.index(NEEDLE)] = 0.3  # argmax needle = S+ ; S- dagger not picked
    sims[1, names.index(DAGGER)] = 0.3  # argmax dagger = S- : s+ miss, s- miss
    sims[2, names.index(NEEDLE)] = 0.3  # but "none" scores higher: s+ miss, s- ok
    none = np.array([0.1, 0.1, 0.5])
    out = sub_accuracy(sims, [NEEDLE] * 3, [[DAGGER], [DAGGER], [DAGGER]], concept_names=names, mode="group",
                       none_scores=none)
    assert out["s_plus"] == pytest.approx(1 / 3) and out["s_minus"] == pytest.approx(2 / 3)
    assert out["chance_s_plus"] == pytest.approx(1 / 10) and out["chance_s_minus"] == pytest.approx(9 / 10)


def test_group_mode_chance_without_none_and_empty_removed():
    names = [DAGGER, CONE, NEEDLE, BLUE, BROWN]
    sims = np.array([[0.1, 0.2, 0.9, 0.0, 0.0], [0.0, 0.0, 0.0, 0.4, 0.6]])
    out = sub_accuracy(sims, [NEEDLE, BLUE], [[DAGGER], []], concept_names=names, mode="group")
    # image 0: group bill_shape (3 columns), argmax needle ; image 1: crown (2 columns), argmax brown
    assert out["s_plus"] == 0.5 and out["s_minus"] == 1.0 and out["n_s_minus"] == 1
    assert out["chance_s_plus"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert out["chance_s_minus"] == pytest.approx(2 / 3)  # only the image with a removed attribute counts


def test_group_mode_ties_go_to_the_first_column_and_to_attributes_over_none():
    names = [DAGGER, CONE]
    out = sub_accuracy([[0.5, 0.5]], [CONE], [[DAGGER]], concept_names=names, mode="group", none_scores=[0.5])
    assert out["s_plus"] == 0.0 and out["s_minus"] == 0.0  # the tie picks dagger


def test_paper_chance_numbers_for_a_15_value_group():
    vocab = load_vocabulary()
    names = [vocab.attributes[i] for i in vocab.groups["crown_color"]]
    out = sub_accuracy(np.zeros((1, 15)), [BLUE], [[BROWN]], concept_names=names, mode="group", none_scores=[0.0])
    assert out["chance_s_plus"] == pytest.approx(1 / 16) and out["chance_s_minus"] == pytest.approx(15 / 16)


def test_concept_accuracy():
    assert concept_accuracy([[0.9, 0.2, 0.6]], [[1, 0, 0]]) == pytest.approx(2 / 3)
    assert concept_accuracy([[0.9, 0.2, 0.6]], [[1, 0, 0]], columns=[2]) == 0.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(scores=PROBS * 2), "scores must be probabilities"),
        (dict(scores=PROBS[:3]), "scores and target_attributes must have the same length"),
        (dict(target_attributes=[DAGGER, DAGGER, BLUE, "has_bill_shape::spork"]), "target_attributes has unknown attribute"),
        (dict(removed_attributes=[[CONE], [CONE], [BROWN], ["nope::x"]]), "removed_attributes has unknown attribute"),
        (dict(removed_attributes=[CONE, CONE, BROWN, DAGGER]), "removed_attributes must be a list of lists"),
        (dict(concept_names=NAMES[:3]), "scores has 4 columns but concept_names has 3"),
        (dict(concept_names=[DAGGER, DAGGER, BLUE, BROWN]), "concept_names has duplicate"),
        (dict(concept_names=[DAGGER, CONE, BLUE, "has_crown_color::plaid"]), "concept_names has unknown"),
        (dict(reference_classes=CLASSES[:2]), "scores and reference_classes must have the same length"),
        (dict(mode="multi"), "mode must be one of"),
        (dict(none_scores=[0.0] * 4), "none_scores is only used with mode='group'"),
        (dict(scores=np.full((4, 4), np.nan)), "scores contains NaN"),
        (dict(scores=np.zeros((0, 4)), target_attributes=[], removed_attributes=[]), "scores is empty"),
    ],
)
def test_bad_input(kwargs, match):
    args = dict(scores=PROBS, target_attributes=TARGETS, removed_attributes=REMOVED, concept_names=NAMES)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        sub_accuracy(**args)


def test_group_mode_rejects_removed_attribute_of_another_group():
    with pytest.raises(ValueError, match="removed_attributes must lie in the group"):
        sub_accuracy(np.zeros((1, 4)), [DAGGER], [[BLUE]], concept_names=NAMES, mode="group")


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, (6, 4), elements=st.floats(0, 1)))
def test_scores_in_range(probs):
    out = sub_accuracy(probs, [DAGGER, CONE, BLUE, BROWN, DAGGER, BLUE], [[CONE], [DAGGER], [BROWN], [BLUE], [], []],
                       concept_names=NAMES)
    assert 0 <= out["s_plus"] <= 1 and 0 <= out["s_minus"] <= 1
    g = sub_accuracy(probs, [DAGGER, CONE, BLUE, BROWN, DAGGER, BLUE], [[CONE], [DAGGER], [BROWN], [BLUE], [], []],
                     concept_names=NAMES, mode="group")
    assert 0 <= g["s_plus"] <= 1 and 0 <= g["s_minus"] <= 1 and g["chance_s_plus"] == 0.5
