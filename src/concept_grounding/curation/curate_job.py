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
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import UsageError, read_text_file
from ..fileio import atomic_write_lines, markdown_table, write_report
from ..settings import nested, setting
from ..validators import existing_dir, existing_file, optional_int
from .annotations import AnnotationStore
from .rules import CurationRules
from .sampling import candidate_id

if TYPE_CHECKING:  # pandas loads when the job runs, not when the command line parses
    import pandas as pd

__all__ = ["CurateConfig", "CurateResult", "read_candidates", "read_answers", "gold_answers", "run_curate"]

DATASET_FILE = "dataset/data/test-00000-of-00001.parquet"


@dataclass(frozen=True)
class CurateConfig:
    """What to curate and how (SUB App. E's thresholds are the defaults).

    Args:
        candidates: folder with ``metadata.jsonl`` (``generate`` / ``filter`` output).
        annotations: the annotation store (``.db``) or its export (``.parquet``).
        truth: gold answers (``truth.jsonl`` of :func:`.simulate.write_candidates`) for the
            annotators' accuracy; ``None`` skips it.
        world_seed: the bird world's seed when the candidates come from it; ``None``: they do
            not (``--world-seed none``; the old ``--not-world`` still parses, with a warning).
        rules: the discard thresholds (their settings are the ``--min-yes``,
            ``--min-pairing-score`` and ``--max-deviation`` flags).
        write_images: embed the kept images in the dataset (``False``: write only the report).

    >>> config = CurateConfig(Path("c"), Path("a.db"), world_seed=None, rules=CurationRules(min_yes=0.8))
    >>> config.rules.min_yes, config.world_seed
    (0.8, None)
    """

    candidates: Path = setting(help="folder with metadata.jsonl (generate or filter output)", parse=existing_dir)
    annotations: Path = setting(
        help="the annotation store (.db) of `annotate`, or its Parquet export", parse=existing_file
    )
    truth: Path | None = setting(
        None,
        "gold answers (truth.jsonl) to measure each annotator's accuracy (simulated annotators)",
        parse=existing_file,
    )
    world_seed: int | None = setting(
        0,
        "the bird world's seed when the candidates come from it (class-level "
        "attributes, Fig. 6); none: they do not (S+ = S- by study-2 majority only)",
        parse=optional_int,
        switches=(("--not-world", None),),
    )
    rules: CurationRules = nested(CurationRules)
    write_images: bool = True


@dataclass
class CurateResult:
    """The tables behind the report (pandas) and what :meth:`save` writes.

    Attributes:
        attributes, pairings: per-attribute and per-pairing scores (with ``kept`` / ``reason``).
        kept: the kept candidates' ids.
        alpha: Krippendorff's alpha per question.
        accuracy: per-annotator accuracy against the gold answers (``None`` without ``truth``).
        human: the Human rows of Tables 1-2 (``None`` without study-2 answers on kept images).
        faithfulness: per reference class, the share of Q2 "no" (Fig. 9).
        answers, rows, root, kept_rows, cub: the answers, the candidates' ``metadata.jsonl`` rows and
            folder, the kept rows (a frame indexed by id) and Fig. 6's CUB-side agreement (``None``
            off the world), for :meth:`save`.
    """

    config: CurateConfig
    attributes: pd.DataFrame
    pairings: pd.DataFrame
    kept: list[str]
    alpha: dict[str, float]
    accuracy: pd.DataFrame | None
    human: dict[str, dict] | None
    faithfulness: pd.Series
    answers: pd.DataFrame = field(repr=False)
    rows: list[dict] = field(repr=False)
    root: Path = field(repr=False)
    kept_rows: pd.DataFrame = field(repr=False)
    cub: np.ndarray | None = field(default=None, repr=False)
    below_k: dict[int, list[str]] = field(default_factory=dict)
    k: int = 3
    world_note: str = ""

    @property
    def dataset(self) -> Path | None:
        """The dataset's Parquet file relative to the output folder; ``None`` when nothing is kept."""
        return Path(DATASET_FILE) if self.kept else None

    def save(self, out: str | Path) -> Path:
        """Write the dataset, the answers, ``kept.jsonl``, the figures and ``curation.json`` /
        ``curation.md`` under ``out`` (module docstring); returns ``curation.md``'s path."""
        return write_curation(self, out)


def read_candidates(folder: Path) -> tuple[list[dict], Path]:
    """``(rows, folder)`` of ``folder/metadata.jsonl``; a bad line names the file and line."""
    folder = Path(folder)
    meta = folder / "metadata.jsonl" if folder.is_dir() else folder
    rows = []
    for n, line in enumerate(read_text_file(meta, "--candidates").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"not JSON ({err.msg})", file=meta, line=n) from None
        missing = [k for k in ("file_name", "reference_class", "target_attribute") if k not in row]
        if missing:
            raise UsageError(f"row lacks {missing}", file=meta, line=n)
        rows.append(row)
    if not rows:
        raise UsageError("no candidates", file=meta)
    return rows, meta.parent


def read_answers(path: Path) -> pd.DataFrame:
    """Answers from a store (``.db``, opened read-only) or a Parquet export."""
    import pandas as pd

    from .curate import answers_frame

    path = Path(path)
    if not path.is_file():
        raise UsageError("no such annotation store or export", file=path, argument="--annotations")
    try:
        if path.suffix.lower() == ".parquet":
            return answers_frame(pd.read_parquet(path))
        return answers_frame(AnnotationStore(path, read_only=True).rows())
    except (ValueError, OSError) as err:
        if isinstance(err, UsageError):
            raise
        raise UsageError(str(err).splitlines()[0] if str(err) else type(err).__name__, file=path) from None


def gold_answers(truth: Path) -> pd.DataFrame:
    """``truth.jsonl`` -> gold answers (``image, question, answer``) for both studies' ids."""
    import pandas as pd

    out = []
    for line in read_text_file(truth, "--truth").splitlines():
        if line.strip():
            t = json.loads(line)
            out += [
                (f"1:{t['id']}", "q1", "yes" if t["applied"] else "no"),
                (f"1:{t['id']}", "q2", "yes" if t["deviates"] else "no"),
                (f"2:{t['id']}", "present", t["present"]),
            ]
    return pd.DataFrame(out, columns=["image", "question", "answer"])


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


def _image_bytes(ident: str, file_name: str, root: Path, cache: dict[Path, bytes]) -> bytes:
    path = Path(file_name)
    path = path if path.is_absolute() else root / path
    if path not in cache:
        try:
            cache[path] = path.read_bytes()
        except OSError as err:
            raise UsageError(f"candidate {ident}: cannot read its image ({err.strerror})", file=path) from None
    return cache[path]


def _list_column(kept: pd.DataFrame, name: str) -> list[list[str]]:
    if name not in kept:
        return [[] for _ in range(len(kept))]
    return [list(v) if isinstance(v, (list, tuple, np.ndarray)) else [] for v in kept[name]]


def _int_column(kept: pd.DataFrame, name: str) -> list[int]:
    return [-1] * len(kept) if name not in kept else [int(v) for v in kept[name].fillna(-1)]


def _write_dataset(kept: pd.DataFrame, root: Path, out: Path, write_images: bool) -> Path:
    """The kept rows as one Parquet file of :func:`~concept_grounding.schema.sub_features`,
    images embedded, with the ``datasets`` feature metadata (what ``push_to_hub`` writes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..schema import sub_features

    cache: dict[Path, bytes] = {}
    files = [str(f) for f in kept["file_name"]]
    data = [_image_bytes(i, f, root, cache) if write_images else None for i, f in zip(kept.index, files)]
    images = pa.StructArray.from_arrays(
        [pa.array(data, pa.binary()), pa.array([Path(f).name for f in files])], names=["bytes", "path"]
    )
    groups = (
        kept["group"].astype(str).str.removeprefix("has_")
        if "group" in kept
        else kept["target_attribute"].str.split("::").str[0].str.removeprefix("has_")
    )
    table = pa.table(
        {
            "image": images,
            "reference_class": pa.array(list(kept["reference_class"]), pa.string()),
            "target_attribute": pa.array(list(kept["target_attribute"]), pa.string()),
            "removed_attributes": pa.array(_list_column(kept, "removed_attributes"), pa.list_(pa.string())),
            "group": pa.array(list(groups), pa.string()),
            "source_id": pa.array(_int_column(kept, "source_id"), pa.int64()),
            "seed": pa.array(_int_column(kept, "seed"), pa.int64()),
        }
    )
    features = json.dumps({"info": {"features": sub_features().to_dict()}})
    table = table.replace_schema_metadata({"huggingface": features})
    path = out / DATASET_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def _fmt(x: Any) -> str:
    return (
        "–"
        if x is None or (isinstance(x, float) and math.isnan(x))
        else (f"{x:.3f}" if isinstance(x, float) else str(x))
    )


def _markdown(res: CurateResult, n_candidates: int) -> str:
    a, p = res.attributes, res.pairings
    lines = [
        "# SUB curation (Sec. 4.3, App. E)",
        "",
        f"{len(res.kept)} of {n_candidates} candidate images kept; "
        f"{int(a.kept.sum())} of {len(a)} attributes, {_kept_pairings(res)} of {len(p)} pairings.",
        "",
        *([res.world_note[0].upper() + res.world_note[1:] + ".", ""] if res.world_note else []),
        *(
            [
                f"Images with fewer than k = {res.k} annotators (their answers used as they are): "
                + "; ".join(
                    f"study {s}: {len(ims)} ({', '.join(ims[:10])}{', ...' if len(ims) > 10 else ''})"
                    for s, ims in res.below_k.items()
                ),
                "",
            ]
            if res.below_k
            else []
        ),
        *(
            [
                f"Attributes without study-1 answers (all their images dropped): "
                f"{', '.join(sorted(set(res.pairings.index.get_level_values(1)) - set(a.index)))}",
                "",
            ]
            if set(res.pairings.index.get_level_values(1)) - set(a.index)
            else []
        ),
        "## Attributes (study 1, Q1)",
        "",
        markdown_table(
            ["attribute", "human score", "yes share", "images", "kept"],
            [[i, _fmt(r.human_score), _fmt(r.yes_share), r.images, "yes" if r.kept else "no"] for i, r in a.iterrows()],
        ),
    ]
    dropped = p[p.reason != ""]
    lines += [
        "",
        "## Discarded pairings",
        "",
        markdown_table(
            ["class", "S+", "Q1 score", "Q2 yes share", "reason"],
            [[c, t, _fmt(r.q1_score), _fmt(r.q2_yes_share), r.reason] for (c, t), r in dropped.iterrows()],
        ),
    ]
    f = res.faithfulness
    lines += [
        "",
        "## Faithfulness to the reference bird (Fig. 9)",
        "",
        f'{int((f > 0.5).sum())} of {len(f)} reference classes are faithful (Q2 "no") over half the time, '
        f"{int((f > 0.9).sum())} over 90 % ([fig9_faithfulness.png](fig9_faithfulness.png)).",
    ]
    lines += ["", "## Agreement (Krippendorff's alpha)", ""]
    lines += [f"- {k}: {v:.3f}" for k, v in res.alpha.items()] or ["- not enough overlapping answers"]
    if res.accuracy is not None:
        lines += [
            "",
            "## Annotator accuracy against the gold answers (Wilson 95 %)",
            "",
            markdown_table(
                ["annotator", "accuracy", "interval", "answers"],
                [
                    [i, f"{r.accuracy:.3f}", f"[{r.low:.3f}, {r.high:.3f}]", int(r.answers)]
                    for i, r in res.accuracy.iterrows()
                ],
            ),
        ]
    if res.human is not None:
        b, g = res.human["binary"], res.human["group"]
        lines += [
            "",
            "## Human rows (study-2 answers on the kept images, scored by sub_accuracy)",
            "",
            markdown_table(
                ["mode", "s+", "s-", "answers"],
                [
                    [mode, f"{100 * h['s_plus']:.1f}", f"{100 * h['s_minus']:.1f}", h["answers"]]
                    for mode, h in (("binary (Table 1)", b), ("group (Table 2)", g))
                ],
            ),
        ]
    return "\n".join(lines) + "\n"


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
    """Annotators per image: the store's own k, or SUB App. E's default for a Parquet export."""
    from .annotation_items import DEFAULT_K

    return DEFAULT_K if Path(path).suffix.lower() == ".parquet" else AnnotationStore(path, read_only=True).k


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


def _kept_pairings(res: CurateResult) -> int:
    """Pairings kept: no discard reason and their S+ attribute kept."""
    kept_attrs = set(res.attributes.index[res.attributes.kept])
    return sum(1 for (_, t), r in res.pairings.iterrows() if r.reason == "" and t in kept_attrs)


def _summary(res: CurateResult) -> dict[str, Any]:
    """``curation.json``: counts, per-attribute scores, discarded pairings, alpha, accuracy, Human rows."""
    attrs, pairs, accuracy, human = res.attributes, res.pairings, res.accuracy, res.human
    candidates = {str(r["target_attribute"]) for r in res.rows}
    return {
        "candidates": len(res.rows),
        "kept_images": len(res.kept),
        "kept_pairings": _kept_pairings(res),
        "not_world": res.world_note or None,
        "k": res.k,
        "below_k": {str(s): ims for s, ims in res.below_k.items()},
        "unanswered_attributes": sorted(candidates - set(attrs.index)),
        "attributes": {
            a: {"human_score": r.human_score, "yes_share": r.yes_share, "kept": bool(r.kept)}
            for a, r in attrs.iterrows()
        },
        "discarded_pairings": [
            {"reference_class": c, "target_attribute": t, "reason": r.reason}
            for (c, t), r in pairs[pairs.reason != ""].iterrows()
        ],
        "alpha": res.alpha,
        "accuracy": None if accuracy is None else accuracy[["accuracy", "low", "high", "answers"]].to_dict("index"),
        "human": None
        if human is None
        else {m: {"s_plus": h["s_plus"], "s_minus": h["s_minus"], "answers": h["answers"]} for m, h in human.items()},
    }


def write_curation(res: CurateResult, out: str | Path) -> Path:
    """:meth:`CurateResult.save`: every file of the module docstring's step 4; returns ``curation.md``."""
    from ..evaluation.human_rows import ANSWERS_FILE, KEPT_FILE
    from .figures import agreement_figure, faithfulness_figure

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    attrs = res.attributes
    res.answers[["annotator", "image", "study", "question", "answer"]].to_parquet(out / ANSWERS_FILE, index=False)
    agreement_figure(
        list(attrs.index),
        attrs.human_score.to_numpy(),
        res.cub if res.cub is not None else np.full(len(attrs), np.nan),
        out / "fig6_agreement.png",
    )
    faithfulness_figure(res.faithfulness.to_numpy(), out / "fig9_faithfulness.png")
    if len(res.kept_rows):
        _write_dataset(res.kept_rows, res.root, out, res.config.write_images)
    kept_ids = set(res.kept)
    atomic_write_lines(
        out / KEPT_FILE, [json.dumps(r, sort_keys=True) for r in res.rows if candidate_id(r) in kept_ids]
    )
    _, report = write_report(
        out,
        _summary(res),
        _markdown(res, len(res.rows)),
        results_name="curation.json",
        report_name="curation.md",
        nan_as_null=False,
        default=float,
    )
    return report
