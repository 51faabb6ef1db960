"""Statistics of judged verdicts: ROC area, cluster bootstrap intervals and sample size."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["auroc", "summarise", "paired_sample_size", "detectable_difference"]


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (ties counted half); nan if one class is missing.

    >>> auroc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1]))
    0.75
    """
    scores, labels = np.asarray(scores, float), np.asarray(labels, bool)
    pos, neg = scores[labels], scores[~labels]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    values = np.concatenate([pos, neg])[order]
    # average ranks over ties (1-based), then the Mann-Whitney U of the positives
    _, first, counts = np.unique(values, return_index=True, return_counts=True)
    ranks[order] = np.repeat(first + (counts + 1) / 2.0, counts)
    u = ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2.0
    return float(u / (len(pos) * len(neg)))


def bootstrap_ci(values: np.ndarray, clusters: np.ndarray, n: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile interval of the mean of ``values``, resampling whole ``clusters``.

    >>> lo, hi = bootstrap_ci(np.array([0.0, 1.0] * 50), np.arange(100), 500)
    >>> 0.35 < lo < 0.5 < hi < 0.65
    True
    """
    values, clusters = np.asarray(values, float), np.asarray(clusters)
    if values.size == 0:
        return float("nan"), float("nan")
    keys, inverse = np.unique(clusters, return_inverse=True)
    sums = np.bincount(inverse, weights=values, minlength=len(keys))
    counts = np.bincount(inverse, minlength=len(keys)).astype(float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(len(keys), size=(n, len(keys)))
    means = sums[draws].sum(1) / counts[draws].sum(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def summarise(values: np.ndarray, clusters: np.ndarray, n: int = 1000, seed: int = 0) -> dict[str, object]:
    """``{"mean", "ci95": [lo, hi], "n"}`` of ``values`` with a cluster bootstrap interval."""
    lo, hi = bootstrap_ci(values, clusters, n, seed)
    return {"mean": float(np.mean(values)) if len(values) else float("nan"), "ci95": [lo, hi], "n": len(values)}


def paired_sample_size(p1: float, p2: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Images per method to detect success rates ``p1`` vs ``p2`` with a two-sided z test of
    two proportions (normal approximation, independent samples; same seeds make the real
    design paired, which needs fewer, so this is an upper bound).

    ``n = (z_{1-a/2} sqrt(2 pbar qbar) + z_{power} sqrt(p1 q1 + p2 q2))^2 / (p1 - p2)^2``

    >>> paired_sample_size(0.009, 0.017)
    3146
    >>> paired_sample_size(0.10, 0.13)
    1774
    """
    from statistics import NormalDist

    z_a, z_b = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)
    pbar = (p1 + p2) / 2
    num = (z_a * math.sqrt(2 * pbar * (1 - pbar)) + z_b * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))) ** 2
    return math.ceil(num / (p1 - p2) ** 2)


def detectable_difference(n: int, p: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest ``d`` such that ``paired_sample_size(p, p + d) <= n``: the difference in
    success that ``n`` images per method detect with the given power (bisection).

    >>> round(detectable_difference(4356, 0.5), 3)
    0.03
    """
    lo, hi = 1e-6, 1.0 - p
    if paired_sample_size(p, p + hi, alpha, power) > n:
        return float("nan")
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if paired_sample_size(p, p + mid, alpha, power) > n else (lo, mid)
    return hi
