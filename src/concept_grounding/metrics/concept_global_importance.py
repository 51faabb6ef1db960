"""Concept Global Importance Metric (CGIM), Aysel et al. (2025), Sec. 3.2, Eqs. 3-8.

With ``theta`` the ``L x K`` weights of the concept-to-class layer and ``V`` the
``L x K`` class-level ground truth, and ``U*`` the ``L x K`` mean concept vector of the
correctly classified test images of each class (Eq. 4), for concept ``j`` (rows) and
class ``k`` (columns), with ``phi`` the cosine similarity:

    type 1:  rho_j = phi(theta[j, :], V[j, :])            rho_k = phi(theta[:, k], V[:, k])
    type 2:  rho_j = phi(U*[j, :], V[j, :])               rho_k = phi(U*[:, k], V[:, k])
    type 3:  rho_j = phi((theta * U*)[j, :], V[j, :])     rho_k = phi((theta * U*)[:, k], V[:, k])

Scores lie in [-1, 1]; higher is better. Conventions the paper leaves open:

* a class with no correctly classified test image has no ``U*`` column: its per-class
  type 2/3 scores are NaN and it is left out of the per-concept type 2/3 vectors
  (counted in ``classes_without_correct``);
* a zero vector has no direction, so its cosine similarity is NaN; means use ``nanmean``.

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

__all__ = ["concept_global_importance", "cosine_similarity_rows", "class_mean_concepts", "HISTOGRAM_EDGES"]

#: Histogram bin edges for CGIM scores: 20 bins of width 0.1 on [-1, 1] (Aysel et al. Fig. 2).
HISTOGRAM_EDGES = np.linspace(-1.0, 1.0, 21)


def cosine_similarity_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two ``(R, D)`` arrays; NaN where a row is zero.

    Rows may contain NaN to mark missing entries: those positions are dropped from
    both vectors.
    """
    missing = np.isnan(a) | np.isnan(b)
    if missing.any():
        a, b = np.where(missing, 0.0, a), np.where(missing, 0.0, b)
    a, b = _unit_max(a), _unit_max(b)  # cosine is scale-free; this keeps tiny or huge rows from under/overflowing
    denom = np.sqrt(np.einsum("ij,ij->i", a, a) * np.einsum("ij,ij->i", b, b))
    with np.errstate(invalid="ignore", divide="ignore"):
        sim = np.einsum("ij,ij->i", a, b) / denom
    return np.where(denom > 0, np.clip(sim, -1.0, 1.0), np.nan)


def _unit_max(x: np.ndarray) -> np.ndarray:
    """Rows divided by their largest magnitude (zero rows unchanged)."""
    peak = np.abs(x).max(axis=1, keepdims=True)
    return x / np.where(peak > 0, peak, 1.0)


def class_mean_concepts(concept_scores: np.ndarray, predictions: np.ndarray, references: np.ndarray, num_classes: int) -> np.ndarray:
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
    return means.T


def _histograms(scores: dict[str, np.ndarray]) -> np.ndarray:
    return np.stack([np.histogram(v[~np.isnan(v)], bins=HISTOGRAM_EDGES)[0] for v in scores.values()])


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
    matrices = {"type1": th}
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
        u_star = class_mean_concepts(u, pred, ref, K)
        matrices["type2"] = u_star
        matrices["type3"] = th * u_star
        out["classes_without_correct"] = int(np.isnan(u_star[0]).sum())
    per_concept = {t: cosine_similarity_rows(m, V) for t, m in matrices.items()}
    per_class = {t: cosine_similarity_rows(m.T, V.T) for t, m in matrices.items()}
    for t in matrices:
        out[f"per_concept_{t}"] = per_concept[t]
        out[f"per_class_{t}"] = per_class[t]
        out[f"concept_{t}"] = _nanmean(per_concept[t])
        out[f"class_{t}"] = _nanmean(per_class[t])
    out["histogram_edges"] = HISTOGRAM_EDGES.copy()
    out["histogram_counts"] = np.stack([_histograms(per_concept), _histograms(per_class)])
    return out


def _nanmean(x: np.ndarray) -> float:
    return float(np.nanmean(x)) if np.isfinite(x).any() else float("nan")
