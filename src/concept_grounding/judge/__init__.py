"""Grounded judges of the bird world and their validation on exact counterfactuals.

A judge names a generated bird's species and the attributes it shows; SUB's substitution
verdicts (S+ found, S- removed, species kept) are only as good as it is. This package trains
one on renders whose attributes vary independently of the species (:mod:`.data`,
:mod:`.model`), validates any judge on the world's exact edits before its verdicts are used
(:mod:`.validation`), and measures a VQA filter's scorer the same way (:mod:`.scorer`).

The data and validation modules need only numpy; the model (torch) and the scorer check
load on first attribute access.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .data import EditSet, JudgeSet, exact_edits, judge_training_set, typical_renders
from .validation import JUDGE_BARS, JudgeValidation, validate_judge

_LAZY = {
    "WorldJudge": ".model",
    "train_judge": ".model",
    "judge_images": ".model",
    "load_world_judge": ".model",
    "shipped_judge": ".model",
    "ScorerValidation": ".scorer",
    "validate_scorer_on_world": ".scorer",
}

__all__ = ["EditSet", "JudgeSet", "exact_edits", "judge_training_set", "typical_renders", "JUDGE_BARS",
           "JudgeValidation", "validate_judge", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
