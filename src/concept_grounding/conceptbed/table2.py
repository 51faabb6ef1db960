"""Table 2 inside a ``conceptbed`` run: every learner's object concepts composed and judged.

:class:`CompositionRun` is set up once per run (the VQA judge validated on exact world drawings
of every composition of the run's object concepts, printed beside the table), then scores each
fitted learner on each concept's composition prompts (:func:`~.compositions.concept_prompts`):
the four diffusers learners through their own ``generate``, the **Original** row with the
world's exact drawings of each prompt, **another species** with another species' drawings, and
the **Base model** (the untouched world Flux with ``V*`` read as ``bird``). CLIPScore is the
composition CLIP's (:mod:`.composition_clip`, validated on held-out compositions: its model
card), which reads counts, relations and actions; the Explain tab's world CLIP knows none of
their words and scored every composition prompt 0. Each cell's bootstrap 95 % interval over concepts and images:
:func:`table2_intervals` (:mod:`.intervals`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .compositions import (
    CATEGORIES,
    VQA_BAR,
    CompositionScores,
    VQAJudge,
    clip_scores,
    concept_prompts,
    questions_of,
    real_images,
    table2,
)
from .concepts import Concept, ConceptWorld
from .intervals import BOOT, Group, bootstrap_interval

__all__ = ["CompositionRun", "table2_intervals"]

logger = logging.getLogger(__name__)
#: The Table 2 row of the untouched generator.
BASE_MODEL = "Base model"


@dataclass
class CompositionRun:
    """State of Table 2 in one run (see the module docstring)."""

    cw: ConceptWorld
    vqa: VQAJudge
    per_prompt: int
    seed: int
    model: str | None = None
    scores: dict[str, CompositionScores] = field(default_factory=dict)
    sheet: list[tuple[str, np.ndarray]] = field(default_factory=list)
    clip: Any = None
    base: Any = None
    based: set = field(default_factory=set)
    ratings: Any = None  # a RatingCollector: the first image of each prompt becomes an alignment item
    #: learner -> category -> concept -> ``(n, 1 + questions + 1)`` rows: P(yes) of each question, then CLIPScore
    by_concept: dict[str, dict[str, dict[str, list[np.ndarray]]]] = field(default_factory=dict)

    @classmethod
    def setup(
        cls,
        cw: ConceptWorld,
        concepts: list[Concept],
        species_judge: Any,
        images: int,
        seed: int,
        model: str | None = None,
        ratings: Any = None,
    ) -> CompositionRun:
        """Load the VQA judge's judges and the composition CLIP (Table 2's CLIPScore), and validate
        the VQA judge on ``concepts``."""
        from ..judge import create_judge
        from .composition_clip import load_composition_clip

        vqa = VQAJudge(create_judge("composition-judge"), create_judge("world-judge"), species_judge)
        logger.info("%s", vqa.validate(cw.world, [c.label for c in concepts]))
        run = cls(cw, vqa, per_prompt=max(1, images // 8), seed=seed, model=model, ratings=ratings)
        run.clip = load_composition_clip()
        return run

    def _images(self, name: str, learner: Any, concept: Concept, rows: list) -> np.ndarray:
        """``(len(rows) * per_prompt, S, S, 3)`` images of the prompts ``rows``, prompt-major."""
        world, k = self.cw.world, self.per_prompt
        if name in ("Original", "exact", "another species"):
            label = concept.label if name != "another species" else learner.other_label(concept)
            return np.concatenate([real_images(world, label, p, a, k, offset=self.seed) for _, p, a in rows])
        prompts = [p for _, p, _ in rows]
        images = learner.generate(prompts, len(prompts) * k, self.seed)  # image i answers prompts[i % len(prompts)]
        order = [i * len(prompts) + j for j in range(len(prompts)) for i in range(k)]
        return images[order]

    def score(self, name: str, learner: Any, concept: Concept) -> None:
        """Score ``learner`` (fitted on ``concept``) on every composition of ``concept``; the
        first call per concept also scores the base model."""
        rows = concept_prompts(self.cw.world, concept.label)
        self._add(name, self._images(name, learner, concept, rows), rows, concept)
        if name not in ("Original", "exact", "another species") and concept.name not in self.based:
            self.based.add(concept.name)
            self._add(BASE_MODEL, self._images(BASE_MODEL, self._base_learner(learner), concept, rows), rows, concept)

    def _base_learner(self, learner: Any) -> Any:
        """The untouched generator of ``learner`` (its base pipeline, ``V*`` read as ``bird``)."""
        from dataclasses import replace

        if self.base is None:
            self.base = replace(learner, token="bird", pipe=None)
            self.base.pipe = self.base.base_pipeline()
        return self.base

    def _add(self, name: str, images: np.ndarray, rows: list, concept: Concept) -> None:
        scores = self.scores.setdefault(name, CompositionScores.empty())
        k, valid = self.per_prompt, self.vqa.valid_kinds()
        for j, ((category, prompt, _), qs) in enumerate(zip(rows, questions_of([p for _, p, _ in rows]))):
            block = images[j * k : (j + 1) * k]
            p = self.vqa.p_yes(block, qs, concept.label, self.cw.world)
            p[:, [i for i, q in enumerate(qs) if q.kind not in valid]] = np.nan  # unvalidated kinds: no verdict
            clip = clip_scores(self.clip, block, [prompt] * len(block))
            scores.add(category, p, clip)
            per_concept = self.by_concept.setdefault(name, {}).setdefault(category, {})
            per_concept.setdefault(concept.name, []).append(np.column_stack([p, clip]).astype(np.float64))
            if self.ratings is not None and p.shape[1] > 1 and not np.isnan(p[0, 1:]).all():
                self.ratings.add_caption(name, concept.name, prompt, block[0], float(np.nanmean(p[0, 1:])))
        if not any(label.startswith("composition:") and label.endswith(name) for label, _ in self.sheet):
            self.sheet.append((f"composition: {name}", images[:: max(1, len(images) // 8)][:8]))

    def results(self) -> dict[str, Any]:
        """``table2``, ``oracles.vqa`` (per question kind and its minimum) and the categories."""
        val = dict(self.vqa.validation.accuracy) if self.vqa.validation else {}
        composition_kinds = {k: v for k, v in val.items() if k != "concept"}
        return {
            "table2": table2(self.scores),
            "table2_intervals": table2_intervals(self.by_concept, seed=self.seed),
            "table2_categories": list(CATEGORIES),
            "vqa": {
                "accuracy": min(composition_kinds.values()) if composition_kinds else None,
                "per_question": val,
                "bar": VQA_BAR,
            },
        }


def _answered(rows: np.ndarray) -> np.ndarray:
    """The composition questions' P(yes) of ``rows`` (the concept question and CLIPScore left out)."""
    return rows[:, 1:-1]


def _p_yes(rows: np.ndarray) -> float:
    q = _answered(rows)
    return float(np.nanmean(q)) if (~np.isnan(q)).any() else float("nan")


def _table2_ccd(groups: Sequence[Group]) -> float:
    """Table 2's CCD (the reference's pooled mean P(yes) minus the learner's) of groups ``(learner, reference)``."""
    return _p_yes(np.concatenate([g[1] for g in groups])) - _p_yes(np.concatenate([g[0] for g in groups]))


def _table2_accuracy(groups: Sequence[Group]) -> float:
    q = _answered(np.concatenate([g[0] for g in groups]))
    return float(np.nanmean(np.where(np.isnan(q), np.nan, q > 0.5))) if (~np.isnan(q)).any() else float("nan")


def _table2_clip(groups: Sequence[Group]) -> float:
    return float(np.concatenate([g[0] for g in groups])[:, -1].mean())


def _cell(value: list[float]) -> list[float] | None:
    return None if np.isnan(value).any() else value


def table2_intervals(
    by_concept: dict[str, dict[str, dict[str, list[np.ndarray]]]],
    reference: str = "Original",
    boot: int = BOOT,
    seed: int = 0,
) -> dict[str, dict[str, dict[str, list[float] | None]]]:
    """``[learner][category]`` = ``{"clip", "accuracy", "ccd"}``: ``[lo, hi]`` 95 % bootstrap intervals over
    concepts and images (:func:`~.intervals.bootstrap_interval`; the reference's images of a drawn concept are
    resampled beside the learner's), ``None`` where the cell has no value (no reference, no answered question)."""
    ref = by_concept.get(reference, {})
    out: dict[str, dict[str, dict[str, list[float] | None]]] = {}
    for learner, categories in by_concept.items():
        out[learner] = {}
        for category, concepts in categories.items():
            own = [(np.concatenate(rows),) for rows in concepts.values()]
            cell: dict[str, list[float] | None] = {
                "clip": _cell(list(bootstrap_interval(own, _table2_clip, boot, seed))),
                "accuracy": _cell(list(bootstrap_interval(own, _table2_accuracy, boot, seed))),
                "ccd": None,
            }
            theirs = ref.get(category, {})
            if all(name in theirs for name in concepts):
                pairs = [(np.concatenate(rows), np.concatenate(theirs[name])) for name, rows in concepts.items()]
                cell["ccd"] = _cell(list(bootstrap_interval(pairs, _table2_ccd, boot, seed)))
            out[learner][category] = cell
    return out


def table2_markdown(results: dict[str, Any]) -> list[str]:
    """Report lines of Table 2 (CLIPScore, VQA accuracy, CCD per learner and category, each with its bootstrap
    interval where the run has one; the concept question's P(yes)) with the VQA judge's validation beside it."""

    def cell(v: float | None, fmt: str, interval: list[float] | None = None) -> str:
        if v is None:
            return "-"
        return (
            fmt.format(v)
            if interval is None
            else f"{fmt.format(v)} [{fmt.format(interval[0])}, {fmt.format(interval[1])}]"
        )

    cats = results["table2_categories"]
    vqa = results["oracles"]["vqa"]
    bounds = results.get("intervals", {}).get("table2", {})
    lines = [
        "",
        "## Table 2: compositional reasoning (CLIPScore / VQA accuracy / CCD; V*: an object concept)",
        "",
        "| | " + " | ".join(cats) + " | concept P(yes) |",
        "|---" * (len(cats) + 2) + "|",
    ]
    for learner, row in results["table2"].items():
        own = bounds.get(learner, {})
        cells = [
            " / ".join(
                cell(row[c][metric], fmt, own.get(c, {}).get(metric))
                for metric, fmt in (("clip", "{:.1f}"), ("accuracy", "{:.2f}"), ("ccd", "{:+.3f}"))
            )
            for c in cats
        ]
        concept = [row[c]["concept"] for c in cats if row[c]["concept"] is not None]
        lines.append(
            f"| {learner} | " + " | ".join(cells) + f" | {cell(np.mean(concept) if concept else None, '{:.2f}')} |"
        )
    val = ", ".join(f"{k} {100 * v:.1f} %" for k, v in vqa["per_question"].items())
    lines += [
        "",
        f"VQA oracle validation on the world's exact drawings of every prompt (P(yes) > 0.5; bar "
        f"{100 * vqa['bar']:.0f} %, questions below it are left out, '-'): {val}.",
        "",
        "CLIPScore: 100 * max(cos, 0) of the composition CLIP (assets/composition_clip; its held-out "
        "validation per category in its model card), V* read as 'bird'.",
    ]
    return lines
