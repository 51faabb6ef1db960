"""Error diagnosis on hand-made masks, judges, shares, pointing game."""

from __future__ import annotations

import pytest
import torch

from concept_grounding.cci.diagnosis import (
    AttributeJudge,
    TextEmbeddingJudge,
    binarize,
    diagnose,
    error_shares,
    foreground_share,
    iou,
    pointing_game,
)


def _masks():
    fg = torch.zeros(4, 8, 8, dtype=torch.bool)
    fg[:, 2:6, 2:6] = True  # a centred 4x4 object
    maps = torch.zeros(4, 8, 8)
    maps[0, 0, :] = 1.0  # top row: background
    maps[1, 2:6, 2:6] = 1.0  # object
    maps[2, 3:5, 3:5] = 2.0  # object centre
    maps[2, 0, 0] = 0.5  # below the 0.5 * max threshold
    maps[3, 2:6, 2:6] = 1.0
    return maps, fg


def test_diagnose_hand_made():
    maps, fg = _masks()
    judge = AttributeJudge(torch.tensor([[1, 1, 0, 0], [1, 1, 0, 1], [0, 0, 1, 1]]), threshold=0.8)
    preds = torch.tensor([1, 1, 2, 0])
    labels = torch.tensor([0, 0, 0, 0])
    # class 1 vs 0: cos = 2 / (sqrt(2) sqrt(3)) = 0.816 >= 0.8 -> similar; class 2 vs 0: 0 -> not
    assert diagnose(maps, fg, preds, labels, judge) == ["BG-Er", "Fine-Er", "FG-Er", "correct"]
    assert diagnose(maps, fg, preds, labels, None) == ["BG-Er", "FG-Er", "FG-Er", "correct"]
    hot = binarize(maps)
    assert hot[2].sum() == 4 and not hot[2, 0, 0]
    assert iou(hot, fg).tolist() == [0.0, 1.0, 0.25, 1.0]
    with pytest.raises(ValueError, match="foreground"):
        diagnose(maps, fg[:, :4], preds, labels)


def test_empty_map_is_not_background():
    fg = torch.zeros(1, 4, 4, dtype=torch.bool)
    fg[0, :2] = True
    assert diagnose(torch.zeros(1, 4, 4), fg, torch.tensor([1]), torch.tensor([0])) == ["FG-Er"]
    assert diagnose(-torch.ones(1, 4, 4), fg, torch.tensor([1]), torch.tensor([0])) == ["FG-Er"]


def test_text_judge_and_shares():
    judge = TextEmbeddingJudge(torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]]), threshold=0.75)
    assert judge(1, 0) and not judge(2, 0) and not judge(0, 0)
    cats = ["correct", "BG-Er", "Fine-Er", "Fine-Er", "FG-Er", "correct"]
    groups = ["scale", "scale", "scale", "flip", "flip", "flip"]
    s = error_shares(cats, groups)
    assert s["scale"] == {"accuracy": 1 / 3, "errors": 2.0, "BG-Er": 0.5, "Fine-Er": 0.5, "FG-Er": 0.0}
    assert s["flip"]["FG-Er"] == 0.5 and s["all"]["errors"] == 4.0 and s["all"]["BG-Er"] == 0.25
    assert error_shares(["correct"])["all"]["BG-Er"] == 0.0
    with pytest.raises(ValueError, match="categories"):
        error_shares(["oops"])


def test_foreground_share_and_pointing_game():
    maps, fg = _masks()
    assert foreground_share(maps, fg).tolist() == pytest.approx([0.0, 1.0, 8 / 8.5, 1.0])
    m = torch.zeros(3, 10, 10)
    m[:, 2, 7] = 1.0  # peak at x=7, y=2
    xy = torch.tensor([[[7.0, 3.0], [0.0, 0.0]], [[0.0, 0.0], [9.0, 9.0]], [[7.0, 2.0], [0.0, 0.0]]])
    vis = torch.tensor([[True, False], [True, True], [False, False]])
    assert pointing_game(m, xy, vis, radius=1.5).tolist() == [True, False, False]


def test_judge_default_threshold_is_the_90th_percentile_of_class_pairs():
    import torch

    from concept_grounding.cci.diagnosis import AttributeJudge

    # pair cosines: (0,1) 0.994, (2,3) 0.8, (3,4) 0.6, (1,2) 0.11, the rest 0; their 90th
    # percentile (numpy's linear rule over both orders of each pair) is 0.8 + 0.1 * 0.194
    vectors = torch.tensor([[1, 0, 0], [0.9, 0.1, 0], [0, 1, 0], [0, 0.8, 0.6], [0, 0, 1]])
    judge = AttributeJudge(vectors, threshold=None)
    assert abs(judge.threshold - 0.8194) < 1e-3
    assert judge(0, 1) and judge(1, 0) and not judge(0, 0) and not judge(2, 3) and not judge(3, 4)
