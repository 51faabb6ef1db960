"""Concept Confidence Deviation (CCD), ConceptBed (Patel et al., 2023), Sec. 3.2.1, Eq. 3.

    CCD = - E_c [ E_{x_gen of c} f(y_c | x_gen) - E_{x_real of c} f(y_c | x_real) ]

``f(y_c | x)`` is an oracle's probability for the concept's label: 0 means the oracle is as
confident on generated images as on real ones, positive that they deviate (lower is better). Beside
it, the oracle's accuracy, MSP and ECE (App. H.1, Table 7). The two oracle modes (a classifier's
softmax, a VQA model's P(yes)) and the two reductions (Eq. 3 per concept, the reference code's
pooled mean): docs/ccd.md.

>>> import numpy as np
>>> gen = np.array([[0.9, 0.1], [0.7, 0.3], [0.2, 0.8]])
>>> real = np.array([[0.9, 0.1], [0.1, 0.9]])
>>> out = concept_confidence_deviation(gen, [0, 0, 1], real, [0, 1])
>>> round(out["ccd"], 4)  # -((0.8 - 0.9) + (0.8 - 0.9)) / 2
0.1
>>> round(out["accuracy"], 4), round(out["msp"], 4)
(1.0, 0.8)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_array, as_labels, check_choice, check_probabilities, check_same_length

__all__ = ["concept_confidence_deviation", "expected_calibration_error"]

MODES = ("classifier", "vqa")
REDUCTIONS = ("per_concept", "pooled")


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, n_bins: int = 15) -> float:
    """ECE of Naeini et al. (2015) / Guo et al. (2017), equal-width bins on [0, 1].

    ``ECE = sum_b |B_b| / N * |acc(B_b) - conf(B_b)|``; bin ``b`` holds confidences in
    ``((b-1)/n_bins, b/n_bins]`` (a confidence of exactly 0 falls in the first bin).

    >>> # (|0.5 - 0.9| * 2 + |1 - 0.6|) / 3
    >>> round(expected_calibration_error(np.array([0.9, 0.9, 0.6]), np.array([1, 0, 1])), 4)
    0.4
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    conf = np.asarray(confidence, dtype=np.float64)
    corr = np.asarray(correct, dtype=np.float64)
    bins = np.clip(np.ceil(conf * n_bins).astype(np.int64) - 1, 0, n_bins - 1)
    gap = np.bincount(bins, weights=corr, minlength=n_bins) - np.bincount(bins, weights=conf, minlength=n_bins)
    return float(np.abs(gap).sum() / conf.size)


def _oracle_view(probabilities: ArrayLike, labels: ArrayLike, mode: str, prefix: str) -> tuple[np.ndarray, ...]:
    """(target probability f, concept id, confidence, correct) per image."""
    p_name, y_name = f"{prefix}_probabilities", f"{prefix}_labels"
    if mode == "classifier":
        probs = check_probabilities(as_array(probabilities, p_name, ndim=2), p_name)
        y = as_labels(labels, y_name, num_classes=probs.shape[1])
        check_same_length(**{p_name: probs, y_name: y})
        target = probs[np.arange(len(y)), y]
        return target, y, probs.max(axis=1), probs.argmax(axis=1) == y
    yes = check_probabilities(as_array(probabilities, p_name, ndim=1), p_name)
    y = as_labels(labels, y_name)
    check_same_length(**{p_name: yes, y_name: y})
    return yes, y, np.maximum(yes, 1.0 - yes), yes > 0.5


def concept_confidence_deviation(
    generated_probabilities: ArrayLike,
    generated_labels: ArrayLike,
    real_probabilities: ArrayLike,
    real_labels: ArrayLike,
    *,
    mode: str = "classifier",
    reduction: str = "per_concept",
    n_bins: int = 15,
) -> dict[str, Any]:
    """CCD of generated images against real images of the same concepts (Eq. 3).

    Args:
        generated_probabilities: ``(N_gen, K)`` oracle softmax (``mode="classifier"``) or
            ``(N_gen,)`` VQA "yes" probabilities (``mode="vqa"``), each in [0, 1].
        generated_labels: ``(N_gen,)`` concept id of each generated image (the class the
            oracle should predict, or the question / prompt group in VQA mode).
        real_probabilities, real_labels: the same for real (ground-truth) images. Every
            concept present in the generated set must have real images.
        mode: ``"classifier"`` or ``"vqa"`` (docs/ccd.md).
        reduction: ``"per_concept"`` (Eq. 3) or ``"pooled"`` (ConceptBed code).
            ``per_concept_ccd`` holds ``-(gen mean of c - real mean of c)`` or, pooled,
            ``-(gen mean of c - pooled real mean)``; ``ccd`` is their plain mean
            (per concept) or their mean weighted by generated counts (pooled).
        n_bins: number of ECE bins.

    Returns:
        dict with ``ccd`` (float, lower is better), ``concepts`` (ids evaluated),
        ``per_concept_ccd`` (one value per id in ``concepts``), ``generated_mean`` / ``real_mean`` (per
        concept), ``real_pooled_mean``, and on the generated images ``accuracy``,
        ``msp`` (mean max softmax / max(P(yes), P(no))) and ``ece``; ``real_accuracy``
        for reference.
    """
    check_choice(mode, "mode", MODES)
    check_choice(reduction, "reduction", REDUCTIONS)
    g_f, g_y, g_conf, g_ok = _oracle_view(generated_probabilities, generated_labels, mode, "generated")
    r_f, r_y, _, r_ok = _oracle_view(real_probabilities, real_labels, mode, "real")

    concepts, g_inv = np.unique(g_y, return_inverse=True)
    g_count = np.bincount(g_inv)
    g_mean = np.bincount(g_inv, weights=g_f) / g_count
    size = max(int(concepts.max()), int(r_y.max())) + 1
    r_count = np.bincount(r_y, minlength=size)[concepts]
    missing = concepts[r_count == 0]
    if missing.size:
        raise ValueError(f"real_labels has no images of concept(s) {missing.tolist()} present in generated_labels")
    r_mean = np.bincount(r_y, weights=r_f, minlength=size)[concepts] / r_count
    r_pooled = float(r_f.mean())
    if reduction == "per_concept":
        per_concept = -(g_mean - r_mean)
        ccd = float(per_concept.mean())
    else:
        per_concept = -(g_mean - r_pooled)
        ccd = float(-(g_f.mean() - r_pooled))
    return {
        "ccd": ccd,
        "concepts": concepts,
        "per_concept_ccd": per_concept,
        "generated_mean": g_mean,
        "real_mean": r_mean,
        "real_pooled_mean": r_pooled,
        "accuracy": float(g_ok.mean()),
        "msp": float(g_conf.mean()),
        "ece": expected_calibration_error(g_conf, g_ok, n_bins),
        "real_accuracy": float(r_ok.mean()),
    }
