"""Concept Global Importance Metric (CGIM), Aysel et al. (2025), Sec. 3.2, Eqs. 3-8.

With ``theta`` the ``L x K`` weights of the concept-to-class layer and ``V`` the
``L x K`` class-level ground truth, and ``U*`` the ``L x K`` mean concept vector of the
correctly classified test images of each class (Eq. 4), for concept ``j`` (rows) and
class ``k`` (columns), with ``phi`` the cosine similarity:

    type 1:  rho_j = phi(theta[j, :], V[j, :])            rho_k = phi(theta[:, k], V[:, k])
    type 2:  rho_j = phi(U*[j, :], V[j, :])               rho_k = phi(U*[:, k], V[:, k])
    type 3:  rho_j = phi((theta * U*)[j, :], V[j, :])     rho_k = phi((theta * U*)[:, k], V[:, k])

Scores lie in [-1, 1]; higher is better. The points the paper leaves open (classes with no correct
image, all-zero vectors, extreme scales): docs/concept_metrics.md.

>>> import numpy as np
>>> theta = np.array([[1.0, -1.0], [0.5, 0.5]])
>>> V = np.array([[1.0, 0.0], [1.0, 1.0]])
>>> out = concept_global_importance(theta, V)
>>> out["per_concept_type1"].round(4)  # [1/sqrt(2), 1]
array([0.7071, 1.    ])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validation import as_array, as_labels, check_same_length

__all__ = ["concept_global_importance"]

#: Histogram bin edges for CGIM scores: 20 bins of width 0.1 on [-1, 1] (Aysel et al. Fig. 2).
HISTOGRAM_EDGES = np.linspace(-1.0, 1.0, 21)


def cosine_similarity_rows_and_columns(stack: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cosine similarity of every row and every column of each ``(L, K)`` matrix in
    ``stack`` (``(T, L, K)``) with the same row / column of ``V`` (``(L, K)``).

    Returns ``(rows, columns)`` of shapes ``(T, L)`` and ``(T, K)``; NaN where a vector
    is exactly zero. A column of ``stack[t]`` that is all NaN (a class with no ``U*``) is
    dropped from that matrix's row vectors, in both operands, and its column score
    is NaN. All sums are einsum reductions over the stack, so no temporary of the
    stack's size is built on the common path; vectors whose squared norms leave the
    safe range are recomputed per vector by :func:`_peak_scaled_cosine`.

    >>> m = np.array([[[1.0, np.nan], [1.0, np.nan]]])  # column 1 missing
    >>> rows, cols = cosine_similarity_rows_and_columns(m, np.array([[1.0, 1.0], [0.0, 1.0]]))
    >>> rows, cols.round(4)  # row 1 of V is zero once column 1 is dropped
    (array([[ 1., nan]]), array([[0.7071,    nan]]))
    >>> tiny = np.array([[[1e-200, 1e-200], [1.0, 0.0]]])  # row 0 squares to 0 in float64
    >>> cosine_similarity_rows_and_columns(tiny, np.ones((2, 2)))[0].round(4)
    array([[1.    , 0.7071]])
    """
    present = ~np.isnan(stack[:, 0, :])  # (T, K)
    if not present.all():
        stack = np.where(present[:, None, :], stack, 0.0)
    V2 = V * V
    row_sq, row_v_sq = np.einsum("tij,tij->ti", stack, stack), (V2 @ present.T).T  # |V row|^2 over kept columns
    rows = _cosine(np.einsum("tij,ij->ti", stack, V), row_sq, row_v_sq)
    col_sq, col_v_sq = np.einsum("tij,tij->tj", stack, stack), V2.sum(axis=0)
    cols = _cosine(np.einsum("tij,ij->tj", stack, V), col_sq, col_v_sq)
    t, j = np.nonzero(_outside_safe_range(row_sq) | _outside_safe_range(row_v_sq))
    if t.size:
        rows[t, j] = _peak_scaled_cosine(stack[t, j, :], V[j, :] * present[t])
    t, k = np.nonzero(_outside_safe_range(col_sq) | _outside_safe_range(col_v_sq)[None, :])
    if t.size:
        cols[t, k] = _peak_scaled_cosine(stack[t, :, k], V[:, k].T)
    cols[~present] = np.nan
    return rows, cols


def _cosine(dot: np.ndarray, sq_a: np.ndarray, sq_b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # out-of-range vectors are redone
        denom = np.sqrt(sq_a * sq_b)
        sim = dot / denom
    return np.where(denom > 0, np.clip(sim, -1.0, 1.0), np.nan)


#: Squared norms inside this range neither lost precision to underflow nor overflowed.
_SAFE_SQUARED_NORM = (1e-200, 1e200)


def _outside_safe_range(sq: np.ndarray) -> np.ndarray:
    """Where a squared norm is 0, subnormal-prone, huge or non-finite."""
    return ~((sq >= _SAFE_SQUARED_NORM[0]) & (sq <= _SAFE_SQUARED_NORM[1]))


def _peak_scaled_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of ``a`` and ``b`` (``(M, n)`` each), each row first divided by its
    own peak magnitude, so its squared norm lies in ``[1, n]``; NaN where a row is zero.

    >>> _peak_scaled_cosine(np.array([[3e-300, 4e-300], [0.0, 0.0]]), np.array([[1.0, 0.0], [1.0, 1.0]]))
    array([0.6, nan])
    """
    peak_a = np.abs(a).max(axis=1, keepdims=True)
    peak_b = np.abs(b).max(axis=1, keepdims=True)
    a = a / np.where(peak_a > 0, peak_a, 1.0)
    b = b / np.where(peak_b > 0, peak_b, 1.0)
    return _cosine((a * b).sum(axis=1), (a * a).sum(axis=1), (b * b).sum(axis=1))


def _type3_matrix(theta: np.ndarray, u_star: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``theta * U*`` (Eq. 8), or, when the product of the two peak magnitudes leaves
    ``[1e-100, 1e100]``, the product of the operands each divided by its peak first, so it
    neither overflows (``1e170 * 1e170``) nor underflows (``1e-170 * 1e-170``); cosines are
    scale-free, so the scores are the same. Entries still below ~1e-308 of the peak count as 0."""
    peaks = [_peak(theta), _peak(u_star)]
    if 1e-100 <= peaks[0] * peaks[1] <= 1e100:
        a, b = theta, u_star
    else:
        a, b = (m / peak if peak > 0 else m for m, peak in zip((theta, u_star), peaks))
    product: np.ndarray = np.multiply(a, b, out=out)
    return product


def _peak(m: np.ndarray) -> float:
    """Largest finite magnitude of ``m`` (NaN columns ignored); 0 when there is none."""
    return float(np.fmax.reduce(np.abs(m), axis=None, initial=0.0))


def class_mean_concepts(
    concept_scores: np.ndarray, predictions: np.ndarray, references: np.ndarray, num_classes: int
) -> np.ndarray:
    """``U*`` of Eq. 4: ``(L, K)`` mean concept vector of the correctly classified images
    of each class; NaN columns for classes with none.

    The class sums are one sparse ``(K, N) @ (N, L)`` product with a 1 at
    ``(class of image i, i)`` for every correctly classified image ``i``.
    """
    from scipy.sparse import csr_matrix

    correct = np.flatnonzero(predictions == references)
    cls = references[correct]
    selector = csr_matrix((np.ones(correct.size), (cls, correct)), shape=(num_classes, len(references)))
    sums = np.asarray(selector @ concept_scores)
    counts = np.bincount(cls, minlength=num_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts[:, None]
    means[counts == 0] = np.nan
    return np.transpose(means)


def score_histograms(scores: list[np.ndarray]) -> np.ndarray:
    """Counts of each score vector over :data:`HISTOGRAM_EDGES`: ``(len(scores), 20)``.

    The bins of ``np.histogram`` (half-open, the last one closed; NaN left out),
    found for all vectors in one ``searchsorted`` and one ``bincount``.

    >>> score_histograms([np.array([-1.0, 0.05, 1.0, np.nan])])[0].nonzero()[0]
    array([ 0, 10, 19])
    """
    n_bins = len(HISTOGRAM_EDGES) - 1
    values = np.concatenate(scores)
    which = np.repeat(np.arange(len(scores)), [len(v) for v in scores])
    keep = ~np.isnan(values)
    bins = np.minimum(np.searchsorted(HISTOGRAM_EDGES, values[keep], side="right") - 1, n_bins - 1)
    return np.bincount(which[keep] * n_bins + bins, minlength=len(scores) * n_bins).reshape(len(scores), n_bins)


def concept_global_importance(
    theta: Any,
    class_attributes: Any,
    concept_scores: Any | None = None,
    predictions: Any | None = None,
    references: Any | None = None,
) -> dict[str, Any]:
    """CGIM types 1-3 per concept and per class (Aysel et al. Eqs. 3-8).

    Args:
        theta: ``(L, K)`` concept-to-class weights (``h(u) = theta^T u + b``).
        class_attributes: ``(L, K)`` class-level ground truth ``V`` (usually 0/1).
        concept_scores: ``(N, L)`` concept vectors ``u`` of the test images; needed,
            with ``predictions`` and ``references`` (``(N,)`` class ids), for types 2, 3.

    Returns:
        dict with ``per_concept_type{1,2,3}`` (``(L,)``), ``per_class_type{1,2,3}``
        (``(K,)``), their NaN-ignoring means ``concept_type{t}`` / ``class_type{t}``,
        ``histogram_edges`` (21,) and ``histogram_counts`` ``(2, T, 20)`` (level
        concept/class, type), and ``classes_without_correct``. Types 2, 3 are absent
        when ``concept_scores`` is not given.
    """
    th = as_array(theta, "theta", ndim=2)
    V = as_array(class_attributes, "class_attributes", ndim=2)
    if V.shape != th.shape:
        raise ValueError(f"class_attributes must have the shape of theta {th.shape}, got {V.shape}")
    L, K = th.shape
    types = ["type1"]
    out: dict[str, Any] = {}
    given = [x is not None for x in (concept_scores, predictions, references)]
    if any(given) and not all(given):
        raise ValueError("concept_scores, predictions and references must be given together")
    if all(given):
        u = as_array(concept_scores, "concept_scores", ndim=2)
        if u.shape[1] != L:
            raise ValueError(f"concept_scores must have {L} columns (rows of theta), got {u.shape[1]}")
        pred = as_labels(predictions, "predictions", num_classes=K)
        ref = as_labels(references, "references", num_classes=K)
        check_same_length(concept_scores=u, predictions=pred, references=ref)
        types += ["type2", "type3"]
        stack = np.empty((3, L, K))
        stack[0] = th
        stack[1] = class_mean_concepts(u, pred, ref, K)
        _type3_matrix(th, stack[1], out=stack[2])
        out["classes_without_correct"] = int(np.isnan(stack[1, 0]).sum())
    else:
        stack = th[None]
    per_concept, per_class = cosine_similarity_rows_and_columns(stack, V)
    for t, concept_scores_t, class_scores_t in zip(types, per_concept, per_class):
        out[f"per_concept_{t}"] = concept_scores_t
        out[f"per_class_{t}"] = class_scores_t
        out[f"concept_{t}"] = _nanmean(concept_scores_t)
        out[f"class_{t}"] = _nanmean(class_scores_t)
    out["histogram_edges"] = HISTOGRAM_EDGES.copy()
    out["histogram_counts"] = score_histograms([*per_concept, *per_class]).reshape(2, len(types), -1)
    return out


def _nanmean(x: np.ndarray) -> float:
    kept = x[~np.isnan(x)]
    return float(kept.mean()) if kept.size else float("nan")
