"""Judge validation on the world's exact truth: before a judge's verdicts go into a table,
measure them where the answer is known.

The judge here is any callable ``images -> (species (N,), attribute probabilities (N, 312))``
(:func:`~concept_grounding.judge.model.judge_images` of the registered ``world`` judge, or a
user's own); :meth:`WorldJudge.validate <concept_grounding.judge.model.WorldJudge.validate>`
sums it up as a :class:`~concept_grounding.judge.base.JudgeReport`. It is run on

* held-out **exact edits** of SUB pairings (:func:`~concept_grounding.judge.data.exact_edits`):
  S+ found (``p(S+) > 0.5``), S- removed (every removed value ``p <= 0.5``), species kept;
* held-out **ordinary renders**: species accuracy and balanced attribute accuracy (the mean
  over attribute columns of ``(TPR + TNR) / 2``, columns with both answers present),

per attribute group and overall, optionally after a transform (e.g. a VAE round trip).
Bars (:data:`JUDGE_BARS`): on raw edits S+ found, S- removed and species kept >= 95 %; on
renders balanced attribute accuracy and species >= 95 %. A group below a bar is reported and
left out of a substitution finding (:attr:`JudgeValidation.validated_groups`).

>>> import numpy as np
>>> rates = group_rates(np.array([1, 1, 0, 1.]), np.array(["a", "a", "b", "b"]))
>>> rates == {"a": 1.0, "b": 0.5}
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..fileio import markdown_table
from ..world import BirdWorld
from .data import VALIDATION_START, EditSet, JudgeSet, exact_edits, typical_renders

__all__ = ["Judge", "JUDGE_BARS", "JudgeValidation", "validate_judge", "substitution_verdicts", "verdict_caption"]

#: ``images -> (species (N,), attribute probabilities (N, 312))``.
Judge = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

#: The bars a judge must meet on raw images (docs/tdg_world/validation.md).
JUDGE_BARS: Mapping[str, float] = {
    "s_plus_found": 0.95, "s_minus_removed": 0.95, "species_kept": 0.95,
    "render_attributes": 0.95, "render_species": 0.95,
}  # fmt: skip
_EDIT_KEYS = ("s_plus_found", "s_minus_removed", "species_kept")
_GROUP_KEYS = ("s_plus_found", "s_minus_removed", "render_attributes")


def group_rates(values: np.ndarray, groups: np.ndarray) -> dict[str, float]:
    """Mean of ``values`` per group label."""
    return {str(g): float(np.mean(values[groups == g])) for g in np.unique(groups)}


def balanced_accuracy(probs: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per column ``(TPR + TNR) / 2`` of ``probs > 0.5`` against 0/1 ``truth``, both ``(N, A)``;
    nan where a column lacks positives or negatives.

    >>> balanced_accuracy(np.array([[0.9, 0.2], [0.1, 0.7], [0.2, 0.6]]), np.array([[1, 0], [0, 0], [0, 1]])).tolist()
    [1.0, 0.75]
    """
    pred, truth = probs > 0.5, truth.astype(bool)
    pos, neg = truth.sum(0), (~truth).sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpr = (pred & truth).sum(0) / pos
        tnr = (~pred & ~truth).sum(0) / neg
    out = (tpr + tnr) / 2
    out[(pos == 0) | (neg == 0)] = np.nan
    return out


def substitution_verdicts(
    species: np.ndarray, probs: np.ndarray, labels: np.ndarray, targets: np.ndarray, removed: Sequence[Sequence[int]]
) -> dict[str, np.ndarray]:
    """SUB's verdicts on N images meant to show species ``labels`` with S+ ``targets`` (CUB
    indices) and without the ``removed`` S- indices, from a judge's ``species`` ``(N,)`` and
    ``probs`` ``(N, 312)``: ``s_plus_found`` (p(S+) > 0.5), ``s_minus_removed`` (every S-
    p <= 0.5), ``species_kept``, ``success`` (S+ found and species kept), all bool ``(N,)``,
    and ``p_s_plus`` ``(N,)``.

    >>> v = substitution_verdicts(np.array([0, 1]), np.array([[0.9, 0.2], [0.4, 0.7]]), np.array([0, 0]),
    ...                           np.array([0, 0]), [(1,), (1,)])
    >>> v["success"].tolist(), v["s_minus_removed"].tolist()
    ([True, False], [True, False])
    """
    rows = np.arange(len(labels))
    p_plus = probs[rows, np.asarray(targets)]
    gone = np.array([all(probs[i, j] <= 0.5 for j in r) for i, r in enumerate(removed)], bool)
    kept = np.asarray(species) == np.asarray(labels)
    return {
        "s_plus_found": p_plus > 0.5,
        "s_minus_removed": gone,
        "species_kept": kept,
        "success": (p_plus > 0.5) & kept,
        "p_s_plus": p_plus,
    }


def verdict_caption(s_plus_found: bool, species_kept: bool | None = None) -> tuple[str, bool]:
    """The caption of one generated image and whether it is a success (S+ found and species
    kept), for :func:`~concept_grounding.plotting.verdict_sheet`; a guide image
    (``species_kept=None``) only needs S+.

    >>> verdict_caption(True, False)
    ('S+ found, species lost', False)
    >>> verdict_caption(False)
    ('S+ missing', False)
    """
    text = f"S+ {'found' if s_plus_found else 'missing'}"
    if species_kept is None:
        return text, bool(s_plus_found)
    return f"{text}, species {'kept' if species_kept else 'lost'}", bool(s_plus_found and species_kept)


def edit_verdicts(species: np.ndarray, probs: np.ndarray, edits: EditSet) -> dict[str, np.ndarray]:
    """:func:`substitution_verdicts` of exact edits."""
    return substitution_verdicts(species, probs, edits.labels, edits.targets, edits.removed)


@dataclass
class ConditionResult:
    """One condition (``"raw"`` or a transform's name): overall and per-group rates."""

    overall: dict[str, float]
    per_group: dict[str, dict[str, float]]


@dataclass
class JudgeValidation:
    """Validation of a judge: its conditions, the bars, and which groups pass them (raw)."""

    conditions: dict[str, ConditionResult]
    edits: int
    renders: int
    bars: Mapping[str, float] = field(default_factory=lambda: dict(JUDGE_BARS))

    @property
    def raw(self) -> ConditionResult:
        return self.conditions["raw"]

    @property
    def validated_groups(self) -> tuple[str, ...]:
        """Attribute groups whose raw S+ found, S- removed and render accuracy meet the bars
        (render accuracy counts where it was measured: a group whose columns all lack
        positives or negatives among the renders is judged on its edits)."""
        return tuple(
            g for g, r in self.raw.per_group.items() if all(r[k] >= self.bars[k] for k in _GROUP_KEYS if k in r)
        )

    @property
    def failures(self) -> list[str]:
        """The bars the raw judge misses overall (``"s_plus_found 0.812 < 0.95"``), species bars first."""
        out = []
        for key in ("species_kept", "render_species", "s_plus_found", "s_minus_removed", "render_attributes"):
            value = self.raw.overall[key]
            if not value >= self.bars[key]:
                out.append(f"{key} {value:.3f} < {self.bars[key]:.2f}")
        return out

    @property
    def supports_finding(self) -> bool:
        """True when a substitution table may be printed as a finding: the species bars are met
        and at least one attribute group passes every bar (only those groups are reported)."""
        r = self.raw.overall
        species_ok = (
            r["species_kept"] >= self.bars["species_kept"] and r["render_species"] >= self.bars["render_species"]
        )
        return bool(species_ok and self.validated_groups)

    def to_dict(self) -> dict:
        return {
            "edits": self.edits,
            "renders": self.renders,
            "bars": dict(self.bars),
            "validated_groups": list(self.validated_groups),
            "supports_finding": self.supports_finding,
            "failures": self.failures,
            "conditions": {k: {"overall": c.overall, "per_group": c.per_group} for k, c in self.conditions.items()},
        }

    def to_markdown(self) -> str:
        """The validation table: overall per condition, then per group (raw and others)."""
        names = list(self.conditions)
        keys = ("s_plus_found", "s_minus_removed", "species_kept", "render_attributes", "render_species")
        heads = ("S+ found", "S- removed", "species kept", "attributes (balanced, renders)", "species (renders)")
        lines = [
            f"Held-out exact edits: {self.edits}; ordinary renders: {self.renders}. Bars (raw): "
            + ", ".join(f"{h} >= {100 * self.bars[k]:.0f} %" for k, h in zip(keys, heads))
            + ".",
            "",
            markdown_table(
                ["condition", *heads],
                [[name, *(f"{100 * self.conditions[name].overall[k]:.1f} %" for k in keys)] for name in names],
            ),
        ]
        validated = set(self.validated_groups)
        group_rows = []
        for g in self.raw.per_group:
            cells = []
            for name in names:
                r = self.conditions[name].per_group.get(g, {})
                cells.append(" / ".join(f"{100 * r[k]:.0f}" if k in r else "-" for k in _GROUP_KEYS))
            group_rows.append([g, *cells, "yes" if g in validated else "**no**"])
        lines += [
            "",
            markdown_table(["group", *(f"{n}: S+ / S- / attributes" for n in names), "validated"], group_rows),
        ]
        verdict = (
            "passes: its verdicts may go into a table"
            if self.supports_finding and not self.failures
            else "meets the bars on the validated groups only"
            if self.supports_finding
            else "FAILS: " + "; ".join(self.failures)
        )
        return "\n".join(lines + ["", f"Judge {verdict}."])


def _condition(
    judge: Judge,
    edits: EditSet,
    renders: JudgeSet,
    transform: Callable[[np.ndarray], np.ndarray] | None,
    columns: Sequence[int],
    group_of: Callable[[int], str],
) -> ConditionResult:
    t = transform or (lambda x: x)
    species, probs = judge(t(edits.edited))
    v = edit_verdicts(species, probs, edits)
    r_species, r_probs = judge(t(renders.images))
    bal = balanced_accuracy(r_probs[:, columns], renders.attributes[:, columns])
    col_groups = np.array([group_of(c) for c in columns])
    overall = {k: float(np.mean(v[k])) for k in _EDIT_KEYS}
    overall["render_attributes"] = float(np.nanmean(bal))
    overall["render_species"] = float(np.mean(r_species == renders.labels))
    per_group: dict[str, dict[str, float]] = {}
    for k in _EDIT_KEYS:
        for g, rate in group_rates(v[k].astype(float), edits.groups).items():
            per_group.setdefault(g, {})[k] = rate
    for g in per_group:
        sel = bal[col_groups == g]
        if np.isfinite(sel).any():
            per_group[g]["render_attributes"] = float(np.nanmean(sel))
    return ConditionResult(overall, per_group)


def validate_judge(
    judge: Judge,
    world: BirdWorld,
    pairings: Sequence[tuple[str, str]] | None = None,
    per_pairing: int = 1,
    renders_per_class: int = 10,
    transforms: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None,
    start: int = VALIDATION_START,
) -> JudgeValidation:
    """Validate ``judge`` on held-out exact edits of ``pairings`` (default: every SUB pairing
    of ``world``) and ordinary renders, raw and after each of ``transforms`` (uint8
    ``(N, H, W, 3)`` -> same, e.g. ``{"VAE round trip": ...}``)."""
    pairings = list(pairings if pairings is not None else world.default_pairings())
    edits = exact_edits(world, pairings, per_pairing, start)
    renders = typical_renders(world, renders_per_class, start + 10_000)
    columns = list(world.rendered_attributes)
    conditions = {"raw": _condition(judge, edits, renders, None, columns, world.vocab.group_of)}
    for name, transform in (transforms or {}).items():
        conditions[name] = _condition(judge, edits, renders, transform, columns, world.vocab.group_of)
    return JudgeValidation(conditions, edits=len(edits), renders=len(renders))
