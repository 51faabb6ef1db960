"""Bootstrap 95 % intervals of ConceptBed's table cells over concepts and images (docs/conceptbed/intervals.md).

One two-stage bootstrap (Davison & Hinkley 1997, Sec. 3.8, "multistage sampling"): each replicate draws the
concepts with replacement, then, inside each drawn concept, each of its samples (its generated images, its real
images) with replacement; the statistic is recomputed on the replicate and the interval is the percentile one
(Efron & Tibshirani 1993, Sec. 13.3). Every table's cells go through :func:`bootstrap_interval`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["Group", "bootstrap_interval", "percentile_interval", "BOOT", "LEVEL"]

#: replicates per interval
BOOT = 1000
#: coverage of every interval
LEVEL = 0.95
#: one concept: its samples, each an ``(n_i, ...)`` array resampled along axis 0 (rows of one array stay whole)
Group = tuple[np.ndarray, ...]


def percentile_interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The ``level`` percentile interval of bootstrap ``values`` (NaNs dropped; ``(nan, nan)`` if none is left).

    >>> percentile_interval(np.arange(101.0), 0.9)
    (5.0, 95.0)
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return float("nan"), float("nan")
    tail = round(50.0 * (1.0 - level), 10)  # 0.95 -> 2.5 exactly
    lo, hi = np.percentile(v, [tail, 100.0 - tail])
    return float(lo), float(hi)


def _resample(groups: Sequence[Group], rng: np.random.Generator) -> list[Group]:
    """One replicate: the concepts drawn with replacement, then each sample's rows inside each drawn concept."""
    picked = rng.integers(0, len(groups), size=len(groups))
    return [tuple(a[rng.integers(0, len(a), size=len(a))] for a in groups[i]) for i in picked]


def bootstrap_interval(
    groups: Sequence[Group],
    statistic: Callable[[Sequence[Group]], float],
    boot: int = BOOT,
    seed: int = 0,
    level: float = LEVEL,
) -> tuple[float, float]:
    """The ``level`` percentile interval of ``statistic`` under the two-stage bootstrap (module docstring).

    Args:
        groups: one :data:`Group` per concept; each array needs at least one row.
        statistic: the table cell computed from a list of groups (the full list gives the point estimate).
        boot: replicates; seed: their generator's seed (the same seed, the same interval).

    >>> same = [(np.full((4, 1), 0.5),), (np.full((4, 1), 0.5),)]
    >>> bootstrap_interval(same, lambda gs: float(np.mean([g[0].mean() for g in gs])))
    (0.5, 0.5)
    """
    if boot < 1:
        raise ValueError(f"boot must be >= 1, got {boot}")
    if not groups:
        raise ValueError("bootstrap_interval needs at least one concept, got none")
    for k, group in enumerate(groups):
        if any(len(a) == 0 for a in group):
            raise ValueError(f"concept {k} has a sample with no rows: every sample needs at least one image")
    rng = np.random.default_rng(seed)
    values = np.array([statistic(_resample(groups, rng)) for _ in range(boot)], dtype=np.float64)
    return percentile_interval(values, level)
