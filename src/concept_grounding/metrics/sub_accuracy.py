"""SUB accuracy: s+ and s- on synthetic attribute substitutions.

Bader et al. (2025), "SUB: Benchmarking CBM Generalization via Synthetic Attribute
Substitutions", Sec. 5.5-5.6 (Tables 1-2) and App. F (random chance).

Each SUB image carries its reference class, the substituted-in target attribute S+
(present) and the removed attribute(s) S- (absent).

* ``mode="binary"`` (CBM, CEM, probes): ``scores`` are concept probabilities.
  ``s+`` = fraction of images with ``P(S+) > 0.5``; ``s-`` = fraction of
  (image, removed attribute) pairs with ``P(S-) <= 0.5``. Only attributes among the
  model's ``concept_names`` count (CBM-112 and SUB share 17); the others are skipped
  and counted. Random chance is 50 % for both.
* ``mode="group"`` (CLIP-like, open vocabulary): ``scores`` are image-text
  similarities over vocabulary attributes. Within S+'s attribute group (every column
  of that group, plus "none" when ``none_scores`` is given) the highest score is
  predicted present, all others absent. ``s+`` = the argmax is S+; ``s-`` = fraction of
  (image, removed attribute) pairs whose attribute is not the argmax; images without
  a removed attribute (reference class with no positive class-level label in the
  group) do not count towards ``s-``. Ties go to the lowest column; "none" wins only
  when strictly above every attribute.
  Random chance (App. F): ``1 / (|A| + 1)`` for ``s+`` and ``1 - 1 / (|A| + 1)`` for
  ``s-``, ``|A|`` the number of attribute columns in the group, the ``+1`` the "none"
  option (without ``none_scores`` the chance is ``1/|A|`` and ``1 - 1/|A|``); averaged
  over the same images / pairs as the score.

Every score comes with its chance and with breakdowns by target attribute, attribute
group and reference class. Higher is better.

>>> import numpy as np
>>> names = ["has_bill_shape::dagger", "has_bill_shape::needle", "has_crown_color::blue"]
>>> probs = np.array([[0.2, 0.9, 0.1], [0.7, 0.4, 0.3]])
>>> out = sub_accuracy(probs, ["has_bill_shape::needle", "has_bill_shape::needle"],
...                    [["has_bill_shape::dagger"], ["has_bill_shape::dagger"]], concept_names=names)
>>> out["s_plus"], out["s_minus"], out["chance_s_plus"]
(0.5, 0.5, 0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..vocabulary import Vocabulary, load_vocabulary
from ._validation import as_array, as_mask, check_choice, check_probabilities, check_same_length

__all__ = ["sub_accuracy", "concept_accuracy", "MODES"]

MODES = ("binary", "group")


def _names(x: Any, name: str) -> list[str]:
    if isinstance(x, str):
        raise ValueError(f"{name} must be a sequence of attribute names, not a single string")
    out = [str(v) for v in x]
    if not out:
        raise ValueError(f"{name} is empty")
    return out


def _column_index(concept_names: Sequence[str], vocab: Vocabulary) -> dict[str, int]:
    names = _names(concept_names, "concept_names")
    known = set(vocab.attributes)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"concept_names has unknown attribute name(s): {unknown[:5]}")
    if len(set(names)) != len(names):
        raise ValueError("concept_names has duplicate names")
    return {n: j for j, n in enumerate(names)}


def _factorize(values: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """``(codes, names)``: ``names`` the sorted distinct values, ``values[i] == names[codes[i]]``.

    One dict pass over the strings; everything after works on the integer codes.

    >>> _factorize(["b", "a", "b"])
    (array([1, 0, 1]), ['a', 'b'])
    """
    names = sorted(set(values))
    index = {n: i for i, n in enumerate(names)}
    return np.fromiter(map(index.__getitem__, values), np.int64, len(values)), names


def _lookup(codes: np.ndarray, names: list[str], columns: dict[str, int], vocab: Vocabulary, arg: str) -> np.ndarray:
    """Column of each factorized name, -1 for vocabulary attributes the model lacks; unknown names raise."""
    unknown = [n for n in names if not vocab.is_attribute(n)]
    if unknown:
        raise ValueError(f"{arg} has unknown attribute name(s): {unknown[:5]}")
    return np.array([columns.get(n, -1) for n in names], dtype=np.int64)[codes]


def _breakdown(factorized: tuple[np.ndarray, list[str]], plus_ok: np.ndarray, plus_used: np.ndarray,
               plus_chance: np.ndarray, pair_img: np.ndarray, minus_ok: np.ndarray,
               minus_chance: np.ndarray) -> dict[str, np.ndarray]:
    inv, names = factorized
    G = len(names)

    def mean(idx: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = np.bincount(idx, minlength=G)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.bincount(idx, weights=values, minlength=G) / n, n

    s_plus, n_plus = mean(inv[plus_used], plus_ok[plus_used])
    c_plus, _ = mean(inv[plus_used], plus_chance[plus_used])
    s_minus, n_minus = mean(inv[pair_img], minus_ok)
    c_minus, _ = mean(inv[pair_img], minus_chance)
    return {"names": np.array(names), "s_plus": s_plus, "s_minus": s_minus, "chance_s_plus": c_plus,
            "chance_s_minus": c_minus, "n_s_plus": n_plus, "n_s_minus": n_minus}


def sub_accuracy(
    scores: Any,
    target_attributes: Sequence[str],
    removed_attributes: Sequence[Sequence[str]],
    *,
    concept_names: Sequence[str],
    reference_classes: Sequence[str] | None = None,
    mode: str = "binary",
    none_scores: Any | None = None,
    vocabulary: Vocabulary | None = None,
) -> dict[str, Any]:
    """s+ / s- of a concept model on SUB images, with chance and breakdowns.

    Args:
        scores: ``(N, C)`` concept probabilities in [0, 1] (binary) or image-text
            similarities (group), one column per name in ``concept_names``.
        target_attributes: ``(N,)`` S+ attribute name per image (CUB names).
        removed_attributes: ``N`` lists of S- attribute names (possibly empty).
        concept_names: ``(C,)`` CUB attribute names of the columns of ``scores``.
        reference_classes: ``(N,)`` reference class names, for the per-class breakdown.
        mode: ``"binary"`` or ``"group"``.
        none_scores: ``(N,)`` group mode only: similarity of the "none" option.

    Returns:
        dict with ``s_plus``, ``s_minus`` (NaN when nothing counts), ``chance_s_plus``,
        ``chance_s_minus``, ``n_s_plus`` (images), ``n_s_minus`` (pairs),
        ``skipped_target`` / ``skipped_removed`` (attributes the model lacks), and
        ``breakdown`` = ``{"attribute" | "group" | "class": {"names", "s_plus",
        "s_minus", "chance_s_plus", "chance_s_minus", "n_s_plus", "n_s_minus"}}``
        (arrays aligned with ``names``; ``class`` only with ``reference_classes``).
    """
    check_choice(mode, "mode", MODES)
    vocab = vocabulary or load_vocabulary()
    S = as_array(scores, "scores", ndim=2)
    if mode == "binary":
        check_probabilities(S, "scores")
        if none_scores is not None:
            raise ValueError("none_scores is only used with mode='group'")
    columns = _column_index(concept_names, vocab)
    if S.shape[1] != len(columns):
        raise ValueError(f"scores has {S.shape[1]} columns but concept_names has {len(columns)} names")
    targets = _names(target_attributes, "target_attributes")
    if isinstance(removed_attributes, str) or any(isinstance(r, str) for r in removed_attributes):
        raise ValueError("removed_attributes must be a list of lists of attribute names (one list per image)")
    removed = [list(r) for r in removed_attributes]
    check_same_length(scores=S, target_attributes=targets, removed_attributes=removed)
    classes = None
    if reference_classes is not None:
        classes = _names(reference_classes, "reference_classes")
        check_same_length(scores=S, reference_classes=classes)

    N = len(targets)
    target_codes, target_names = _factorize(targets)
    t_col = _lookup(target_codes, target_names, columns, vocab, "target_attributes")
    group_of_name = [vocab.group_of(n) for n in target_names]
    group_codes, group_names = _factorize(group_of_name)
    pair_img = np.repeat(np.arange(N), [len(r) for r in removed])
    pair_names = [n for r in removed for n in r]
    pair_codes, pair_uniques = _factorize(pair_names)
    pair_col = _lookup(pair_codes, pair_uniques, columns, vocab, "removed_attributes")
    if mode == "binary":
        used = t_col >= 0
        plus_ok = np.zeros(N, bool)
        plus_ok[used] = S[used, t_col[used]] > 0.5
        plus_chance = np.full(N, 0.5)
        keep = pair_col >= 0
        pair_img, pair_col = pair_img[keep], pair_col[keep]
        minus_ok = S[pair_img, pair_col] <= 0.5
        minus_chance = np.full(len(pair_img), 0.5)
    else:
        col_group = np.array([vocab.group_of(n) for n in columns])
        target_group = np.array(group_of_name)[target_codes]
        pair_group = np.array([vocab.group_of(n) for n in pair_uniques], dtype=object)[pair_codes]
        bad = sorted({pair_names[j] for j in np.flatnonzero(pair_group != target_group[pair_img])})
        if bad:
            raise ValueError(f"removed_attributes must lie in the group of the target attribute; offending: {bad[:5]}")
        used = t_col >= 0
        in_group = col_group[None, :] == target_group[:, None]
        masked = np.where(in_group, S, -np.inf)
        best = masked.argmax(axis=1)
        n_options = in_group.sum(axis=1) + (none_scores is not None)
        if none_scores is not None:
            ns = as_array(none_scores, "none_scores", ndim=1)
            check_same_length(scores=S, none_scores=ns)
            best = np.where(ns > masked.max(axis=1), -1, best)
        plus_ok = used & (best == t_col)
        with np.errstate(divide="ignore"):
            plus_chance = np.where(n_options > 0, 1.0 / n_options, np.nan)
        keep = (pair_col >= 0) & used[pair_img]
        pair_img, pair_col = pair_img[keep], pair_col[keep]
        minus_ok = best[pair_img] != pair_col
        minus_chance = 1.0 - plus_chance[pair_img]

    def _mean(x: np.ndarray) -> float:
        return float(x.mean()) if x.size else float("nan")

    rates = (plus_ok, used, plus_chance, pair_img, minus_ok, minus_chance)
    breakdown = {
        "attribute": _breakdown((target_codes, target_names), *rates),
        "group": _breakdown((group_codes[target_codes], group_names), *rates),
    }
    if classes is not None:
        breakdown["class"] = _breakdown(_factorize(classes), *rates)
    return {
        "s_plus": _mean(plus_ok[used]),
        "s_minus": _mean(minus_ok),
        "chance_s_plus": _mean(plus_chance[used]),
        "chance_s_minus": _mean(minus_chance),
        "n_s_plus": int(used.sum()),
        "n_s_minus": int(len(pair_img)),
        "skipped_target": int((~used).sum()),
        "skipped_removed": int(sum(len(r) for r in removed) - len(pair_img)),
        "breakdown": breakdown,
    }


def concept_accuracy(probabilities: Any, concept_labels: Any, *, columns: Sequence[int] | None = None) -> float:
    """Binary concept accuracy ``mean((P > 0.5) == label)`` over images and concepts
    (SUB Table 1's CUB columns: all 112 concepts, or ``columns`` = the SUB subset).

    >>> concept_accuracy([[0.9, 0.2], [0.4, 0.6]], [[1, 0], [1, 1]])
    0.75
    """
    P = check_probabilities(as_array(probabilities, "probabilities", ndim=2), "probabilities")
    Y = as_mask(concept_labels, "concept_labels", ndim=2)
    if Y.shape != P.shape:
        raise ValueError(f"concept_labels must have the shape of probabilities {P.shape}, got {Y.shape}")
    if columns is not None:
        cols = np.asarray(list(columns), dtype=np.int64)
        if cols.size == 0 or cols.min() < 0 or cols.max() >= P.shape[1]:
            raise ValueError(f"columns must be non-empty indices in [0, {P.shape[1]})")
        P, Y = P[:, cols], Y[:, cols]
    return float(((P > 0.5) == Y).mean())
