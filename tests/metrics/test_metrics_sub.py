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
    out = sub_accuracy(
        sims, [NEEDLE] * 3, [[DAGGER], [DAGGER], [DAGGER]], concept_names=names, mode="group", none_scores=none
    )
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
    ("kwargs", "match"),
    [
        (dict(scores=PROBS * 2), "scores must be probabilities"),
        (dict(scores=PROBS[:3]), "scores and target_attributes must have the same length"),
        (
            dict(target_attributes=[DAGGER, DAGGER, BLUE, "has_bill_shape::spork"]),
            "target_attributes has unknown attribute",
        ),
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
    out = sub_accuracy(
        probs,
        [DAGGER, CONE, BLUE, BROWN, DAGGER, BLUE],
        [[CONE], [DAGGER], [BROWN], [BLUE], [], []],
        concept_names=NAMES,
    )
    assert 0 <= out["s_plus"] <= 1 and 0 <= out["s_minus"] <= 1
    g = sub_accuracy(
        probs,
        [DAGGER, CONE, BLUE, BROWN, DAGGER, BLUE],
        [[CONE], [DAGGER], [BROWN], [BLUE], [], []],
        concept_names=NAMES,
        mode="group",
    )
    assert 0 <= g["s_plus"] <= 1 and 0 <= g["s_minus"] <= 1 and g["chance_s_plus"] == 0.5


# --------------------------------------------------- paper vs official (published code)
# Binary fixture, hand-computed. Columns: dagger, cone, needle, blue crown, brown crown.
OFF_NAMES = [DAGGER, CONE, NEEDLE, BLUE, BROWN]
OFF_PROBS = np.array(
    [
        [0.5, 0.2, 0.5, 0.0, 0.0],  # S+ needle = 0.5: paper miss (> 0.5), official hit (>= 0.5)
        [0.0, 0.0, 0.0, 0.8, 0.6],  # S+ blue 0.8 hit ; S- brown 0.6 miss (both)
        [0.0, 0.0, 0.0, 0.0, 0.1],  # S+ black crown: not a column -> skipped ; S- brown 0.1
        [0.9, 0.0, 0.0, 0.0, 0.0],  # S+ dagger hit ; no S-
    ]
)
OFF_TARGETS = [NEEDLE, BLUE, "has_crown_color::black", DAGGER]
# image 0 lists cone before dagger; the published code walks the model's columns, so it takes dagger
OFF_REMOVED = [[CONE, DAGGER], [BROWN], [BROWN], []]


def test_binary_paper_protocol_known_answer():
    out = sub_accuracy(OFF_PROBS, OFF_TARGETS, OFF_REMOVED, concept_names=OFF_NAMES)
    # s+: images 0, 1, 3 count; hits 1, 3 -> 2/3
    # s-: pairs (0, cone 0.2 ok), (0, dagger 0.5 <= 0.5 ok), (1, brown 0.6 miss), (2, brown 0.1 ok) -> 3/4
    assert out["s_plus"] == pytest.approx(2 / 3) and out["n_s_plus"] == 3 and out["skipped_target"] == 1
    assert out["s_minus"] == pytest.approx(3 / 4) and out["n_s_minus"] == 4 and out["skipped_removed"] == 0


def test_binary_official_protocol_known_answer():
    out = sub_accuracy(OFF_PROBS, OFF_TARGETS, OFF_REMOVED, concept_names=OFF_NAMES, protocol="official")
    # s+: sigmoid >= 0.5 -> images 0, 1, 3 all hit -> 1
    # s-: one S- per image, first in column order: (0, dagger 0.5: not < 0.5, miss), (1, brown 0.6 miss);
    #     image 2 is dropped (its S+ is not a model concept), image 3 has none -> 0 / 2
    assert out["s_plus"] == 1.0 and out["n_s_plus"] == 3 and out["skipped_target"] == 1
    assert out["s_minus"] == 0.0 and out["n_s_minus"] == 2 and out["skipped_removed"] == 2
    assert out["chance_s_plus"] == 0.5 and out["chance_s_minus"] == 0.5
    attr = out["breakdown"]["attribute"]
    assert attr["names"].tolist() == [DAGGER, NEEDLE, "has_crown_color::black", BLUE]
    np.testing.assert_allclose(attr["s_minus"], [np.nan, 0.0, np.nan, 0.0])  # dagger: no S-; black: dropped
    assert attr["n_s_minus"].tolist() == [0, 1, 0, 1]


# Group fixture over the 9 bill shapes (CUB order). CBM-112 holds dagger, hooked_seabird,
# all-purpose and cone, not needle or hooked.
HOOKED, ALL_PURPOSE = "has_bill_shape::hooked", "has_bill_shape::all-purpose"


def _group_fixture():
    vocab = load_vocabulary()
    names = [vocab.attributes[i] for i in vocab.groups["bill_shape"]]
    sims = np.zeros((4, 9))
    col = names.index
    sims[0, col(CONE)] = 0.3  # "none" (0.5) beats it under the paper protocol
    sims[1, col(NEEDLE)] = 0.4
    sims[2, col(HOOKED)], sims[2, col(CONE)], sims[2, col(DAGGER)] = 0.6, 0.2, 0.1
    sims[3, col(CONE)] = 0.7
    none = np.array([0.5, 0.1, 0.0, 0.0])
    targets = [CONE, NEEDLE, DAGGER, ALL_PURPOSE]
    removed = [[DAGGER, ALL_PURPOSE], [DAGGER], [HOOKED, CONE], [CONE, DAGGER]]
    return names, sims, none, targets, removed


def test_group_paper_protocol_known_answer():
    names, sims, none, targets, removed = _group_fixture()
    out = sub_accuracy(sims, targets, removed, concept_names=names, mode="group", none_scores=none)
    # argmax: none, needle, hooked, cone. s+: only image 1 -> 1/4
    # s- pairs: (0 dagger ok, 0 all-purpose ok), (1 dagger ok), (2 hooked miss, 2 cone ok), (3 cone miss, 3 dagger ok)
    assert out["s_plus"] == 0.25 and out["n_s_plus"] == 4
    assert out["s_minus"] == pytest.approx(5 / 7) and out["n_s_minus"] == 7
    assert out["chance_s_plus"] == pytest.approx(1 / 10) and out["chance_s_minus"] == pytest.approx(9 / 10)


def test_group_official_protocol_known_answer():
    names, sims, _, targets, removed = _group_fixture()
    out = sub_accuracy(sims, targets, removed, concept_names=names, mode="group", protocol="official")
    # no "none": argmax cone, needle, hooked, cone. Image 1 (needle, not CBM-112) is skipped.
    # s+: images 0, 2, 3 -> hit on 0 only -> 1/3
    # s-: first CBM-112 S- by column: 0 dagger (col 1 < all-purpose col 6) ok; 2 cone (hooked is not
    #     CBM-112) ok; 3 dagger (col 1 < cone col 7) ok -> 3/3
    assert out["s_plus"] == pytest.approx(1 / 3) and out["n_s_plus"] == 3 and out["skipped_target"] == 1
    assert out["s_minus"] == 1.0 and out["n_s_minus"] == 3
    assert out["chance_s_plus"] == pytest.approx(1 / 9) and out["chance_s_minus"] == pytest.approx(8 / 9)


def test_official_rejects_none_scores_and_unknown_protocols():
    names, sims, none, targets, removed = _group_fixture()
    with pytest.raises(ValueError, match="none_scores is not used with protocol='official'"):
        sub_accuracy(sims, targets, removed, concept_names=names, mode="group", none_scores=none, protocol="official")
    with pytest.raises(ValueError, match=r"protocol must be one of \['paper', 'official'\]"):
        sub_accuracy(OFF_PROBS, OFF_TARGETS, OFF_REMOVED, concept_names=OFF_NAMES, protocol="published")


def test_official_protocol_through_the_evaluate_module():
    import os

    import evaluate

    os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    columns = dict(
        predictions=OFF_PROBS.tolist(),
        target_attributes=OFF_TARGETS,
        removed_attributes=OFF_REMOVED,
        reference_classes=["017.Cardinal"] * 4,
    )
    for protocol, want in (("paper", (2 / 3, 3 / 4)), ("official", (1.0, 0.0))):
        metric = evaluate.load(str(root / "metrics" / "sub_accuracy"), keep_in_memory=True)
        metric.add_batch(**{k: v[:2] for k, v in columns.items()})
        metric.add_batch(**{k: v[2:] for k, v in columns.items()})
        out = metric.compute(concept_names=OFF_NAMES, protocol=protocol)
        assert (out["s_plus"], out["s_minus"]) == pytest.approx(want)
    names, sims, _, targets, removed = _group_fixture()
    group = evaluate.load(str(root / "metrics" / "sub_accuracy"), "group", keep_in_memory=True)
    out = group.compute(
        predictions=sims.tolist(),
        target_attributes=targets,
        removed_attributes=removed,
        reference_classes=["017.Cardinal"] * 4,
        concept_names=names,
        protocol="official",
    )
    assert out["s_plus"] == pytest.approx(1 / 3) and out["s_minus"] == 1.0


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, (6, 4), elements=st.floats(0, 1)))
def test_official_equals_paper_when_no_rule_differs(probs):
    """No score at exactly 0.5, one S- per image, every S+ a column: the two rule sets agree."""
    probs = np.where(probs == 0.5, 0.25, probs)
    args = (probs, [DAGGER, CONE, BLUE, BROWN, DAGGER, BLUE], [[CONE], [DAGGER], [BROWN], [BLUE], [], []])
    paper = sub_accuracy(*args, concept_names=NAMES)
    official = sub_accuracy(*args, concept_names=NAMES, protocol="official")
    for key in ("s_plus", "s_minus", "n_s_plus", "n_s_minus"):
        assert paper[key] == official[key]
