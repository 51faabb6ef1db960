"""The ``curate`` job: human answers -> SUB's curated dataset and its report (Sec. 4.3, App. E).

:func:`run_curate` (``CurateConfig -> CurateResult``; nothing is written until
:meth:`CurateResult.save`) (1) reads the candidates (``<candidates>/metadata.jsonl`` of ``generate``
or ``filter``) and the answers (an annotation store ``.db`` or its Parquet export),
(2) scores attributes and pairings and applies SUB App. E's discard rules (docs/human_validation.md) (:mod:`.curate`),
(3) measures agreement (Krippendorff's alpha), the annotators' accuracy against a gold file
when given (``truth.jsonl``, e.g. the world's truth of :mod:`.simulate`), the Human rows of
Tables 1-2 (:mod:`concept_grounding.evaluation.human_rows`); (4) ``CurateResult.save(out)`` writes into ``out``:

* ``dataset/data/test-00000-of-00001.parquet`` -- the kept images in SUB's Hub layout
  (:func:`~concept_grounding.schema.sub_features`, images embedded), which
  :func:`~concept_grounding.loaders.load_sub` reads back and ``publish`` uploads;
* ``annotations.parquet`` -- every answer (``annotator, image, study, question, answer``);
* ``kept.jsonl`` -- the kept candidates' ``metadata.jsonl`` rows: with ``annotations.parquet``,
  what the bench report's computed Human rows read beside ``dataset``
  (:func:`~concept_grounding.evaluation.human_rows.human_rows_beside`);
* ``curation.json`` / ``curation.md`` -- what was kept, what was discarded and why, alpha,
  accuracy, Human rows; ``fig6_agreement.png`` and ``fig9_faithfulness.png``.

Candidates from the bird world (``world_seed`` an integer, 0 by default) also give the class-level attributes
(S+ = S- known at plan time) and Fig. 6's image-level labels; otherwise S+ = S- is found by
the study-2 majority only and Fig. 6 shows the human scores alone.

The settings and the readers of steps (1) are in :mod:`.curate_inputs`; what step (4) writes, in :mod:`.curate_report`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import UsageError
from .curate_inputs import CurateConfig, gold_answers, read_answers, read_candidates
from .curate_report import CurateResult

if TYPE_CHECKING:  # pandas loads when the job runs, not when the command line parses
    import pandas as pd

__all__ = ["run_curate"]


def run_curate(config: CurateConfig) -> CurateResult:
    """Read, score and select (module docstring, steps 1-3); nothing is written (:meth:`CurateResult.save`)."""
    import pandas as pd

    from ..evaluation.human_rows import human_rows
    from .curate import (
        agreement,
        annotator_accuracy,
        attribute_scores,
        bird_faithfulness,
        candidates_frame,
        pairing_scores,
    )

    rows, root = read_candidates(config.candidates)
    answers = read_answers(config.annotations)
    if not all("removed_attributes" in r for r in rows):
        raise UsageError(
            "rows lack removed_attributes (each pairing's S-, which generate and filter write): "
            "S+ = S- cannot be decided",
            file=Path(config.candidates) / "metadata.jsonl",
        )
    cands = candidates_frame(rows)
    if answers.empty:
        raise UsageError("no answers: annotate first (or export a store that has some)", file=config.annotations)
    k = _store_k(config.annotations)
    seed, world_note = config.world_seed, ""
    if seed is not None:
        world_note = _not_world(seed, cands)
        seed = None if world_note else seed
    try:
        attrs = attribute_scores(answers, cands, config.rules)
        class_sets, cub = (None, None)
        if seed is not None:
            class_sets, cub = _world_labels(seed, cands, list(attrs.index))
        pairs = pairing_scores(answers, cands, config.rules, class_sets)
        keys = pd.MultiIndex.from_arrays([cands.reference_class, cands.target_attribute])
        kept = cands[
            keys.isin(pairs.index[pairs.reason == ""])
            & cands.target_attribute.isin(set(attrs.index[attrs.kept])).to_numpy()
        ]
        human = None
        if ((answers.study == 2) & answers.candidate.isin(set(kept.index))).any():
            human = human_rows(answers, cands, kept=kept.index)
    except ValueError as err:
        raise UsageError(str(err), file=config.annotations) from None
    accuracy = annotator_accuracy(answers, gold_answers(config.truth)) if config.truth is not None else None
    faith = bird_faithfulness(answers, cands)
    return CurateResult(
        config,
        attrs,
        pairs,
        list(kept.index),
        agreement(answers),
        accuracy,
        human,
        faith,
        answers=answers,
        rows=rows,
        root=root,
        kept_rows=kept,
        cub=cub,
        below_k=_below_k(answers, k),
        k=k,
        world_note=world_note,
    )


def _store_k(path: Path) -> int:
    """Annotators per image of SUB's studies: the store's k of study 1 (its declared k unless the file keeps another),
    or the declared one for a Parquet export."""
    from .study import SUB_STUDY_1
    from .study_store import StudyStore

    if Path(path).suffix.lower() == ".parquet":
        return SUB_STUDY_1.distribution.k
    return StudyStore(path, read_only=True).k_of(SUB_STUDY_1)


def _below_k(answers: pd.DataFrame, k: int) -> dict[int, list[str]]:
    """Per study, the images answered by fewer than ``k`` annotators (their answers are used as
    they are; the report counts and names them)."""
    per = answers.groupby(["study", "image"])["annotator"].nunique()
    return {
        int(study): sorted(map(str, part.index.get_level_values(1))) for study, part in per[per < k].groupby(level=0)
    }


def _not_world(seed: int, cands: pd.DataFrame) -> str:
    """``""`` when every pairing's S- (``removed_attributes``) is the bird world's (``seed``: the
    class's attributes in S+'s group, S+ left out); else why the candidates are not the world's
    (real class names carry real S-, never the world's invented class attributes)."""
    from ..world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(seed=seed))
    vocab, index = world.vocab, {c: i for i, c in enumerate(world.class_names)}
    differ = []
    for (cls, target), removed in cands.groupby(["reference_class", "target_attribute"])["removed_attributes"]:
        if cls not in index or target not in vocab.attributes:
            differ.append((cls, target))
            continue
        expected = {
            vocab.attributes[i] for i in vocab.groups[vocab.group_of(target)] if world.class_attributes[index[cls], i]
        } - {target}
        if any(set(r if isinstance(r, (list, tuple, np.ndarray)) else []) != expected for r in removed):
            differ.append((cls, target))
    if not differ:
        return ""
    n = cands.groupby(["reference_class", "target_attribute"]).ngroups
    return (
        f"not the bird world's candidates (seed {seed}): {len(differ)} of {n} pairings' S- differ from its class "
        f"attributes (e.g. {differ[0][0]} / {differ[0][1]}); curated as real candidates (S+ = S- from their "
        "removed_attributes and study 2; Fig. 6 shows the human side only)"
    )


def _world_labels(seed: int, candidates: pd.DataFrame, attributes: list[str]) -> tuple[dict[str, set[str]], np.ndarray]:
    """Class-level attributes of the world's classes, and Fig. 6's CUB-side agreement per attribute
    (20 birds per class, per-image labels vs class-level)."""
    from ..world import BirdWorld, WorldConfig
    from .curate import class_agreement

    world = BirdWorld(WorldConfig(seed=seed))
    vocab = world.vocab
    class_sets = {
        c: {vocab.attributes[i] for i in np.flatnonzero(world.class_attributes[k])}
        for k, c in enumerate(world.class_names)
    }
    indices = range(20 * world.num_classes)
    labels = np.stack([world.labels(i) for i in indices])
    classes = np.array([i % world.num_classes for i in indices])
    cols = [vocab.attribute_index(a) for a in attributes]
    return class_sets, class_agreement(labels, classes, world.class_attributes, cols)
