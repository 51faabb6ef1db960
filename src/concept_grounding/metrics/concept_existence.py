"""Concept Existence Metric, Aysel et al. (2025), Sec. 3.3, Eqs. 9-10.

For test image ``i`` predicted as class ``k``, rank the ``L`` concepts by the local
importance ``theta_jk * u_ij`` (or, as the paper's variants, by ``theta_jk`` or by
``u_ij``) in descending order, giving ``q_i``. With ``Lambda_i`` the image's
ground-truth positive concepts,

    rho_l = (1/l) * sum_{s=1..l} 1[q_is in Lambda_i]                       (Eq. 9)

averaged over the test set and over its correctly classified subset. Higher is better.

The default ranks the signed score, a *decision* (the paper says "magnitude"; ``by_magnitude=True``);
ties rank by ascending concept index: docs/concept_metrics.md.

>>> import numpy as np
>>> theta = np.array([[2.0], [1.0], [3.0]])          # L=3 concepts, K=1 class
>>> u = np.array([[1.0, 4.0, 0.0]])                  # importance 2, 4, 0
>>> labels = np.array([[1, 0, 1]])
>>> out = concept_existence(theta, u, [0], labels, top_l=(1, 2, 3))
>>> out["top_concepts"].tolist(), out["existence@1"], out["existence@2"]
([[1, 0, 2]], 0.0, 0.5)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_array, as_labels, as_mask, check_choice, check_positive_ints, check_same_length

__all__ = ["concept_existence", "local_importance", "rank_concepts"]

RANKINGS = ("theta_u", "theta", "u")


def local_importance(
    theta: np.ndarray, concept_scores: np.ndarray, predictions: np.ndarray, ranking: str = "theta_u"
) -> np.ndarray:
    """``(N, L)`` importance of each concept for each image's predicted class.

    ``theta_u``: ``theta[j, k_i] * u[i, j]``; ``theta``: ``theta[j, k_i]``; ``u``: ``u[i, j]``.
    """
    check_choice(ranking, "ranking", RANKINGS)
    if ranking == "u":
        return concept_scores
    weights = np.take(np.ascontiguousarray(theta.T), predictions, axis=0)
    return weights * concept_scores if ranking == "theta_u" else weights


def rank_concepts(importance: np.ndarray, top: int, *, by_magnitude: bool = False) -> np.ndarray:
    """``(N, top)`` indices of the ``top`` most important concepts per row, best first.

    Ties go to the lower concept index, exactly as a stable sort of the negated score
    would order them, but in ``O(L)`` per row: ``np.partition`` finds the ``top``-th
    largest value ``tau``; every concept above ``tau`` is in, and the lowest-indexed
    concepts equal to ``tau`` fill the remaining places.

    >>> rank_concepts(np.array([[1.0, 3.0, 3.0, 2.0, 3.0]]), 2).tolist()
    [[1, 2]]
    """
    key = np.abs(importance) if by_magnitude else importance
    n, L = key.shape
    if top >= L:
        return np.argsort(-key, axis=1, kind="stable")
    tau = np.partition(key, L - top, axis=1)[:, L - top, None]
    greater = key > tau
    ties = key == tau
    fill = top - greater.sum(axis=1, keepdims=True)
    if np.array_equal(ties.sum(axis=1, keepdims=True), fill):  # no tie crosses the cut
        chosen = greater | ties
    else:
        chosen = greater | (ties & (np.cumsum(ties, axis=1) <= fill))
    cols = np.nonzero(chosen)[1].reshape(n, top)  # ascending concept index per row
    order = np.argsort(-np.take_along_axis(key, cols, axis=1), axis=1, kind="stable")
    return np.take_along_axis(cols, order, axis=1)


def check_ranking_inputs(
    theta: ArrayLike, concept_scores: ArrayLike, predictions: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``theta`` ``(L, K)``, ``concept_scores`` ``(N, L)`` float64 and ``predictions`` ``(N,)``
    class ids in ``[0, K)``, checked against each other (``ValueError`` naming the argument)."""
    th = as_array(theta, "theta", ndim=2)
    u = as_array(concept_scores, "concept_scores", ndim=2)
    if u.shape[1] != th.shape[0]:
        raise ValueError(f"concept_scores must have {th.shape[0]} columns (rows of theta), got {u.shape[1]}")
    pred = as_labels(predictions, "predictions", num_classes=th.shape[1])
    check_same_length(concept_scores=u, predictions=pred)
    return th, u, pred


def concept_existence(
    theta: ArrayLike,
    concept_scores: ArrayLike,
    predictions: ArrayLike,
    concept_labels: ArrayLike,
    references: ArrayLike | None = None,
    *,
    top_l: tuple[int, ...] = (1, 3, 5),
    ranking: str = "theta_u",
    by_magnitude: bool = False,
) -> dict[str, Any]:
    """Concept existence ``rho_l`` (Eq. 9) for each ``l`` in ``top_l``.

    Args:
        theta: ``(L, K)`` concept-to-class weights.
        concept_scores: ``(N, L)`` concept values ``u`` of the test images.
        predictions: ``(N,)`` predicted class ``k`` of each image.
        concept_labels: ``(N, L)`` 0/1 ground-truth concepts (``Lambda_i``).
        references: ``(N,)`` true classes; when given, the correctly classified subset
            is scored too.
        top_l: the ``l`` values (paper: 1, 3, 5), each <= ``L``.
        ranking: ``"theta_u"`` (default), ``"theta"`` or ``"u"``.
        by_magnitude: rank ``|importance|`` instead of the signed value.

    Returns:
        dict with ``existence@l`` (mean over images) and, with ``references``,
        ``existence@l_correct`` (NaN if no image is correct) and ``num_correct``;
        ``per_image`` ``(N, len(top_l))``; ``top_concepts`` ``(N, max(top_l))``.
    """
    th, u, pred = check_ranking_inputs(theta, concept_scores, predictions)
    lab = as_mask(concept_labels, "concept_labels", ndim=2)
    if lab.shape != u.shape:
        raise ValueError(f"concept_labels must have the shape of concept_scores {u.shape}, got {lab.shape}")
    ls = check_positive_ints(top_l, "top_l", maximum=th.shape[0])
    top = rank_concepts(local_importance(th, u, pred, ranking), max(ls), by_magnitude=by_magnitude)
    hits = np.cumsum(np.take_along_axis(lab, top, axis=1), axis=1)
    per_image = np.stack([hits[:, l - 1] / l for l in ls], axis=1)
    out: dict[str, Any] = {f"existence@{l}": float(per_image[:, c].mean()) for c, l in enumerate(ls)}
    if references is not None:
        ref = as_labels(references, "references", num_classes=th.shape[1])
        check_same_length(predictions=pred, references=ref)
        correct = pred == ref
        out["num_correct"] = int(correct.sum())
        for c, l in enumerate(ls):
            out[f"existence@{l}_correct"] = float(per_image[correct, c].mean()) if correct.any() else float("nan")
    out["per_image"] = per_image
    out["top_concepts"] = top
    return out
