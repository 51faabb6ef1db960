"""ConceptBed's human ratings and Table 3 (Patel et al., Sec. 4.2 "Human Evaluations", App. G;
docs/guide/conceptbed.md).

Raters score generated images 1-5, each on its own: the items folder (:func:`export_rating_items`),
**simulated raters, not people** (:func:`simulate_ratings`: the world's truth plus noise, rated through the
study store by the one simulator, ``curation.simulate.run_annotators``; every report of them must say so) and
Table 3 (:func:`table3`: Pearson r, over learners, of each metric with the mean human score; CCD's r is expected
negative).

>>> items = [RatingItem(f"i{j}", "concept", learner, "object", "c0", "x.png") for j, learner in enumerate("AABBCC")]
>>> truth = {"A": 1.0, "B": 0.5, "C": 0.0}
>>> ratings = simulate_ratings(items, k=3, noise=0.0, seed=0, truth_fn=lambda it: truth[it.learner])
>>> sorted({(r["learner"], r["rating"]) for r in ratings})
[('A', 5), ('B', 3), ('C', 1)]
>>> t3 = table3(ratings, {"ccd": {"A": {"object": 0.1}, "B": {"object": 0.5}, "C": {"object": 0.9}}})
>>> t3["mean_scores"]["A"]["object"], t3["table3"]["ccd"]
(5.0, -1.0)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..loaders.ratings import RATING_COLUMNS, RATING_SCALE, RatingItem, write_rating_items

__all__ = [
    "export_rating_items",
    "SimulatedRater",
    "simulate_ratings",
    "truth_rating",
    "pearson_r",
    "table3",
    "METRICS",
    "RatingItem",
    "RATING_COLUMNS",
]

#: Table 3's metrics: the name in ``results.json`` and whether lower is better
METRICS: dict[str, bool] = {"ccd": True, "dino": False, "clip": False}


def export_rating_items(out_dir: str | Path, records: Iterable[Mapping]) -> Path:
    """Write the rating study's items folder (:func:`~concept_grounding.loaders.ratings.write_rating_items`).

    ``records``: mappings with ``image`` (``(H, W, 3)`` uint8), ``learner``, ``task``,
    ``concept``, ``kind`` (``"concept"``: with ``references``, three real images of the
    concept; ``"caption"``: with ``caption``) and optionally ``truth`` in [0, 1] (e.g. an
    independent validated judge's probability that the image shows the concept; what
    :class:`SimulatedRater` follows). Returns the folder."""
    return write_rating_items(out_dir, records)


def truth_rating(truth: float, noise: float, rng: np.random.Generator) -> int:
    """A truth in [0, 1] as a 1-5 rating: ``round(1 + 4 truth + noise * N(0, 1))`` clipped to 1-5.

    >>> truth_rating(0.5, 0.0, np.random.default_rng(0))
    3
    """
    if not 0.0 <= truth <= 1.0:
        raise ValueError(f"truth must be in [0, 1], got {truth!r}")
    value = 1.0 + 4.0 * truth + (noise * rng.standard_normal() if noise > 0 else 0.0)
    return int(np.clip(np.rint(value), RATING_SCALE[0], RATING_SCALE[-1]))


def _stream(*keys: object) -> np.random.Generator:
    """A generator seeded by ``keys`` (text hashed): one rater's rating of one item does not
    depend on which items came before."""
    words = [int.from_bytes(hashlib.sha256(str(k).encode()).digest()[:4], "little") for k in keys]
    return np.random.default_rng(words)


@dataclass(frozen=True)
class SimulatedRater:
    """A simulated rater (not a person): with probability ``accuracy`` it rates an item by
    :func:`truth_rating` (the truth plus ``noise`` rating units of Gaussian noise), otherwise
    uniformly at random (an inattentive answer). Deterministic in ``(seed, name, item id)``."""

    name: str
    accuracy: float = 1.0
    noise: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.accuracy <= 1.0:
            raise ValueError(f"accuracy must be in [0, 1], got {self.accuracy!r}")
        if self.noise < 0:
            raise ValueError(f"noise must be >= 0 (rating units), got {self.noise!r}")

    def rate(self, item: RatingItem, truth: float) -> int:
        """This rater's 1-5 rating of ``item`` whose truth is ``truth`` (in [0, 1])."""
        rng = _stream(self.seed, self.name, item.id)
        if rng.random() >= self.accuracy:
            return int(rng.integers(RATING_SCALE[0], RATING_SCALE[-1] + 1))
        return truth_rating(truth, self.noise, rng)


def simulate_ratings(
    items: Sequence[RatingItem], k: int, noise: float, seed: int, truth_fn: Callable[[RatingItem], float]
) -> list[dict[str, Any]]:
    """``k`` simulated raters (``sim0`` ... ``sim{k-1}``; **not people**) rate every item:
    ``truth_rating(truth_fn(item), noise)`` each, through the study store and the one simulator
    (:func:`~concept_grounding.curation.simulate.run_annotators` on a
    :class:`~concept_grounding.curation.study_store.StudyStore` in a temporary file: the calls
    ``annotate --simulate --items`` makes). For concept similarity pass a truth that is
    independent of the metrics being validated (e.g. a validated judge's probability that the
    image shows the concept), for image-text alignment e.g. the fraction of the caption's
    elements the world drew. Returns rows with :data:`~concept_grounding.loaders.ratings.RATING_COLUMNS`,
    item by item, each item's raters in turn."""
    import tempfile

    from ..curation.simulate import run_annotators
    from ..curation.study import CONCEPTBED_RATING, Record, rating_item, rating_record
    from ..curation.study_store import StudyStore

    if k < 1:
        raise ValueError(f"k must be >= 1 raters per item, got {k!r}")
    raters = {f"sim{i}": SimulatedRater(f"sim{i}", 1.0, noise, seed) for i in range(k)}
    truth = {item.id: float(truth_fn(item)) for item in items}

    def rate(name: str, record: Record) -> dict[str, int]:
        return {"rating": raters[name].rate(rating_item(record), truth[record.id])}

    with tempfile.TemporaryDirectory(prefix="simulated-ratings-") as folder:
        store = StudyStore(Path(folder) / "ratings.db", k=k)
        store.add_records(CONCEPTBED_RATING, [rating_record(item) for item in items])
        run_annotators(store, CONCEPTBED_RATING.name, list(raters), rate)
        given = {(r.annotator, r.record): int(r.answers["rating"]) for r in store.responses(CONCEPTBED_RATING)}
        store.close()
    return [
        dict(zip(RATING_COLUMNS, (name, it.id, it.kind, it.learner, it.task, it.concept, given[name, it.id])))
        for it in items
        for name in raters
    ]


def pearson_r(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r of paired values; ``None`` with fewer than 3 pairs or a constant side.

    >>> round(pearson_r([1, 2, 3], [2, 4, 7]), 6), pearson_r([1, 2, 3], [1, 1, 1])
    (0.993399, None)
    """
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(a) != len(b):
        raise ValueError(f"x and y differ in length ({len(a)} vs {len(b)})")
    if len(a) < 3:
        return None
    a, b = a - a.mean(), b - b.mean()
    denom = float(np.sqrt((a * a).sum() * (b * b).sum()))
    if denom <= 1e-12 * max(1.0, float(np.abs(a).max() * np.abs(b).max())):
        return None
    return float(np.clip((a * b).sum() / denom, -1.0, 1.0))


def _frame(ratings: object):
    """``ratings`` (rows, a ``datasets.Dataset`` or a DataFrame; the study store's export or
    :data:`~concept_grounding.loaders.ratings.RATING_COLUMNS` rows) as a checked DataFrame."""
    from ..loaders.ratings import ratings_frame

    return ratings_frame(ratings)


def _cells(
    metric: Mapping[str, Mapping[str, float]], scores: Mapping[str, Mapping[str, float]], task: str | None = None
) -> tuple[list[float], list[float]]:
    """The (metric, mean human score) pairs of the learner x task cells both have (of ``task`` only)."""
    xs, ys = [], []
    for learner, row in scores.items():
        for t, score in row.items():
            value = (metric.get(learner) or {}).get(t)
            if (task is None or t == task) and value is not None and np.isfinite(value):
                xs.append(float(value))
                ys.append(float(score))
    return xs, ys


def table3(ratings: object, metrics: Mapping[str, Mapping[str, Mapping[str, float]]]) -> dict[str, Any]:
    """ConceptBed's Table 3 from 1-5 ratings.

    Args:
        ratings: the study store's export of the rating study (its Parquet read back), or rows
            with :data:`~concept_grounding.loaders.ratings.RATING_COLUMNS` (:func:`simulate_ratings`').
        metrics: metric name (:data:`METRICS`: ``"ccd"``, ``"dino"``, ``"clip"``) ->
            ``{learner: {task: value}}`` (e.g. ``results.json``'s ``table1`` and ``baselines.dino``).

    Returns:
        ``{"table3": {metric: r}, "per_task": {task: {"human": {learner: mean}, "r": {metric: r}}},
        "mean_scores": {learner: {task: mean}}, "n": {metric: cells}}``. The mean human score
        of a learner on a task is the mean over its items of each item's mean rating. ``table3``'s
        r is over learners pooled over tasks: every (learner, task) cell that has both a mean
        score and the metric is one point; ``per_task`` has r over the learners of one task
        (the paper's columns). ``None`` where fewer than 3 cells or a constant side.
    """
    frame = _frame(ratings)
    per_item = frame.groupby(["learner", "task", "item"])["rating"].mean()
    means = per_item.groupby(["learner", "task"]).mean()
    scores: dict[str, dict[str, float]] = {}
    for (learner, task), value in means.items():
        scores.setdefault(str(learner), {})[str(task)] = float(value)
    tasks = sorted({t for row in scores.values() for t in row})
    out: dict[str, Any] = {"table3": {}, "n": {}, "mean_scores": scores, "per_task": {}}
    for name, metric in metrics.items():
        xs, ys = _cells(metric, scores)
        out["table3"][name], out["n"][name] = pearson_r(xs, ys), len(xs)
    for task in tasks:
        human = {learner: row[task] for learner, row in scores.items() if task in row}
        out["per_task"][task] = {
            "human": human,
            "r": {name: pearson_r(*_cells(metric, scores, task)) for name, metric in metrics.items()},
        }
    return out
