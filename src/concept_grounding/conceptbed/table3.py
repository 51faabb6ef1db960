"""Table 3 inside a ``conceptbed`` run: rating items, ratings (people's or simulated), correlations.

Every run collects **rating items** (ConceptBed App. G; :mod:`.human_ratings`): per learner, task and
concept, :data:`ITEMS_PER_CONCEPT` generated images each with three real images of the concept
(concept similarity), and for the compositions one image per prompt with its caption (image-text
alignment, ``V*`` read as ``bird``). ``save`` writes them as the folder ``annotate --items``
serves to people. Table 3 then comes from:

* ``--ratings FILE``: people's ratings (the Parquet ``annotate --export`` writes), or else
* **simulated raters** (:func:`~.human_ratings.simulate_ratings`, ``k = 3``, noise 0.5; through the study store
  and the one simulator of ``annotate --simulate``): each rating
  follows an *instrument's* probability that the image shows what was asked: Table 8's other
  capacity of the species oracle (or the task's own oracle where there is one capacity) for
  concept similarity, the VQA oracle's mean P(yes) of the composition questions for alignment.
  Such a Table 3 measures how the metrics agree with that instrument, **not with people**; the
  report says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..loaders.ratings import REFERENCES
from .human_ratings import table3

__all__ = ["ITEMS_PER_CONCEPT", "RatingCollector", "references", "table3_markdown"]

#: Generated images per learner, task and concept that become concept-similarity items.
ITEMS_PER_CONCEPT = 2
#: Simulated raters per item and their rating noise (1-5 scale).
SIMULATED_RATERS, SIMULATED_NOISE = 3, 0.5


@dataclass
class RatingCollector:
    """The rating records of a run and the truth the simulated raters follow (module docstring)."""

    records: list[dict[str, Any]] = field(default_factory=list)

    def add_concept(
        self, learner: str, task: str, concept: Any, images: np.ndarray, truth: Callable[[np.ndarray], np.ndarray]
    ) -> None:
        """Concept-similarity items: the first :data:`ITEMS_PER_CONCEPT` of ``images`` against
        :func:`references` of ``concept``; ``truth(images) -> (N,)`` in [0, 1]."""
        chosen = images[:ITEMS_PER_CONCEPT]
        refs = references(concept)
        for image, t in zip(chosen, truth(chosen)):
            self.records.append(
                {
                    "image": np.asarray(image),
                    "learner": learner,
                    "task": task,
                    "concept": concept.name,
                    "kind": "concept",
                    "references": refs,
                    "truth": float(np.clip(t, 0, 1)),
                }
            )

    def add_caption(self, learner: str, concept: str, prompt: str, image: np.ndarray, truth: float | None) -> None:
        """One image-text alignment item of the compositions (its caption: ``prompt`` with V* as bird)."""
        if truth is None or not np.isfinite(truth):
            return
        self.records.append(
            {
                "image": np.asarray(image),
                "learner": learner,
                "task": "composition",
                "concept": concept,
                "kind": "caption",
                "caption": prompt.replace("V*", "bird"),
                "truth": float(np.clip(truth, 0, 1)),
            }
        )

    def ratings(self, path: str | None, seed: int) -> tuple[Any, str]:
        """(rating rows, who rated): the Parquet at ``path`` (people), else simulated raters."""
        if path is not None:
            from ..loaders.ratings import read_ratings

            return read_ratings(path), f"people ({path})"
        from ..loaders.ratings import RatingItem
        from .human_ratings import simulate_ratings

        items = [
            RatingItem(f"r{i}", r["kind"], r["learner"], r["task"], r["concept"], f"r{i}.png")
            for i, r in enumerate(self.records)
        ]
        truth = {f"r{i}": r["truth"] for i, r in enumerate(self.records)}
        rows = simulate_ratings(items, SIMULATED_RATERS, SIMULATED_NOISE, seed, lambda it: truth[it.id])
        return rows, (
            f"SIMULATED raters ({SIMULATED_RATERS} per item, noise {SIMULATED_NOISE}) following the oracles' "
            "probabilities: agreement between instruments, not people"
        )

    def table(self, results: dict[str, Any], path: str | None, seed: int) -> dict[str, Any]:
        """``table3`` (Pearson r of CCD, DINO, CLIPScore with the mean rating over learner x task
        cells), ``per_task``, ``mean_scores``, ``n`` and ``raters``."""
        metrics: dict[str, dict[str, dict[str, float]]] = {
            "ccd": {l: dict(row) for l, row in results["table1"].items()},
            "dino": {l: dict(row) for l, row in results["baselines"]["dino"].items()},
            "clip": {},
        }
        for learner, row in results.get("table2", {}).items():
            ccd = [c["ccd"] for c in row.values() if c["ccd"] is not None]
            clip = [c["clip"] for c in row.values() if c["clip"] is not None]
            if ccd:
                metrics["ccd"].setdefault(learner, {})["composition"] = float(np.mean(ccd))
            if clip:
                metrics["clip"].setdefault(learner, {})["composition"] = float(np.mean(clip))
        rows, raters = self.ratings(path, seed)
        return {**table3(rows, metrics), "raters": raters}

    def save(self, out: Path) -> Path | None:
        """Write the items folder ``out`` (``annotate --items out``); ``None`` without records."""
        from .human_ratings import export_rating_items

        return export_rating_items(out, self.records) if self.records else None


def references(concept: Any) -> list[np.ndarray]:
    """The real images of ``concept`` shown beside its items (App. G: three): its held-out real
    images first, then its training images where it holds fewer (a concept folder's small concept).

    Raises:
        ValueError: the concept has fewer than :data:`~concept_grounding.loaders.ratings.REFERENCES`
            real and training images together.
    """
    refs = [np.asarray(r) for r in (*concept.real, *concept.train)][:REFERENCES]
    if len(refs) < REFERENCES:
        raise ValueError(
            f"concept {concept.name!r}: a rating item shows {REFERENCES} real images, it has {len(refs)} in all"
        )
    return refs


def table3_markdown(t3: dict[str, Any]) -> list[str]:
    """Report lines of Table 3."""

    def r(v: float | None) -> str:
        return "-" if v is None else f"{v:+.2f}"

    tasks = list(t3["per_task"])
    lines = [
        "",
        "## Table 3: the metrics against the mean rating (Pearson r over learner x task cells)",
        "",
        f"Raters: {t3['raters']}.",
        "",
        "| | " + " | ".join(tasks) + " | pooled |",
        "|---" * (len(tasks) + 2) + "|",
    ]
    for metric, pooled in t3["table3"].items():
        lines.append(
            f"| {metric} | " + " | ".join(r(t3["per_task"][t]["r"].get(metric)) for t in tasks) + f" | {r(pooled)} |"
        )
    lines += [
        "",
        "Mean rating per learner and task:",
        "",
        "| | " + " | ".join(tasks) + " |",
        "|---" * (len(tasks) + 1) + "|",
    ]
    for learner, row in t3["mean_scores"].items():
        lines.append(f"| {learner} | " + " | ".join("-" if t not in row else f"{row[t]:.2f}" for t in tasks) + " |")
    lines += ["", "CCD is lower-is-better, so agreement shows as a negative r (ConceptBed: -0.93 to -0.99)."]
    return lines
