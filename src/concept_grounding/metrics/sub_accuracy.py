"""SUB accuracy: s+ and s- on synthetic attribute substitutions (Bader et al., Sec. 5.5-5.6,
Tables 1-2; random chance, App. F).

``mode="binary"`` scores concept probabilities (CBM, CEM, probes), ``mode="group"`` an
open-vocabulary model's similarities within S+'s attribute group; ``protocol="paper"`` (default)
follows the paper's text, ``protocol="official"`` SUB's published evaluation code. The rules,
chance and the two protocols side by side: docs/sub_accuracy.md. Higher is better.

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
from numpy.typing import ArrayLike

from ..vocabulary import Vocabulary, load_vocabulary
from ._validation import (
    as_array,
    as_mask,
    as_name_lists,
    as_names,
    check_choice,
    check_probabilities,
    check_same_length,
)

__all__ = ["sub_accuracy", "concept_accuracy", "PROTOCOLS"]

MODES = ("binary", "group")
#: ``"paper"``: the paper's rules (docs/sub_accuracy.md); ``"official"``: SUB's published evaluation code.
PROTOCOLS = ("paper", "official")


def _column_index(concept_names: Sequence[str], vocab: Vocabulary) -> dict[str, int]:
    names = as_names(concept_names, "concept_names")
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
    column_of_name = np.array([columns.get(n, -1) for n in names], dtype=np.int64)
    return np.take(column_of_name, codes)


def _breakdown(
    factorized: tuple[np.ndarray, list[str]],
    plus_ok: np.ndarray,
    plus_used: np.ndarray,
    plus_chance: np.ndarray,
    pair_img: np.ndarray,
    minus_ok: np.ndarray,
    minus_chance: np.ndarray,
) -> dict[str, np.ndarray]:
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
    return {
        "names": np.array(names),
        "s_plus": s_plus,
        "s_minus": s_minus,
        "chance_s_plus": c_plus,
        "chance_s_minus": c_minus,
        "n_s_plus": n_plus,
        "n_s_minus": n_minus,
    }


def _check_removed_in_target_group(
    pair_names: list[str],
    pair_codes: np.ndarray,
    pair_uniques: list[str],
    pair_img: np.ndarray,
    target_group: np.ndarray,
    vocab: Vocabulary,
) -> None:
    """Group mode: every S- must lie in its image's S+ group (it is scored against that group's argmax)."""
    pair_group = np.array([vocab.group_of(n) for n in pair_uniques], dtype=object)[pair_codes]
    bad = sorted({pair_names[j] for j in np.flatnonzero(pair_group != target_group[pair_img])})
    if bad:
        raise ValueError(f"removed_attributes must lie in the group of the target attribute; offending: {bad[:5]}")


def _in_cbm_112(names: list[str], vocab: Vocabulary) -> np.ndarray:
    """Whether each name is one of Koh et al.'s 112 CBM attributes."""
    return np.isin(np.array(vocab.attribute_indices(names), dtype=np.int64), np.array(vocab.cbm_112, dtype=np.int64))


def _first_per_image(pair_img: np.ndarray, pair_col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep each image's pair with the lowest column: the first class-level positive
    attribute the published code finds walking the model's attribute list.

    >>> _first_per_image(np.array([0, 0, 2, 2]), np.array([5, 3, 1, 4]))
    (array([0, 2]), array([3, 1]))
    """
    order = np.lexsort((pair_col, pair_img))
    pair_img, pair_col = pair_img[order], pair_col[order]
    first = np.r_[True, pair_img[1:] != pair_img[:-1]] if pair_img.size else np.zeros(0, bool)
    return pair_img[first], pair_col[first]


def _group_argmax(
    S: np.ndarray, columns: dict[str, int], vocab: Vocabulary, target_group: np.ndarray, none_scores: ArrayLike | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per image, the column with the highest score within S+'s group (the lowest column
    on ties; ``-1`` when "none" is strictly higher) and the number of options."""
    col_group = np.array([vocab.group_of(n) for n in columns])
    in_group = col_group[None, :] == target_group[:, None]
    masked = np.where(in_group, S, -np.inf)
    best = masked.argmax(axis=1)
    n_options = in_group.sum(axis=1) + (none_scores is not None)
    if none_scores is not None:
        ns = as_array(none_scores, "none_scores", ndim=1)
        check_same_length(scores=S, none_scores=ns)
        best = np.where(ns > masked.max(axis=1), -1, best)
    return best, n_options


def sub_accuracy(
    scores: ArrayLike,
    target_attributes: Sequence[str],
    removed_attributes: Sequence[Sequence[str]],
    *,
    concept_names: Sequence[str],
    reference_classes: Sequence[str] | None = None,
    mode: str = "binary",
    protocol: str = "paper",
    none_scores: ArrayLike | None = None,
    vocabulary: Vocabulary | None = None,
) -> dict[str, Any]:
    """s+ / s- of a concept model on SUB images, with chance and breakdowns.

    Args:
        scores: ``(N, C)`` concept probabilities in [0, 1] (binary; ``sigmoid`` of the
            logits) or image-text similarities (group), one column per name in
            ``concept_names``.
        target_attributes: ``(N,)`` S+ attribute name per image (CUB names).
        removed_attributes: ``N`` lists of S- attribute names (possibly empty): the
            reference class's class-level positive attributes of S+'s group.
        concept_names: ``(C,)`` CUB attribute names of the columns of ``scores``.
        reference_classes: ``(N,)`` reference class names, for the per-class breakdown.
        mode: ``"binary"`` or ``"group"``.
        protocol: ``"paper"`` (default) or ``"official"`` (the table in docs/sub_accuracy.md).
        none_scores: ``(N,)`` group mode, paper protocol only: similarity of the "none" option.

    Returns:
        dict with ``s_plus``, ``s_minus`` (NaN when nothing counts), ``chance_s_plus``,
        ``chance_s_minus``, ``n_s_plus`` (images), ``n_s_minus`` ((image, S-) pairs; one
        per image under ``"official"``), ``skipped_target`` (images whose S+ does not
        count) / ``skipped_removed`` (S- entries that do not count), and
        ``breakdown`` = ``{"attribute" | "group" | "class": {"names", "s_plus",
        "s_minus", "chance_s_plus", "chance_s_minus", "n_s_plus", "n_s_minus"}}``
        (arrays aligned with ``names``; ``class`` only with ``reference_classes``).
    """
    check_choice(mode, "mode", MODES)
    check_choice(protocol, "protocol", PROTOCOLS)
    vocab = vocabulary or load_vocabulary()
    S = as_array(scores, "scores", ndim=2)
    if mode == "binary":
        check_probabilities(S, "scores")
        if none_scores is not None:
            raise ValueError("none_scores is only used with mode='group'")
    elif none_scores is not None and protocol == "official":
        raise ValueError("none_scores is not used with protocol='official' (the published code has no 'none' option)")
    columns = _column_index(concept_names, vocab)
    if S.shape[1] != len(columns):
        raise ValueError(f"scores has {S.shape[1]} columns but concept_names has {len(columns)} names")
    targets = as_names(target_attributes, "target_attributes")
    removed = as_name_lists(removed_attributes, "removed_attributes")
    check_same_length(scores=S, target_attributes=targets, removed_attributes=removed)
    classes = None
    if reference_classes is not None:
        classes = as_names(reference_classes, "reference_classes")
        check_same_length(scores=S, reference_classes=classes)

    N = len(targets)
    target_codes, target_names = _factorize(targets)
    t_col = _lookup(target_codes, target_names, columns, vocab, "target_attributes")
    group_of_name = [vocab.group_of(n) for n in target_names]
    group_codes, group_names = _factorize(group_of_name)
    target_group = np.array(group_of_name)[target_codes]
    pair_img = np.repeat(np.arange(N), [len(r) for r in removed])
    pair_names = [n for r in removed for n in r]
    pair_codes, pair_uniques = _factorize(pair_names)
    pair_col = _lookup(pair_codes, pair_uniques, columns, vocab, "removed_attributes")
    official = protocol == "official"

    # 1. which images count for s+, which (image, S-) pairs for s-
    used = t_col >= 0
    keep = pair_col >= 0
    if mode == "group":
        _check_removed_in_target_group(pair_names, pair_codes, pair_uniques, pair_img, target_group, vocab)
    if mode == "group" and official:  # the notebook looks S+ and S- up in the CBM-112 list
        used &= _in_cbm_112(target_names, vocab)[target_codes]
        keep &= _in_cbm_112(pair_uniques, vocab)[pair_codes]
    if mode == "group" or official:
        keep &= used[pair_img]
    pair_img, pair_col = pair_img[keep], pair_col[keep]
    if official:
        pair_img, pair_col = _first_per_image(pair_img, pair_col)

    # 2. hits and chance
    if mode == "binary":
        plus_ok = np.zeros(N, bool)
        if official:
            plus_ok[used] = S[used, t_col[used]] >= 0.5
            minus_ok = S[pair_img, pair_col] < 0.5
        else:
            plus_ok[used] = S[used, t_col[used]] > 0.5
            minus_ok = S[pair_img, pair_col] <= 0.5
        plus_chance = np.full(N, 0.5)
        minus_chance = np.full(len(pair_img), 0.5)
    else:
        best, n_options = _group_argmax(S, columns, vocab, target_group, none_scores)
        plus_ok = used & (best == t_col)
        minus_ok = best[pair_img] != pair_col
        with np.errstate(divide="ignore"):
            plus_chance = np.where(n_options > 0, 1.0 / n_options, np.nan)
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
        "n_s_minus": len(pair_img),
        "skipped_target": int((~used).sum()),
        "skipped_removed": int(len(pair_names) - len(pair_img)),
        "breakdown": breakdown,
    }


def concept_accuracy(
    probabilities: ArrayLike, concept_labels: ArrayLike, *, columns: Sequence[int] | None = None
) -> float:
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
