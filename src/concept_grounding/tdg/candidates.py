"""Candidate selection of SUB (Bader et al., Sec. 4.2): which reference birds and which
attributes enter the plan, before any TDG image is made.

Classes a classifier recognises on generated images (:func:`select_classes`), attributes a VQA
scorer answers well on real images at its best threshold (:func:`select_attributes`, balanced
accuracy by default: a *decision*), and every candidate class x attribute it lacks
(:func:`candidate_pairings`). The rules and why: docs/sub_curation.md.

>>> import numpy as np
>>> labels = np.array([[1], [1], [0], [0]], dtype=bool)
>>> probs = np.array([[0.9], [0.7], [0.65], [0.1]])
>>> threshold_accuracy(probs, labels, (0.6, 0.7, 0.8)).round(2).tolist()   # 0.7 separates them
[[0.75, 1.0, 0.75]]
>>> select_attributes(probs, labels, ["has_bill_shape::dagger"], thresholds=(0.6, 0.7, 0.8)).kept
('has_bill_shape::dagger',)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..vocabulary import Vocabulary, load_vocabulary, split_attribute
from .filter import group_options, vqa_question
from .plan import Pairing, plan_pairings

if TYPE_CHECKING:
    from .filter import OptionScorer

__all__ = [
    "THRESHOLD_GRID",
    "IMAGES_PER_CLASS",
    "MIN_CLASS_ACCURACY",
    "MIN_ATTRIBUTE_ACCURACY",
    "ClassSelection",
    "AttributeSelection",
    "select_classes",
    "threshold_accuracy",
    "select_attributes",
    "attribute_probabilities",
    "candidate_pairings",
    "guide_bird_for",
]

#: SUB Sec. 4.2: "optimizing the answer probability threshold between 60 % and 95 %" (step 0.05).
THRESHOLD_GRID: tuple[float, ...] = tuple(round(0.60 + 0.05 * i, 2) for i in range(8))
#: SUB Sec. 4.2: generated images per CUB class for class selection.
IMAGES_PER_CLASS = 20
#: SUB Sec. 4.2: a class is kept when the classifier names all its images.
MIN_CLASS_ACCURACY = 1.0
#: SUB Sec. 4.2: an attribute is kept at >= 90 % accuracy at its best threshold.
MIN_ATTRIBUTE_ACCURACY = 0.90
Metric = Literal["balanced", "accuracy"]


@dataclass(frozen=True)
class ClassSelection:
    """Per-class accuracy of the classifier on generated images, and the classes kept.

    Attributes:
        class_names: the C classes images were generated for.
        accuracy: ``(C,)`` share of each class's images the classifier named correctly.
        counts: ``(C,)`` images per class.
        min_accuracy: the bar (paper: 1.0).
    """

    class_names: tuple[str, ...]
    accuracy: np.ndarray
    counts: np.ndarray
    min_accuracy: float

    @property
    def kept(self) -> tuple[str, ...]:
        """Candidate classes, in ``class_names`` order."""
        return tuple(c for c, a in zip(self.class_names, self.accuracy) if a >= self.min_accuracy - 1e-12)

    def to_dict(self) -> dict[str, Any]:
        return {
            "min_accuracy": self.min_accuracy,
            "kept": list(self.kept),
            "classes": [
                {"class": c, "images": int(n), "accuracy": float(a), "kept": c in self.kept}
                for c, n, a in zip(self.class_names, self.counts, self.accuracy)
            ],
        }


def select_classes(
    true: Sequence[int] | np.ndarray,
    predicted: Sequence[int] | np.ndarray,
    class_names: Sequence[str],
    min_accuracy: float = MIN_CLASS_ACCURACY,
) -> ClassSelection:
    """Candidate reference classes (SUB Sec. 4.2).

    Args:
        true: ``(N,)`` class index (into ``class_names``) each image was generated for.
        predicted: ``(N,)`` the classifier's class index (any integer outside ``0..C-1`` is wrong).
        class_names: the C classes.
        min_accuracy: keep a class whose accuracy is at least this (in [0, 1]).
    Raises:
        ValueError: shapes differ, a true index is out of range, a class has no image, or
            ``min_accuracy`` is outside [0, 1].
    """
    true, predicted = np.asarray(true, dtype=np.int64), np.asarray(predicted, dtype=np.int64)
    n_classes = len(class_names)
    if true.shape != predicted.shape or true.ndim != 1:
        raise ValueError(f"true and predicted must be (N,) alike, got {true.shape} and {predicted.shape}")
    if not 0.0 <= min_accuracy <= 1.0:
        raise ValueError(f"min_accuracy must lie in [0, 1], got {min_accuracy}")
    if true.size and (true.min() < 0 or true.max() >= n_classes):
        raise ValueError(f"true: class indices must lie in 0..{n_classes - 1}")
    counts = np.bincount(true, minlength=n_classes)
    if (counts == 0).any():
        missing = [class_names[i] for i in np.flatnonzero(counts == 0)][:3]
        raise ValueError(f"true: no image of class(es) {missing}")
    correct = np.bincount(true, weights=(true == predicted).astype(np.float64), minlength=n_classes)
    return ClassSelection(tuple(class_names), correct / counts, counts, float(min_accuracy))


def threshold_accuracy(
    probabilities: np.ndarray,
    labels: np.ndarray,
    thresholds: Sequence[float] = THRESHOLD_GRID,
    metric: Metric = "balanced",
) -> np.ndarray:
    """Accuracy of "present iff answer probability >= t" per attribute and threshold.

    Args:
        probabilities: ``(N, A)`` the scorer's answer probability of each attribute.
        labels: ``(N, A)`` per-image 0/1 labels.
        thresholds: ``(T,)`` thresholds in [0, 1].
        metric: ``"balanced"`` (mean of TPR and TNR; docs/sub_curation.md) or ``"accuracy"``.
    Returns:
        ``(A, T)`` float64; ``nan`` for a balanced accuracy of an attribute whose labels are
        all 0 or all 1.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    t = np.asarray(thresholds, dtype=np.float64)
    if p.ndim != 2 or p.shape != y.shape:
        raise ValueError(f"probabilities and labels must be (N, A) alike, got {p.shape} and {y.shape}")
    if metric not in ("balanced", "accuracy"):
        raise ValueError(f"metric must be 'balanced' or 'accuracy', got {metric!r}")
    if t.ndim != 1 or not t.size or ((t < 0) | (t > 1)).any():
        raise ValueError(f"thresholds must be a non-empty list in [0, 1], got {list(thresholds)}")
    # (A, T) counts, one (N, A) comparison per threshold
    true_pos = np.stack([((p >= ti) & y).sum(axis=0) for ti in t], axis=1).astype(np.float64)
    pred_pos = np.stack([(p >= ti).sum(axis=0) for ti in t], axis=1).astype(np.float64)
    pos = y.sum(axis=0).astype(np.float64)[:, None]
    neg = p.shape[0] - pos
    true_neg = neg - (pred_pos - true_pos)
    if metric == "accuracy":
        return (true_pos + true_neg) / max(p.shape[0], 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = 0.5 * (true_pos / pos + true_neg / neg)
    score[((pos == 0) | (neg == 0)).repeat(t.size, axis=1)] = np.nan
    return score


@dataclass(frozen=True)
class AttributeSelection:
    """Per-attribute accuracy over the threshold grid, the best threshold, and the attributes kept.

    Attributes:
        attributes: the A attributes assessed.
        thresholds: the T thresholds.
        accuracy: ``(A, T)`` accuracy (``metric``) at each threshold.
        positives, images: ``(A,)`` images showing each attribute, and images in all.
        min_accuracy: the bar (paper: 0.90).
        metric: ``"balanced"`` or ``"accuracy"``.
    """

    attributes: tuple[str, ...]
    thresholds: tuple[float, ...]
    accuracy: np.ndarray
    positives: np.ndarray
    images: int
    min_accuracy: float
    metric: str

    @property
    def best_index(self) -> np.ndarray:
        """``(A,)`` column of the best threshold (the lowest among ties; 0 when not assessable)."""
        filled = np.where(np.isnan(self.accuracy), -np.inf, self.accuracy)
        return filled.argmax(axis=1)

    @property
    def best_threshold(self) -> np.ndarray:
        """``(A,)`` the threshold of the grid that maximises each attribute's accuracy."""
        return np.asarray(self.thresholds)[self.best_index]

    @property
    def best_accuracy(self) -> np.ndarray:
        """``(A,)`` the accuracy at that threshold (``nan``: not assessable)."""
        return self.accuracy[np.arange(len(self.attributes)), self.best_index]

    @property
    def kept(self) -> tuple[str, ...]:
        """Candidate attributes, in ``attributes`` order."""
        best = self.best_accuracy
        return tuple(a for a, b in zip(self.attributes, best) if np.isfinite(b) and b >= self.min_accuracy - 1e-12)

    def to_dict(self) -> dict[str, Any]:
        best_t, best_a, kept = self.best_threshold, self.best_accuracy, set(self.kept)
        return {
            "metric": self.metric,
            "min_accuracy": self.min_accuracy,
            "thresholds": list(self.thresholds),
            "images": self.images,
            "kept": list(self.kept),
            "attributes": [
                {
                    "attribute": a,
                    "positives": int(n),
                    "best_threshold": float(t),
                    "best_accuracy": None if not np.isfinite(b) else float(b),
                    "kept": a in kept,
                    "accuracy": [None if not np.isfinite(v) else float(v) for v in row],
                }
                for a, n, t, b, row in zip(self.attributes, self.positives, best_t, best_a, self.accuracy)
            ],
        }


def select_attributes(
    probabilities: np.ndarray,
    labels: np.ndarray,
    attributes: Sequence[str],
    thresholds: Sequence[float] = THRESHOLD_GRID,
    min_accuracy: float = MIN_ATTRIBUTE_ACCURACY,
    metric: Metric = "balanced",
) -> AttributeSelection:
    """Candidate attributes (SUB Sec. 4.2): accuracy at the best threshold of ``thresholds`` >= ``min_accuracy``.

    Args:
        probabilities, labels: ``(N, A)`` answer probabilities and per-image labels, columns
            in ``attributes`` order (see :func:`threshold_accuracy`).
        attributes: the A attribute names.
    """
    if not 0.0 <= min_accuracy <= 1.0:
        raise ValueError(f"min_accuracy must lie in [0, 1], got {min_accuracy}")
    accuracy = threshold_accuracy(probabilities, labels, thresholds, metric)
    if accuracy.shape[0] != len(attributes):
        raise ValueError(f"attributes: {len(attributes)} names for {accuracy.shape[0]} columns")
    y = np.asarray(labels).astype(bool)
    return AttributeSelection(
        tuple(attributes),
        tuple(float(t) for t in thresholds),
        accuracy,
        y.sum(axis=0),
        int(y.shape[0]),
        float(min_accuracy),
        metric,
    )


def attribute_probabilities(
    scorer: OptionScorer,
    images: Sequence[Any],
    attributes: Sequence[str],
    vocab: Vocabulary | None = None,
    batch_size: int = 64,
    progress: bool | Callable[[int], None] = False,
) -> np.ndarray:
    """The scorer's answer probability of every attribute on every image, ``(N, A)``.

    One multiple-choice question per group of ``attributes`` (SUB Sec. 4.2: the group's values
    and "Other"), asked of ``batch_size`` images per :meth:`~.filter.OptionScorer.score` call;
    each attribute's column is its option's probability.

    Args:
        images: N images (PIL, or whatever the scorer takes).
        progress: show a bar (``True``), or a callable given the images done per call.
    """
    vocab = vocab or load_vocabulary()
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    by_group: dict[str, list[int]] = {}
    for j, attribute in enumerate(attributes):
        by_group.setdefault(vocab.group_of(attribute), []).append(j)
    out = np.zeros((len(images), len(attributes)), dtype=np.float64)
    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(images) * len(by_group), desc="VQA answers", unit="img")
    for group, columns in by_group.items():
        options = group_options(group, vocab)
        question = vqa_question(group, options)
        picks = [options.index(split_attribute(attributes[j])[1].replace("_", " ")) for j in columns]
        for start in range(0, len(images), batch_size):
            batch = images[start : start + batch_size]
            probs = np.asarray(scorer.score(batch, question, options, group), dtype=np.float64)
            if probs.shape != (len(batch), len(options)):
                raise ValueError(
                    f"scorer: expected ({len(batch)}, {len(options)}) probabilities for group {group!r}, "
                    f"got {probs.shape}"
                )
            out[start : start + len(batch), columns] = probs[:, picks]
            if bar is not None:
                bar.update(len(batch))
            elif callable(progress):
                progress(len(batch))
    if bar is not None:
        bar.close()
    return out


def guide_bird_for(
    attribute: str, class_names: Sequence[str], class_attributes: np.ndarray, vocab: Vocabulary | None = None
) -> str | None:
    """The guide bird of a shape / pattern attribute (SUB App. B).

    App. B's bird where it lists one; otherwise the first class of ``class_names`` whose
    class-level labels show the attribute (its display name), so that every candidate
    attribute can be generated; ``None`` for colours (their guide is "bird") or when no
    class shows it.
    """
    from ..vocabulary import class_display_name
    from .prompts import attribute_category

    vocab = vocab or load_vocabulary()
    if attribute_category(attribute, vocab) == "colour":
        return None
    if attribute in vocab.sub_guidance_birds:
        return vocab.sub_guidance_birds[attribute]
    j = vocab.attribute_index(attribute)
    rows = np.flatnonzero(np.asarray(class_attributes)[:, j])
    return class_display_name(class_names[rows[0]]) if rows.size else None


def candidate_pairings(
    classes: Sequence[str],
    attributes: Sequence[str],
    class_names: Sequence[str],
    class_attributes: np.ndarray,
    images_per_pairing: int | None = None,
    guide_birds: Mapping[str, str] | None = None,
    vocab: Vocabulary | None = None,
) -> list[Pairing]:
    """Every candidate class x candidate attribute the class lacks (SUB Sec. 4.2: S+ != S-).

    Args:
        classes, attributes: the candidates (:attr:`ClassSelection.kept`, :attr:`AttributeSelection.kept`).
        class_names, class_attributes: the class table, ``(C, 312)`` 0/1 class-level labels.
        images_per_pairing: N written into each pairing (``None``: the generate run's).
        guide_birds: attribute -> guide bird; the rest from :func:`guide_bird_for`.
    Returns:
        pairings in class-major order, each with its S- and guide bird.
    """
    vocab = vocab or load_vocabulary()
    matrix = np.asarray(class_attributes)
    index = {c: i for i, c in enumerate(class_names)}
    unknown = [c for c in classes if c not in index]
    if unknown:
        raise ValueError(f"classes: {unknown[:3]} are not in the class table")
    rows = [index[c] for c in classes]
    guides = {a: (guide_birds or {}).get(a) or guide_bird_for(a, class_names, matrix, vocab) for a in attributes}
    planned = plan_pairings(list(classes), matrix[rows], list(attributes), vocab)
    return [
        Pairing(
            p.reference_class, p.target_attribute, p.removed_attributes, guides[p.target_attribute], images_per_pairing
        )
        for p in planned
    ]
