"""Krippendorff's alpha, computed once for every study (Krippendorff, *Content Analysis*, 2004, Sec. 11.3; the
``krippendorff`` package): :func:`alpha` of ``(annotator, record, value)`` rows at a level of measurement, and
:func:`study_alpha` per question of a :class:`~.study.Study` by the question's ``level`` (docs/human_validation.md,
"Agreement").

>>> rows = [("a", "i1", 1), ("b", "i1", 1), ("a", "i2", 2), ("b", "i2", 2), ("a", "i3", 3), ("b", "i3", 4)]
>>> round(alpha(rows, "interval"), 6)  # by hand: D_o = 2/6, D_e = 82/30, alpha = 1 - 5/41
0.878049
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from .study import Level, Question, Response, Study

__all__ = ["MAX_DENSE", "alpha", "question_values", "study_alpha"]

#: the largest records x values^2 the library's dense coincidence tensor is given at once (~1.6 GB of float64).
MAX_DENSE = 2 * 10**8


def alpha(rows: Iterable[tuple[str, str, float]], level: Level, max_dense: int = MAX_DENSE) -> float | None:
    """Krippendorff's alpha of ``(annotator, record, value)`` rows (numeric values: codes for nominal answers, ranks
    for ordinal ones) on the annotators x records reliability table (NaN where an annotator did not answer a record).

    ``None`` when it is undefined or too large to compute: fewer than two records, no record with two values, a single
    value throughout, or (nominal and ordinal) more than ``max_dense`` records x values^2."""
    import krippendorff

    rows = list(rows)
    annotators = {a: n for n, a in enumerate(dict.fromkeys(r[0] for r in rows))}
    records = {i: n for n, i in enumerate(dict.fromkeys(r[1] for r in rows))}
    table = np.full((len(annotators), len(records)), np.nan)
    for annotator, record, value in rows:
        table[annotators[annotator], records[record]] = float(value)
    values = np.unique(table[~np.isnan(table)])
    if len(records) < 2 or values.size < 2 or int((~np.isnan(table)).sum(0).max()) < 2:
        return None
    if level != "interval" and len(records) * values.size**2 > max_dense:
        return None
    return float(krippendorff.alpha(reliability_data=table, level_of_measurement=level))


def question_values(question: Question, answers: Iterable[str]) -> list[float]:
    """``question``'s answers as alpha's numbers: a rating's value, an ordinal label's position among its options, a
    nominal answer's code (its first-seen order)."""
    answers = list(answers)
    if question.kind == "rating" or question.level == "interval":
        return [float(a) for a in answers]
    if question.level == "ordinal" and question.options:
        rank = {a: float(n) for n, a in enumerate(question.options)}
        return [rank[a] for a in answers]
    codes: dict[str, float] = {}
    return [codes.setdefault(a, float(len(codes))) for a in answers]


def study_alpha(study: Study, responses: Iterable[Response], max_dense: int = MAX_DENSE) -> Mapping[str, float | None]:
    """Krippendorff's alpha of each of ``study``'s questions at the question's ``level`` (:func:`alpha`)."""
    responses = [r for r in responses if r.study == study.name]
    out: dict[str, float | None] = {}
    for q in study.questions:
        answered = [r for r in responses if q.name in r.answers]
        values = question_values(q, (r.answers[q.name] for r in answered))
        out[q.name] = alpha(((r.annotator, r.record, v) for r, v in zip(answered, values)), q.level, max_dense)
    return out
