"""SUB's curation by human answers (Bader et al., Sec. 4.3, App. E, Figs. 6 and 9; docs/human_validation.md).

Inputs are two tables: the candidates (rows of a ``generate`` / ``filter`` ``metadata.jsonl``) and the
answers (the :mod:`.study_store` export of SUB's studies; ``image`` is ``"<study>:<candidate id>"``). Attribute and
pairing scores with the paper's discard rules (:func:`attribute_scores`, :func:`pairing_scores`),
Krippendorff's alpha (:func:`agreement`), annotator accuracy, Fig. 9 (:func:`bird_faithfulness`) and
Fig. 6's CUB side (:func:`class_agreement`), each a vectorised ``pandas.DataFrame`` function. The
rules: docs/human_validation.md, "Curation".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .agreement import MAX_DENSE, alpha, question_values
from .annotation_items import LIKERT, STUDIES
from .rules import MAX_DEVIATION, MIN_PAIRING_SCORE, MIN_YES, CurationRules
from .study import SUB_STUDY_1, SUB_STUDY_2, Question
from .study_export import long_answers

__all__ = [
    "MAX_DENSE",
    "LIKERT_SCORE",
    "MIN_YES",
    "MIN_PAIRING_SCORE",
    "MAX_DEVIATION",
    "CurationRules",
    "answers_frame",
    "candidates_frame",
    "attribute_scores",
    "pairing_scores",
    "agreement",
    "annotator_accuracy",
    "wilson_interval",
    "bird_faithfulness",
    "class_agreement",
]

#: SUB's two studies (App. E), whose export curate reads.
SUB = (SUB_STUDY_1, SUB_STUDY_2)
#: Fig. 6's score of each study-1 answer.
LIKERT_SCORE: dict[str, float] = {"yes": 1.0, "somewhat": 0.5, "no": 0.0}


def answers_frame(rows) -> pd.DataFrame:
    """Answers (the study store's export of SUB's studies, :func:`.study_export.export`, as a ``datasets.Dataset`` or
    a DataFrame; or ``(annotator, image, study, question, answer)`` rows) -> a DataFrame with those five columns
    (``study`` 1 or 2) and ``candidate`` (the id after ``":"``)."""
    if hasattr(rows, "to_pandas"):
        rows = rows.to_pandas()
    if isinstance(rows, pd.DataFrame) and "record" in rows.columns:  # the export: one row per response
        rows = [(a, r, int(s.removeprefix("sub-")), q, v) for a, r, s, q, v in long_answers(rows, SUB)]
    if isinstance(rows, pd.DataFrame):
        df = rows.copy()
    else:
        df = pd.DataFrame(list(rows), columns=["annotator", "image", "study", "question", "answer"])
    missing = {"annotator", "image", "study", "question", "answer"} - set(df.columns)
    if missing:
        raise ValueError(f"answers lack the column(s) {sorted(missing)}; have {list(df.columns)}")
    df["study"] = df["study"].astype(int)
    _check_answers(df)
    df["candidate"] = df["image"].astype(str).str.split(":", n=1).str[-1]
    return df


def _check_answers(df: pd.DataFrame) -> None:
    """Refuse, naming the first offending row: an unknown study or question, a study-1
    answer outside yes / somewhat / no, the same (annotator, image, question) twice."""
    known = {(study, q) for study, qs in STUDIES.items() for q in qs}
    bad = ~pd.Series([(s, q) in known for s, q in zip(df["study"], df["question"])], index=df.index)
    if bad.any():
        r = df[bad].iloc[0]
        raise ValueError(
            f"answers row {df.index.get_loc(bad.idxmax())}: study {r.study} has no question {r.question!r}"
        )
    bad = (df["study"] == 1) & ~df["answer"].isin(LIKERT)
    if bad.any():
        r = df[bad].iloc[0]
        raise ValueError(
            f"answers row {df.index.get_loc(bad.idxmax())}: {r.answer!r} to {r.question} of {r.image!r} "
            f"is not one of {list(LIKERT)}"
        )
    dup = df.duplicated(["annotator", "image", "question"])
    if dup.any():
        r = df[dup].iloc[0]
        raise ValueError(
            f"answers row {df.index.get_loc(dup.idxmax())}: {r.annotator!r} answered {r.question} of {r.image!r} twice"
        )


def candidates_frame(rows: Sequence[Mapping[str, object]]) -> pd.DataFrame:
    """Candidate rows -> a DataFrame indexed by candidate id (``id``, else ``file_name``)."""
    df = pd.DataFrame([dict(r) for r in rows])
    if "id" not in df.columns:
        df["id"] = df["file_name"].astype(str)
    df["id"] = df["id"].astype(str)
    return df.set_index("id", drop=False)


def _with_pairing(answers: pd.DataFrame, candidates: pd.DataFrame) -> pd.DataFrame:
    known = answers["candidate"].isin(candidates.index)
    if not known.all():
        bad = answers.loc[~known, "image"].iloc[0]
        raise ValueError(f"answers name image {bad!r}, which is not among the candidates ({(~known).sum()} answers)")
    out = answers.copy()
    out["reference_class"] = candidates.loc[out["candidate"], "reference_class"].to_numpy()
    out["target_attribute"] = candidates.loc[out["candidate"], "target_attribute"].to_numpy()
    return out


def attribute_scores(
    answers: pd.DataFrame, candidates: pd.DataFrame, rules: CurationRules = CurationRules()
) -> pd.DataFrame:
    """Per S+ attribute (index): ``human_score``, ``yes_share``, ``images``, ``answers``, ``kept``."""
    q1 = _with_pairing(answers[(answers.study == 1) & (answers.question == "q1")], candidates)
    q1 = q1.assign(score=q1["answer"].map(LIKERT_SCORE), yes=q1["answer"].eq("yes"))
    out = q1.groupby("target_attribute").agg(
        human_score=("score", "mean"),
        yes_share=("yes", "mean"),
        images=("candidate", "nunique"),
        answers=("answer", "size"),
    )
    out["kept"] = out["yes_share"] >= rules.min_yes
    return out


def pairing_scores(
    answers: pd.DataFrame,
    candidates: pd.DataFrame,
    rules: CurationRules = CurationRules(),
    class_attributes: Mapping[str, set[str]] | None = None,
) -> pd.DataFrame:
    """Per (reference_class, target_attribute) pairing of the candidates: ``q1_score``,
    ``q2_yes_share`` (NaN without study-1 answers), ``study2_majority``, and ``reason``
    (``""`` kept; else ``low accuracy``, ``excessive modification``, ``S+ = S-`` joined by "; ")."""
    pairs = candidates.groupby(["reference_class", "target_attribute"]).agg(
        candidates=("id", "size"), removed=("removed_attributes", _union)
    )
    class_minus = pairs.groupby(level=0)["removed"].agg(lambda sets: frozenset().union(*sets))
    s1 = _with_pairing(answers[answers.study == 1], candidates)
    _check_both_questions(s1)
    q1 = s1[s1.question == "q1"].assign(score=lambda d: d["answer"].map(LIKERT_SCORE))
    q2 = s1[s1.question == "q2"].assign(yes=lambda d: d["answer"].eq("yes"))
    pairs["q1_score"] = q1.groupby(["reference_class", "target_attribute"])["score"].mean()
    pairs["q2_yes_share"] = q2.groupby(["reference_class", "target_attribute"])["yes"].mean()
    s2 = _with_pairing(answers[answers.study == 2], candidates)
    _check_groups(s2)
    pairs["study2_majority"] = _majority(s2)
    reasons = []
    for (cls, target), row in pairs.iterrows():
        why = []
        if pd.notna(row.q1_score) and row.q1_score < rules.min_pairing_score:
            why.append("low accuracy")
        if pd.notna(row.q2_yes_share) and row.q2_yes_share > rules.max_deviation:
            why.append("excessive modification")
        same = target in class_minus.get(cls, frozenset()) or (  # known at plan time: S+ is one of the class's S-
            class_attributes is not None and target in class_attributes.get(cls, set())
        )
        if same or (isinstance(row.study2_majority, str) and row.study2_majority in row.removed):
            why.append("S+ = S-")
        reasons.append("; ".join(why))
    pairs["reason"] = reasons
    return pairs


def _union(values) -> frozenset:
    """The attributes named by any of a pairing's ``removed_attributes`` lists (S-)."""
    return frozenset(a for v in values if isinstance(v, (list, tuple, np.ndarray)) for a in v)


def _check_both_questions(s1: pd.DataFrame) -> None:
    """Refuse study-1 answers where an annotator answered Q1 but not Q2 of an image (or the reverse):
    the excessive-modification rule needs Q2."""
    asked = s1.groupby(["annotator", "image"])["question"].agg(frozenset)
    lacking = asked[asked != frozenset(STUDIES[1])]
    if len(lacking):
        (who, image), got = lacking.index[0], sorted(lacking.iloc[0])
        raise ValueError(
            f"study 1 needs Q1 and Q2 from each annotator of each image: {who!r} answered only {got} of "
            f"{image!r} ({len(lacking)} such); the excessive-modification rule needs Q2"
        )


def _check_groups(s2: pd.DataFrame) -> None:
    """Refuse a study-2 answer outside its S+'s attribute group (the only options shown), naming the first."""
    bad = s2["answer"].astype(str).str.split("::").str[0] != s2["target_attribute"].str.split("::").str[0]
    if bad.any():
        r = s2[bad].iloc[0]
        raise ValueError(
            f"study-2 answer {str(r.answer)[:60]!r} of {r.annotator!r} to {r.image!r} is not an attribute "
            f"of S+'s group ({r.target_attribute.split('::')[0]}); {int(bad.sum())} such answers"
        )


def _majority(s2: pd.DataFrame) -> pd.Series:
    """Per pairing, the study-2 choice more annotators made than any other; NaN on a tie (6 of 12 is no majority)."""
    counts = s2.groupby(["reference_class", "target_attribute", "answer"]).size().rename("n").reset_index()
    top = counts.groupby(["reference_class", "target_attribute"])["n"].transform("max")
    best = counts[counts["n"] == top]
    unique = best.groupby(["reference_class", "target_attribute"])["answer"].agg(
        lambda a: a.iloc[0] if len(a) == 1 else np.nan
    )
    return unique


def _alpha(part: pd.DataFrame, question: Question, max_dense: int = MAX_DENSE) -> float | None:
    """:func:`.agreement.alpha` of one question's answers at its level (annotators x images)."""
    values = question_values(question, part["answer"])
    return alpha(zip(part["annotator"], part["image"], values), question.level, max_dense)


def agreement(answers: pd.DataFrame, max_dense: int = MAX_DENSE) -> dict[str, float]:
    """Krippendorff's alpha per question (:func:`.agreement.alpha`, each question at its level in
    :data:`~.study.SUB_STUDY_1` / :data:`~.study.SUB_STUDY_2`):

    * ``"study1/q1"``, ``"study1/q2"``: ordinal (no < somewhat < yes);
    * ``"study2/present"``: nominal over every answer, and ``"study2/present/<group>"`` per S+
      group (the images whose choices are that group's attributes). The library builds an
      images x values x values tensor, so the pooled value is left out (the per-group ones
      stay) when that exceeds ``max_dense`` elements (SUB scale: ~10k images x 181 values).

    A question with fewer than two answered images, no image seen by two annotators, or a
    single value throughout is left out.
    """
    out: dict[str, float] = {}
    for (study, name), part in answers.groupby(["study", "question"]):
        question = (SUB_STUDY_1 if study == 1 else SUB_STUDY_2).question(name)
        value = _alpha(part, question, max_dense)
        if value is not None:
            out[f"study{study}/{name}"] = value
        if study == 1:
            continue
        groups = part["answer"].str.split("::").str[0].str.removeprefix("has_")
        by_image = groups.groupby(part["image"]).agg(lambda g: g.iloc[0])  # an image's answers share its group
        for group, images in by_image.groupby(by_image):
            value = _alpha(part[part["image"].isin(images.index)], question)
            if value is not None:
                out[f"study{study}/{name}/{group}"] = value
    return out


def wilson_interval(successes: np.ndarray, trials: np.ndarray, z: float = 1.959964) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval (95 % by default) of ``successes / trials``, elementwise."""
    k, n = np.asarray(successes, float), np.asarray(trials, float)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def annotator_accuracy(answers: pd.DataFrame, gold: pd.DataFrame) -> pd.DataFrame:
    """Per annotator (index): ``accuracy``, ``answers``, ``low`` / ``high`` (Wilson 95 %), over
    the answers that have a gold answer; ``gold`` has columns ``image, question, answer``."""
    merged = answers.merge(
        gold.rename(columns={"answer": "gold"})[["image", "question", "gold"]], on=["image", "question"], how="inner"
    )
    merged["correct"] = merged["answer"] == merged["gold"]
    out = merged.groupby("annotator").agg(correct=("correct", "sum"), answers=("correct", "size"))
    out["accuracy"] = out["correct"] / out["answers"]
    out["low"], out["high"] = wilson_interval(out["correct"].to_numpy(), out["answers"].to_numpy())
    return out


def bird_faithfulness(answers: pd.DataFrame, candidates: pd.DataFrame) -> pd.Series:
    """Fig. 9: per reference class, the share of study-1 Q2 answers "no" (still the reference bird)."""
    q2 = _with_pairing(answers[(answers.study == 1) & (answers.question == "q2")], candidates)
    return q2.assign(no=q2["answer"].eq("no")).groupby("reference_class")["no"].mean().rename("faithful_share")


def class_agreement(
    image_labels: np.ndarray, image_classes: np.ndarray, class_labels: np.ndarray, attributes: Sequence[int]
) -> np.ndarray:
    """Fig. 6's CUB side: ``(len(attributes),)`` share of images whose per-image label agrees
    with their class-level label, over images of classes where the class-level label is 1
    (NaN when there are none).

    Args:
        image_labels: ``(N, A)`` 0/1 per-image labels.
        image_classes: ``(N,)`` class index per image.
        class_labels: ``(C, A)`` 0/1 class-level (majority) labels.
        attributes: the attribute columns to report.
    """
    cols = np.asarray(attributes, int)
    cls = class_labels[np.asarray(image_classes, int)][:, cols].astype(bool)
    agree = image_labels[:, cols].astype(bool) & cls
    counts = cls.sum(0)
    return np.where(counts > 0, agree.sum(0) / np.maximum(counts, 1), np.nan)
