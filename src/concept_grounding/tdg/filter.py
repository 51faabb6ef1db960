"""The VQA filter of SUB (Bader et al.), Sec. 4.2, over a small scorer interface.

Each generated image is asked the multiple-choice question of its target attribute's
group::

    What type of {group} does this bird have? Please pick between A) {a1} B) {a2} ... X) Other

(options: every value of the group in CUB order, then "Other"). Images whose most
probable answer is not the target are discarded; the rest are ranked by the target's
probability and the top ``keep_fraction`` (10 %) of the *generated* count is kept
(50 of 500). A pairing with fewer correct images than that is dropped entirely.

:func:`select_pairing` is that rule as a pure function. Scorers turn images into option
probabilities (:mod:`.filter_scorers`): :class:`~.filter_scorers.VisionLanguageScorer` (a
transformers VLM's option-letter logits), :class:`~.filter_scorers.CLIPScorer` (a CLIP handle's
image-text similarity) and :class:`~.filter_scorers.AttributeJudgeScorer`
(any judge's per-attribute probabilities, e.g. the world judge; docs/judges.md).

>>> import numpy as np
>>> probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.7, 0.3]])
>>> select_pairing(probs, target=0, keep_fraction=0.5).tolist()   # keep 2 of 4, best first
[0, 3]
>>> select_pairing(probs, target=1, keep_fraction=0.5).tolist()   # only 1 correct < 2: dropped
[]
"""

from __future__ import annotations

import math
import string
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..fileio import markdown_table, write_report
from ..vocabulary import Vocabulary, load_vocabulary, split_attribute

__all__ = [
    "OptionScorer",
    "group_options",
    "vqa_question",
    "keep_count",
    "select_pairing",
    "filter_records",
    "write_filter_report",
    "REASONS",
    "image_reasons",
]

OTHER = "Other"


class OptionScorer(Protocol):
    """Maps N images and one multiple-choice question to (N, len(options)) probabilities."""

    def score(self, images: Sequence[Any], question: str, options: Sequence[str], group: str) -> np.ndarray: ...


def group_options(group: str, vocab: Vocabulary | None = None) -> list[str]:
    """Answer options of a group: its values (underscores as spaces), then ``"Other"``.

    >>> group_options("tail_pattern")
    ['solid', 'spotted', 'striped', 'multi-colored', 'Other']
    """
    vocab = vocab or load_vocabulary()
    return [v.replace("_", " ") for v in vocab.group_values(group)] + [OTHER]


def vqa_question(group: str, options: Sequence[str]) -> str:
    """SUB's multiple-choice question (Sec. 4.2), letters A, B, ...

    >>> vqa_question("eye_color", ["red", "black", "Other"])
    'What type of eye color does this bird have? Please pick between A) red B) black C) Other'
    """
    if len(options) > len(string.ascii_uppercase):
        raise ValueError(f"options: at most 26, got {len(options)}")
    choices = " ".join(f"{string.ascii_uppercase[i]}) {o}" for i, o in enumerate(options))
    return f"What type of {group.replace('_', ' ')} does this bird have? Please pick between {choices}"


def keep_count(num_generated: int, keep_fraction: float = 0.1) -> int:
    """Images kept per pairing: ``keep_fraction`` of those generated, rounded half up, >= 1.

    >>> keep_count(500), keep_count(20), keep_count(4)
    (50, 2, 1)
    """
    if not 0 < keep_fraction <= 1:
        raise ValueError(f"keep_fraction must lie in (0, 1], got {keep_fraction}")
    return max(1, math.floor(keep_fraction * num_generated + 0.5))


def select_pairing(
    probs: np.ndarray, target: int, keep_fraction: float = 0.1, eligible: np.ndarray | None = None
) -> np.ndarray:
    """Indices of the images SUB keeps for one pairing, best first (SUB Sec. 4.2).

    Args:
        probs: (N, K) option probabilities of the N generated images.
        target: column of the target answer.
        eligible: (N,) bool; images outside it never count as correct (e.g. another
            attribute changed, :func:`filter_records`' ``check_groups``). Default: all.
    Returns:
        the top ``keep_count(N)`` correctly answered images by target probability (ties by
        index), or an empty array when fewer than that many are correct.
    """
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or not 0 <= target < probs.shape[1]:
        raise ValueError(f"probs must be (N, K) with 0 <= target < K, got shape {probs.shape}, target {target}")
    answered = probs.argmax(axis=1) == target
    if eligible is not None:
        answered &= np.asarray(eligible, dtype=bool)
    correct = np.flatnonzero(answered)
    n_keep = keep_count(probs.shape[0], keep_fraction)
    if correct.size < n_keep:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((correct, -probs[correct, target]))
    return correct[order][:n_keep].astype(np.int64)


#: Why an image was kept or discarded (SUB Fig. 5; ``docs/sub_curation.md``), in the order the rule tests them.
REASONS: dict[str, str] = {
    "kept": "kept: S+ answered, ranked within the top keep_fraction",
    "other_changed": "discarded: S+ answered, but another checked attribute group left the reference's values",
    "no_change": "discarded: the answer is the reference's own value S- (no meaningful change)",
    "s_plus_not_seen": "discarded: another value of the group, or Other, answered (S+ not seen)",
    "low_rank": "discarded: S+ answered, but ranked below the top keep_fraction",
    "pairing_dropped": "discarded: S+ answered, but too few of the pairing's images were (pairing eliminated)",
}


def image_reasons(
    probs: np.ndarray, target: int, removed: Sequence[int], chosen: np.ndarray, other_changed: np.ndarray | None = None
) -> list[str]:
    """The :data:`REASONS` key of each of a pairing's N images (SUB Sec. 4.2, Fig. 5).

    Args:
        probs: (N, K) option probabilities; ``target`` the S+ column, ``removed`` the S- columns.
        chosen: :func:`select_pairing`'s kept indices.
        other_changed: (N,) bool, another checked group changed (default: none).

    >>> probs = np.array([[0.9, 0.1, 0.0], [0.2, 0.8, 0.0], [0.6, 0.4, 0.0], [0.1, 0.1, 0.8]])
    >>> image_reasons(probs, 0, [1], select_pairing(probs, 0, 0.25))
    ['kept', 'no_change', 'low_rank', 's_plus_not_seen']
    """
    answers = np.asarray(probs).argmax(axis=1)
    kept, dropped = {int(i) for i in chosen}, chosen.size == 0
    out = []
    for i, answer in enumerate(answers):
        if i in kept:
            out.append("kept")
        elif answer == target and other_changed is not None and other_changed[i]:
            out.append("other_changed")
        elif answer == target:
            out.append("pairing_dropped" if dropped else "low_rank")
        elif int(answer) in set(removed):
            out.append("no_change")
        else:
            out.append("s_plus_not_seen")
    return out


@dataclass
class FilterResult:
    """Outcome of the filter: kept records (with ``target_probability``), the report, and the
    evidence: one row per image, kept or not, with every answer and the reason (:data:`REASONS`)."""

    kept: list[dict]
    report: dict[str, Any]
    evidence: list[dict]


def filter_records(
    records: Sequence[dict],
    probs_for: Callable[[list[dict], str, list[str]], np.ndarray],
    keep_fraction: float = 0.1,
    vocab: Vocabulary | None = None,
    check_groups: Sequence[str] = (),
    class_values: Mapping[str, Collection[str]] | None = None,
) -> FilterResult:
    """Filter metadata records (``reference_class``, ``target_attribute``, ...) pairing by pairing.

    Args:
        records: one dict per generated image (``metadata.jsonl`` rows).
        probs_for: ``(records of one pairing, question, options) -> (N, K)`` probabilities.
        check_groups: other attribute groups to ask about too (default none: the paper's
            filter). An image whose answer in one of them is none of the reference class's
            class-level values there (``class_values``) has another attribute changed and is
            not kept (reason ``other_changed``); groups the class has no value in, and S+'s
            own group, are not asked.
        class_values: class -> its class-level attribute names (needed with ``check_groups``).
    """
    if check_groups and class_values is None:
        raise ValueError("class_values: needed with check_groups (the reference classes' class-level attributes)")
    vocab = vocab or load_vocabulary()
    by_pairing: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        by_pairing.setdefault((r["reference_class"], r["target_attribute"]), []).append(r)
    kept: list[dict] = []
    evidence: list[dict] = []
    pairings = []
    for (cls, attribute), rows in by_pairing.items():
        group, value = split_attribute(attribute)
        options = group_options(group, vocab)
        probs = np.asarray(probs_for(rows, vqa_question(group, options), options))
        target = options.index(value.replace("_", " "))
        checks = _other_answers(
            rows, probs_for, [g for g in check_groups if g != group], set((class_values or {}).get(cls, ())), vocab
        )
        changed = np.zeros(len(rows), dtype=bool)
        for answers, allowed in checks.values():
            changed |= ~np.isin(answers, list(allowed))
        chosen = select_pairing(probs, target, keep_fraction, eligible=~changed)
        n_correct = int((probs.argmax(axis=1) == target).sum())
        for i in chosen:
            kept.append({**rows[i], "target_probability": float(probs[i, target])})
        evidence += _evidence_rows(
            rows,
            probs,
            options,
            target,
            chosen,
            vocab,
            changed if checks else None,
            {g: answers for g, (answers, _) in checks.items()},
        )
        pairings.append(
            {
                "reference_class": cls,
                "target_attribute": attribute,
                "generated": len(rows),
                "correct": n_correct,
                "kept": int(chosen.size),
                "dropped": chosen.size == 0,
            }
        )
    per_attribute = Counter()
    for p in pairings:
        per_attribute[p["target_attribute"]] += p["kept"]
    report = {
        "keep_fraction": keep_fraction,
        "reasons": dict(Counter(e["reason"] for e in evidence)),
        "pairings": pairings,
        "kept_per_attribute": dict(sorted(per_attribute.items())),
        "total_generated": len(records),
        "total_kept": len(kept),
        "pairings_kept": sum(not p["dropped"] for p in pairings),
        "pairings_dropped": sum(p["dropped"] for p in pairings),
    }
    return FilterResult(kept, report, evidence)


def _other_answers(
    rows: list[dict],
    probs_for: Callable[[list[dict], str, list[str]], np.ndarray],
    groups: Sequence[str],
    values: set[str],
    vocab: Vocabulary,
) -> dict[str, tuple[np.ndarray, set[str]]]:
    """For each checked group the reference class has values in: ``(N,)`` answers (option
    texts) and the allowed answers (the class's values there)."""
    out = {}
    for group in groups:
        allowed = {split_attribute(a)[1].replace("_", " ") for a in values if split_attribute(a)[0] == group}
        if not allowed:
            continue
        options = group_options(group, vocab)
        answers = np.asarray(probs_for(rows, vqa_question(group, options), options)).argmax(axis=1)
        out[group] = (np.asarray(options, dtype=object)[answers], allowed)
    return out


def _evidence_rows(
    rows: list[dict],
    probs: np.ndarray,
    options: list[str],
    target: int,
    chosen: np.ndarray,
    vocab: Vocabulary,
    other_changed: np.ndarray | None = None,
    other_answers: Mapping[str, np.ndarray] | None = None,
) -> list[dict]:
    """One evidence row per image of a pairing: every option's probability, the answer, the
    rank of S+ among the images answering S+ (1 = best; ``None`` otherwise), the answers of
    the checked groups, kept, reason."""
    removed = [
        options.index(split_attribute(a)[1].replace("_", " "))
        for a in rows[0].get("removed_attributes", ())
        if split_attribute(a)[1].replace("_", " ") in options
    ]
    reasons = image_reasons(probs, target, removed, chosen, other_changed)
    answers = probs.argmax(axis=1)
    correct = np.flatnonzero(answers == target)
    order = correct[np.lexsort((correct, -probs[correct, target]))]
    rank = {int(i): r for r, i in enumerate(order, start=1)}
    return [
        {
            "file_name": row.get("file_name"),
            "reference_class": row["reference_class"],
            "target_attribute": row["target_attribute"],
            "answer": options[int(answers[i])],
            "answer_probability": float(probs[i, answers[i]]),
            "target_probability": float(probs[i, target]),
            "rank": rank.get(i),
            "kept": reasons[i] == "kept",
            "reason": reasons[i],
            "other_answers": {g: str(a[i]) for g, a in (other_answers or {}).items()},
            "probabilities": {o: float(p) for o, p in zip(options, probs[i])},
        }
        for i, row in enumerate(rows)
    ]


def filter_markdown(report: dict[str, Any]) -> str:
    """``filter_report.md``: the per-reason, per-pairing and per-attribute counts of ``report``
    (written with the JSON by :func:`~concept_grounding.fileio.write_report`)."""
    lines = [
        "# VQA filter report",
        "",
        f"Kept {report['total_kept']} of {report['total_generated']} images; "
        f"{report['pairings_kept']} pairings kept, {report['pairings_dropped']} dropped "
        f"(keep fraction {report['keep_fraction']}). Every image's answers and the reason it was kept or "
        "discarded: `filter_evidence.jsonl`; examples of each: `filter_sheet.png` (SUB Fig. 5).",
        "",
        markdown_table(
            ["reason", "images"], [[REASONS[r], report.get("reasons", {}).get(r, 0)] for r in REASONS], align="lr"
        ),
        "",
        markdown_table(
            ["reference class", "target attribute", "generated", "correct", "kept"],
            [
                [p["reference_class"], p["target_attribute"], p["generated"], p["correct"], p["kept"]]
                for p in report["pairings"]
            ],
            align="llrrr",
        ),
        "",
        markdown_table(["target attribute", "kept"], list(report["kept_per_attribute"].items()), align="lr"),
    ]
    return "\n".join(lines) + "\n"


def write_filter_report(report: dict[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``filter_report.json`` and ``filter_report.md`` (:func:`filter_markdown`) under ``out_dir``."""
    return write_report(
        out_dir,
        report,
        filter_markdown(report),
        results_name="filter_report.json",
        report_name="filter_report.md",
        nan_as_null=False,
    )
