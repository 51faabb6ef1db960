"""Known answers for the TDG tie (SUB Eq. 3, 5, 6) and the eta schedule (Eq. 4)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from concept_grounding.tdg.schedule import (
    ConstantEta,
    EtaSchedule,
    paper_schedule,
    schedule_for_attribute,
)
from concept_grounding.tdg.tie import (
    percentile_rank,
    percentile_threshold,
    tie,
    tie_mask,
    tie_pair,
)


def test_tie_known_answer_small_tensor():
    e1 = torch.tensor([[4.0, 1.0, 0.0, 2.0, 10.0]])
    e2 = torch.tensor([[4.0, 2.0, 3.0, 0.0, 0.0]])
    # d = [0, 1, 3, 2, 10]; eta = 0.6 -> k = ceil(3) = 3 -> q = 2: elements 0, 1, 3 tied
    r, g = tie_pair(e1, e2, 0.6)
    assert torch.equal(r, torch.tensor([[4.0, 1.5, 0.0, 1.0, 10.0]]))
    assert torch.equal(g, torch.tensor([[4.0, 1.5, 3.0, 1.0, 0.0]]))
    assert torch.equal(tie(e1, e2, 0.6), r)
    assert torch.equal(tie(e2, e1, 0.6), g)  # symmetric


def test_ties_in_d_all_tied():
    e1 = torch.tensor([[1.0, 1.0, 1.0, 5.0]])
    e2 = torch.zeros(1, 4)
    # d = [1, 1, 1, 5]; eta = 0.25 -> k = 1, q = 1, but three elements equal q -> all three tie
    mask = tie_mask(e1, e2, 0.25)
    assert mask.tolist() == [[True, True, True, False]]


def test_eta_zero_ties_nothing_and_one_ties_everything():
    e1, e2 = torch.randn(3, 2, 5), torch.randn(3, 2, 5)
    r, g = tie_pair(e1, e2, 0.0)
    assert torch.equal(r, e1) and torch.equal(g, e2)
    r, g = tie_pair(e1, e2, 1.0)
    assert torch.equal(r, g) and torch.equal(r, (e1 + e2) / 2)


def test_each_pair_has_its_own_percentile():
    # pair 0 differences are 1..8, pair 1 differences are 100..800: a shared threshold would tie
    # all of pair 0 and none of pair 1.
    base = torch.arange(1.0, 9.0)
    e1 = torch.stack([base, 100 * base])
    e2 = torch.zeros_like(e1)
    mask = tie_mask(e1, e2, 0.5)
    assert mask.tolist() == [[True] * 4 + [False] * 4] * 2
    assert torch.equal(percentile_threshold((e1 - e2).abs(), 0.5), torch.tensor([4.0, 400.0]))


def test_token_granularity_ties_whole_tokens():
    e1 = torch.tensor([[[0.0, 0.0], [1.0, 3.0], [9.0, 9.0]]])  # token mean d = 0, 2, 9
    e2 = torch.zeros_like(e1)
    r = tie(e1, e2, 2 / 3, granularity="token")
    assert torch.equal(r, torch.tensor([[[0.0, 0.0], [0.5, 1.5], [9.0, 9.0]]]))


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 40),
    eta=st.floats(0.0, 1.0, allow_nan=False),
    seed=st.integers(0, 10_000),
)
def test_rank_convention_is_inverted_cdf_between_quantile_lower_and_higher(n, eta, seed):
    d = torch.rand(1, n, generator=torch.Generator().manual_seed(seed))
    q = percentile_threshold(d, eta)
    if eta == 0.0:
        assert q is None  # eta = 0: nothing tied
        return
    expected = np.percentile(d.numpy()[0].astype(np.float64), 100 * eta, method="inverted_cdf")
    assert q.item() == pytest.approx(float(expected), abs=0)
    lo = torch.quantile(d[0], eta, interpolation="lower").item()
    hi = torch.quantile(d[0], eta, interpolation="higher").item()
    assert lo <= q.item() <= hi


def test_rank_convention_pinned_example():
    # 4 values, eta = 0.9: ours is ceil(3.6) = 4th smallest; torch.quantile "lower" gives the 3rd.
    d = torch.tensor([[0.1, 0.2, 0.3, 0.4]])
    assert percentile_rank(0.9, 4) == 4
    assert percentile_threshold(d, 0.9).item() == pytest.approx(0.4)
    assert torch.quantile(d[0], 0.9, interpolation="lower").item() == pytest.approx(0.3)
    assert percentile_rank(0.3, 10) == 3  # float error in 0.3 * 10 is absorbed


def test_any_positive_eta_ties_at_least_one_element():
    """eta > 0 ties >= 1 element however small eta * N is (an absolute 1e-7 slack gave 0
    for eta * N <= 1e-7)."""
    for eta, n in ((1e-9, 10), (1e-8, 10), (5e-324, 1), (1e-300, 10**6), (1e-7, 1)):
        assert percentile_rank(eta, n) == 1, (eta, n)
    e1, e2 = torch.tensor([[3.0, 1.0, 2.0]]), torch.zeros(1, 3)
    assert tie_mask(e1, e2, 1e-12).tolist() == [[False, True, False]]
    assert percentile_rank(0.0, 10) == 0 and percentile_rank(0.5, 0) == 0


def test_rank_slack_is_relative():
    """The slack scales with eta * N: on 10^8 elements, eta * N = 5 + 5e-8 needs a 6th
    element to cover a fraction eta (an absolute 1e-7 slack gave 5), while float error in
    eta * N (a few ulps) is still absorbed at every scale."""
    assert percentile_rank(5.00000005e-8, 10**8) == 6
    assert percentile_rank(0.7, 262_144) == math.ceil(0.7 * 262_144) == 183_501
    for n in (3, 10, 49, 1000, 262_144, 10**9):
        for j in (1, 2, n // 3, n - 1, n):
            assert percentile_rank(j / n, n) == j, (j, n)


def test_bf16_works_and_matches_float32():
    g = torch.Generator().manual_seed(0)
    e1, e2 = torch.randn(2, 256, 64, generator=g), torch.randn(2, 256, 64, generator=g)
    r16, _ = tie_pair(e1.bfloat16(), e2.bfloat16(), 0.37)
    assert r16.dtype == torch.bfloat16
    mask16 = tie_mask(e1.bfloat16(), e2.bfloat16(), 0.37)
    fraction = mask16.float().mean(dim=(1, 2))
    assert torch.all(fraction >= 0.37) and torch.all(fraction < 0.40)  # bf16 rounding adds ties in d


def test_bad_inputs():
    e = torch.zeros(1, 4)
    with pytest.raises(ValueError, match="eta"):
        tie(e, e, 1.5)
    with pytest.raises(ValueError, match="same shape"):
        tie(e, torch.zeros(1, 5), 0.5)
    with pytest.raises(ValueError, match="granularity"):
        tie(e, e, 0.5, granularity="pixel")
    with pytest.raises(ValueError, match="token"):
        tie(e, e, 0.5, granularity="token")


# ------------------------------------------------------------------------- schedule


def test_schedule_at_and_around_bounds():
    s = EtaSchedule(t_min=0.2, t_max=0.9, k=10)
    assert s(1.0) == 1.0
    assert s(0.9 + 1e-9) == 1.0
    assert s(0.9) == pytest.approx(1.0)
    assert s(0.9 - 1e-3) == pytest.approx((0.699 / 0.7) ** 10)
    assert s(0.55) == pytest.approx(0.5**10)
    assert s(0.2) == 0.0
    assert s(0.2 - 1e-9) == 0.0
    assert s(0.2 + 0.007) == pytest.approx(0.01**10)
    assert s(0.0) == 0.0


def test_schedule_k_one_is_linear_and_degenerate_interval_is_a_step():
    s = EtaSchedule(t_min=0.0, t_max=1.0, k=1)
    assert [s(t) for t in (0.0, 0.25, 1.0)] == [0.0, 0.25, 1.0]
    step = EtaSchedule(t_min=0.5, t_max=0.5, k=3)
    assert (step(0.49), step(0.5), step(0.51)) == (0.0, 1.0, 1.0)


def test_schedule_validation():
    with pytest.raises(ValueError, match="t_min must be <= t_max"):
        EtaSchedule(t_min=0.7, t_max=0.3)
    with pytest.raises(ValueError, match="k must be > 0"):
        EtaSchedule(k=0)
    with pytest.raises(ValueError, match="k must be > 0"):
        EtaSchedule(k=-1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        EtaSchedule(t_max=1.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ConstantEta(2.0)


def test_paper_defaults_per_category():
    assert paper_schedule("colour") == EtaSchedule(0.2, 0.9, 10)
    assert paper_schedule("shape") == EtaSchedule(0.2, 0.9, 10)
    assert paper_schedule("pattern") == EtaSchedule(0.2, 0.6, 10)
    assert schedule_for_attribute("has_tail_pattern::solid").t_max == 0.6
    assert schedule_for_attribute("has_bill_shape::needle").t_max == 0.9
    with pytest.raises(ValueError, match="category"):
        paper_schedule("texture")
