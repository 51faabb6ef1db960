"""How trustworthy is a VQA filter's scorer? Measure it on the world's exact edits.

SUB keeps a generated image when a VLM answers the target attribute to its multiple-choice
question (:mod:`concept_grounding.tdg.filter`). Any :class:`~concept_grounding.tdg.filter.OptionScorer`
is asked that question here about held-out exact edits (S+ truly present) and their
unedited originals (S+ truly absent):

* **AUROC**: how often the scorer's probability of S+ ranks an edit above an original
  (0.5 = blind, 1 = perfect);
* **S+ accuracy**: how often S+ is the scorer's top answer on the edits (the filter's
  first condition for keeping an image);
* **false S+**: how often S+ is its top answer on the originals.

Per attribute group and overall.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image

from ..fileio import markdown_table
from ..tdg.filter import OptionScorer, group_options, vqa_question
from ..world import BirdWorld
from .data import VALIDATION_START, exact_edits
from .stats import auroc

__all__ = ["ScorerValidation", "validate_scorer_on_world"]


@dataclass
class ScorerValidation:
    """Overall and per-group ``auroc``, ``s_plus_accuracy`` and ``false_s_plus`` of a scorer."""

    overall: dict[str, float]
    per_group: dict[str, dict[str, float]]
    edits: int

    def to_dict(self) -> dict:
        return {"edits": self.edits, "overall": self.overall, "per_group": self.per_group}

    def to_markdown(self) -> str:
        rows = [(g, r) for g, r in self.per_group.items()] + [("**all**", self.overall)]
        table = markdown_table(
            ["group", "edits", "AUROC p(S+), edit vs original", "S+ top answer on edits", "S+ top answer on originals"],
            [
                [
                    g,
                    int(r["n"]),
                    f"{r['auroc']:.3f}",
                    f"{100 * r['s_plus_accuracy']:.1f} %",
                    f"{100 * r['false_s_plus']:.1f} %",
                ]
                for g, r in rows
            ],
        )
        return "\n".join([f"Scorer validated on {self.edits} held-out exact edits and their originals.", "", table])


def _rates(p_edit: np.ndarray, p_orig: np.ndarray, top_edit: np.ndarray, top_orig: np.ndarray) -> dict[str, float]:
    labels = np.r_[np.ones(len(p_edit), bool), np.zeros(len(p_orig), bool)]
    return {
        "n": float(len(p_edit)),
        "auroc": auroc(np.r_[p_edit, p_orig], labels),
        "s_plus_accuracy": float(np.mean(top_edit)),
        "false_s_plus": float(np.mean(top_orig)),
    }


def validate_scorer_on_world(
    scorer: OptionScorer,
    world: BirdWorld,
    pairings: Sequence[tuple[str, str]] | None = None,
    per_pairing: int = 1,
    start: int = VALIDATION_START,
) -> ScorerValidation:
    """Ask ``scorer`` SUB's question about exact edits of ``pairings`` (default: every SUB
    pairing of ``world``) and their originals; see the module docstring for the figures."""
    vocab = world.vocab
    edits = exact_edits(world, list(pairings if pairings is not None else world.default_pairings()), per_pairing, start)
    p_edit, p_orig = np.zeros(len(edits)), np.zeros(len(edits))
    top_edit, top_orig = np.zeros(len(edits), bool), np.zeros(len(edits), bool)
    for group in np.unique(edits.groups):
        rows = np.flatnonzero(edits.groups == group)
        options = group_options(str(group), vocab)
        question = vqa_question(str(group), options)
        column = np.array([list(vocab.groups[str(group)]).index(int(t)) for t in edits.targets[rows]])
        for images, p, top in ((edits.edited, p_edit, top_edit), (edits.original, p_orig, top_orig)):
            probs = np.asarray(scorer.score([Image.fromarray(images[i]) for i in rows], question, options, str(group)))
            p[rows] = probs[np.arange(len(rows)), column]
            top[rows] = probs.argmax(1) == column
    per_group = {
        str(g): _rates(
            p_edit[edits.groups == g],
            p_orig[edits.groups == g],
            top_edit[edits.groups == g],
            top_orig[edits.groups == g],
        )
        for g in np.unique(edits.groups)
    }
    return ScorerValidation(_rates(p_edit, p_orig, top_edit, top_orig), per_group, len(edits))
