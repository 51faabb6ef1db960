"""The three steps of SUB's candidate selection (:mod:`.candidates`) on given inputs, and their
reports: classes (:func:`class_candidates`, :func:`write_class_report`), attributes
(:func:`attribute_candidates`, :func:`write_attribute_report`) and the plan
(:func:`plan_candidates`, :func:`write_plan_report`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError, read_text_file
from ..fileio import markdown_table, write_report
from ..tdg.candidates import (
    MIN_ATTRIBUTE_ACCURACY,
    MIN_CLASS_ACCURACY,
    THRESHOLD_GRID,
    AttributeSelection,
    ClassSelection,
    attribute_probabilities,
    candidate_pairings,
    select_attributes,
    select_classes,
)
from ..tdg.plan import write_pairings
from ..vocabulary import Vocabulary, load_vocabulary
from .candidate_inputs import Classifier

__all__ = [
    "AttributeRun",
    "CandidatePlan",
    "class_candidates",
    "write_class_report",
    "attribute_candidates",
    "write_attribute_report",
    "plan_candidates",
    "write_plan_report",
]


def class_candidates(
    images: Sequence[Any],
    labels: np.ndarray,
    class_names: Sequence[str],
    classifier: Classifier,
    min_accuracy: float = MIN_CLASS_ACCURACY,
    batch_size: int = 64,
    progress: bool = True,
) -> ClassSelection:
    """Classify the ``N`` images in batches of ``batch_size`` and select the classes the classifier
    names at ``min_accuracy`` (``labels``: ``(N,)`` class indices into ``class_names``)."""
    from tqdm.auto import tqdm

    predicted = []
    for start in tqdm(range(0, len(images), batch_size), desc="classify", unit="batch", disable=not progress):
        predicted.append(np.asarray(classifier(images[start : start + batch_size]), dtype=np.int64))
    return select_classes(labels, np.concatenate(predicted), class_names, min_accuracy)


def _count_range(counts: np.ndarray) -> str:
    """``"20"`` when every count is 20, else ``"18-20"``.

    >>> _count_range(np.array([20, 20])), _count_range(np.array([20, 18]))
    ('20', '18-20')
    """
    lo, hi = int(np.min(counts)), int(np.max(counts))
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def write_class_report(selection: ClassSelection, out: str | Path) -> Path:
    """``classes.json`` and ``classes.md`` (per-class images, accuracy, kept) under ``out``; returns ``classes.md``."""
    rows = [
        [c, int(n), f"{a:.3f}", "yes" if c in selection.kept else "no"]
        for c, n, a in zip(selection.class_names, selection.counts, selection.accuracy)
    ]
    lines = [
        "# Candidate classes (SUB Sec. 4.2)",
        "",
        f"{len(selection.kept)} of {len(selection.class_names)} classes kept: the classifier named at least "
        f"{selection.min_accuracy:.0%} of each one's {_count_range(selection.counts)} images.",
        "",
        markdown_table(["class", "images", "accuracy", "kept"], rows, align="lrrl"),
    ]
    return write_report(
        out,
        selection.to_dict(),
        "\n".join(lines) + "\n",
        results_name="classes.json",
        report_name="classes.md",
        nan_as_null=False,
    )[1]


@dataclass(frozen=True)
class AttributeRun:
    """What :func:`attribute_candidates` measured: the selection and the answer probabilities."""

    selection: AttributeSelection
    probabilities: np.ndarray


def attribute_candidates(
    images: Sequence[Any],
    labels: np.ndarray,
    scorer: Any,
    attributes: Sequence[str] | None = None,
    thresholds: Sequence[float] = THRESHOLD_GRID,
    min_accuracy: float = MIN_ATTRIBUTE_ACCURACY,
    metric: str = "balanced",
    batch_size: int = 64,
    progress: bool = True,
    vocab: Vocabulary | None = None,
) -> AttributeRun:
    """Ask the scorer every group's question and select the attributes (nothing is written).

    Args:
        images, labels: N images and their ``(N, 312)`` per-image labels.
        attributes: the attributes to assess (default: all 312, the paper's 28 groups).
    """
    vocab = vocab or load_vocabulary()
    attributes = list(attributes) if attributes else list(vocab.attributes)
    labels = np.asarray(labels)
    if labels.shape != (len(images), vocab.num_attributes):
        raise ValueError(f"labels must be ({len(images)}, {vocab.num_attributes}), got {labels.shape}")
    columns = [vocab.attribute_index(a) for a in attributes]
    probs = attribute_probabilities(scorer, images, attributes, vocab, batch_size, progress)
    selection = select_attributes(probs, labels[:, columns], attributes, thresholds, min_accuracy, metric)
    return AttributeRun(selection, probs)


def write_attribute_report(selection: AttributeSelection, out: str | Path) -> Path:
    """``attributes.json``, ``attributes.md`` (per-attribute best threshold and accuracy) and
    ``attributes.png`` (each attribute's best accuracy against the bar, and accuracy over
    the threshold grid); returns the folder."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    kept = set(selection.kept)
    best_t, best_a = selection.best_threshold, selection.best_accuracy
    rows = [
        [a, int(n), f"{t:.2f}", "n/a" if not np.isfinite(b) else f"{b:.3f}", "yes" if a in kept else "no"]
        for a, n, t, b in zip(selection.attributes, selection.positives, best_t, best_a)
    ]
    lines = [
        "# Candidate attributes (SUB Sec. 4.2)",
        "",
        f"{len(kept)} of {len(selection.attributes)} attributes kept: {selection.metric} accuracy >= "
        f"{selection.min_accuracy:.0%} at the best answer-probability threshold of "
        f"{', '.join(f'{t:.2f}' for t in selection.thresholds)} ({selection.images} images).",
        "",
        markdown_table(["attribute", "images with it", "best threshold", "accuracy", "kept"], rows, align="lrrrl"),
    ]
    write_report(
        out,
        selection.to_dict(),
        "\n".join(lines) + "\n",
        results_name="attributes.json",
        report_name="attributes.md",
        nan_as_null=False,
    )
    _attribute_plot(selection, out / "attributes.png")
    return out


def _attribute_plot(selection: AttributeSelection, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    best = np.nan_to_num(selection.best_accuracy, nan=0.0)
    order = np.argsort(-best)
    fig = Figure(figsize=(11, 4), dpi=100)
    FigureCanvasAgg(fig)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    kept = np.isin(np.asarray(selection.attributes)[order], selection.kept)
    left.bar(np.arange(len(order)), best[order], color=np.where(kept, "tab:green", "tab:gray"), width=1.0)
    left.axhline(selection.min_accuracy, color="tab:red", lw=1, label=f"bar {selection.min_accuracy:.2f}")
    left.set(
        xlabel="attribute (sorted)",
        ylabel=f"{selection.metric} accuracy at best threshold",
        ylim=(0, 1.02),
        title=f"{len(selection.kept)} of {len(order)} attributes kept",
    )
    left.legend(loc="lower left")
    thresholds = np.asarray(selection.thresholds)
    for j in order[: min(12, len(order))]:
        right.plot(
            thresholds, selection.accuracy[j], marker=".", lw=1, label=selection.attributes[j].removeprefix("has_")[:28]
        )
    right.axhline(selection.min_accuracy, color="tab:red", lw=1)
    right.set(xlabel="answer-probability threshold", ylabel="accuracy", title="accuracy over the grid (top 12)")
    right.legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def _read_kept(path: str | Path, argument: str) -> list[str]:
    """The ``kept`` list of a ``classes.json`` / ``attributes.json`` (errors name the file)."""
    try:
        kept = json.loads(read_text_file(Path(path), argument=argument))["kept"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise UsageError(f"not a candidates report with a 'kept' list ({err})", argument=argument, file=path) from None
    if not kept:
        raise UsageError("keeps no candidate, so there is nothing to plan", argument=argument, file=path)
    return list(kept)


@dataclass(frozen=True)
class CandidatePlan:
    """What :func:`plan_candidates` planned: the kept classes and attributes, the pairings, and
    the shape / pattern attributes no class could guide."""

    classes: tuple[str, ...]
    attributes: tuple[str, ...]
    pairings: list
    unguided: tuple[str, ...]


def plan_candidates(
    classes_file: str | Path,
    attributes_file: str | Path,
    class_names: Sequence[str],
    class_attributes: np.ndarray,
    images_per_pairing: int | None = None,
    vocab: Vocabulary | None = None,
) -> CandidatePlan:
    """Kept classes (``classes_file``) x kept attributes (``attributes_file``) the class lacks by
    ``class_attributes`` (``(C, 312)``, rows in ``class_names`` order); nothing is written."""
    vocab = vocab or load_vocabulary()
    classes = _read_kept(classes_file, "--classes-file")
    attributes = _read_kept(attributes_file, "--attributes-file")
    missing = [c for c in classes if c not in set(class_names)]
    if missing:
        raise UsageError(f"{missing[:3]} not in the class table", argument="--classes-file", file=classes_file)
    pairings = candidate_pairings(classes, attributes, class_names, class_attributes, images_per_pairing, vocab=vocab)
    unguided = sorted(
        {p.target_attribute for p in pairings if p.guide_bird is None and not _is_colour(p.target_attribute, vocab)}
    )
    return CandidatePlan(tuple(classes), tuple(attributes), pairings, tuple(unguided))


def write_plan_report(plan: CandidatePlan, out: str | Path) -> Path:
    """``pairings.jsonl`` (read by ``generate --pairings``) and ``plan.md`` under ``out``; returns ``plan.md``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_pairings(plan.pairings, out / "pairings.jsonl")
    unguided = list(plan.unguided)
    lines = [
        "# Candidate plan (SUB Sec. 4.2)",
        "",
        f"{len(plan.classes)} classes x {len(plan.attributes)} attributes -> {len(plan.pairings)} pairings "
        f"(each class without S+ by its class-level labels; the paper: 33 x 45 -> 1,485).",
        "",
        f"Guide birds: App. B's where it lists one, else the first class showing S+ "
        f"({len(unguided)} shape / pattern attributes have none: {unguided[:5]})."
        if unguided
        else "Guide birds: App. B's where it lists one, else the first class showing S+; every shape / pattern "
        "attribute has one.",
        "",
        "Written: `pairings.jsonl` (read by `concept-grounding generate --pairings`).",
    ]
    (out / "plan.md").write_text("\n".join(lines) + "\n")
    return out / "plan.md"


def _is_colour(attribute: str, vocab: Vocabulary) -> bool:
    from ..tdg.prompts import attribute_category

    return attribute_category(attribute, vocab) == "colour"
