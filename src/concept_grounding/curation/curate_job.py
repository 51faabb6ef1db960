"""The ``curate`` job: human answers -> SUB's curated dataset and its report (Sec. 4.3, App. E).

:func:`run_curate` (1) reads the candidates (``<candidates>/metadata.jsonl`` of ``generate``
or ``filter``) and the answers (an annotation store ``.db`` or its Parquet export),
(2) scores attributes and pairings and applies SPEC 2b's discard rules (:mod:`.curate`),
(3) measures agreement (Krippendorff's alpha), the annotators' accuracy against a gold file
when given (``truth.jsonl``, e.g. the world's truth of :mod:`.simulate`), the Human rows of
Tables 1-2 (:mod:`.human`), and (4) writes into ``out``:

* ``dataset/data/test-00000-of-00001.parquet`` -- the kept images in SUB's Hub layout
  (:func:`~concept_grounding.schema.sub_features`, images embedded), which
  :func:`~concept_grounding.loaders.load_sub` reads back and ``publish`` uploads;
* ``annotations.parquet`` -- every answer (``annotator, image, study, question, answer``);
* ``kept.jsonl`` -- the kept candidates' ``metadata.jsonl`` rows: with ``annotations.parquet``,
  what the bench report's computed Human rows read beside ``dataset``
  (:func:`~.human.human_rows_beside`);
* ``curation.json`` / ``curation.md`` -- what was kept, what was discarded and why, alpha,
  accuracy, Human rows; ``fig6_agreement.png`` and ``fig9_faithfulness.png``.

Candidates from the bird world (``world_seed`` set) also give the class-level attributes
(S+ = S- known at plan time) and Fig. 6's image-level labels; otherwise S+ = S- is found by
the study-2 majority only and Fig. 6 shows the human scores alone.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import UsageError, read_text_file
from ..evaluation.human import ANSWERS_FILE, KEPT_FILE
from ..fileio import atomic_write_lines, write_report
from .annotations import AnnotationStore
from .sampling import candidate_id
from .curate import (
    CurationRules,
    agreement,
    annotator_accuracy,
    answers_frame,
    attribute_scores,
    bird_faithfulness,
    candidates_frame,
    class_agreement,
    pairing_scores,
)

__all__ = ["CurateConfig", "CurateResult", "read_candidates", "read_answers", "gold_answers", "run_curate"]

DATASET_FILE = "dataset/data/test-00000-of-00001.parquet"


@dataclass(frozen=True)
class CurateConfig:
    """What to curate and where to write.

    Args:
        candidates: folder with ``metadata.jsonl`` (``generate`` / ``filter`` output).
        annotations: the annotation store (``.db``) or its export (``.parquet``).
        out: output folder.
        rules: the discard thresholds (SPEC 2b defaults).
        truth: gold answers (``truth.jsonl`` of :func:`.simulate.write_candidates`) for the
            annotators' accuracy; ``None`` skips it.
        world_seed: the bird world's seed when the candidates come from it; ``None`` otherwise.
        write_images: embed the kept images in the dataset (``False``: write only the report).
    """

    candidates: Path
    annotations: Path
    out: Path
    rules: CurationRules = field(default_factory=CurationRules)
    truth: Path | None = None
    world_seed: int | None = 0
    write_images: bool = True


@dataclass
class CurateResult:
    """The tables behind the report (pandas) and the paths written."""

    attributes: pd.DataFrame
    pairings: pd.DataFrame
    kept: list[str]
    alpha: dict[str, float]
    accuracy: pd.DataFrame | None
    human: dict[str, dict] | None
    faithfulness: pd.Series
    report: Path
    dataset: Path | None


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
    out = []
    for line in read_text_file(truth, "--truth").splitlines():
        if line.strip():
            t = json.loads(line)
            out += [(f"1:{t['id']}", "q1", "yes" if t["applied"] else "no"),
                    (f"1:{t['id']}", "q2", "yes" if t["deviates"] else "no"),
                    (f"2:{t['id']}", "present", t["present"])]
    return pd.DataFrame(out, columns=["image", "question", "answer"])


def _world_labels(seed: int, candidates: pd.DataFrame, attributes: list[str]) -> tuple[dict[str, set[str]], np.ndarray]:
    """Class-level attributes of the world's classes, and Fig. 6's CUB-side agreement per attribute
    (20 birds per class, per-image labels vs class-level)."""
    from ..world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(seed=seed))
    vocab = world.vocab
    class_sets = {c: {vocab.attributes[i] for i in np.flatnonzero(world.class_attributes[k])}
                  for k, c in enumerate(world.class_names)}
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
    images = pa.StructArray.from_arrays([pa.array(data, pa.binary()), pa.array([Path(f).name for f in files])],
                                        names=["bytes", "path"])
    groups = (kept["group"].astype(str).str.removeprefix("has_") if "group" in kept else
              kept["target_attribute"].str.split("::").str[0].str.removeprefix("has_"))
    table = pa.table({
        "image": images,
        "reference_class": pa.array(list(kept["reference_class"]), pa.string()),
        "target_attribute": pa.array(list(kept["target_attribute"]), pa.string()),
        "removed_attributes": pa.array(_list_column(kept, "removed_attributes"), pa.list_(pa.string())),
        "group": pa.array(list(groups), pa.string()),
        "source_id": pa.array(_int_column(kept, "source_id"), pa.int64()),
        "seed": pa.array(_int_column(kept, "seed"), pa.int64()),
    })
    features = json.dumps({"info": {"features": sub_features().to_dict()}})
    table = table.replace_schema_metadata({"huggingface": features})
    path = out / DATASET_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def _fmt(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else (f"{x:.3f}" if isinstance(x, float) else str(x))


def _markdown(res: CurateResult, n_candidates: int) -> str:
    a, p = res.attributes, res.pairings
    lines = ["# SUB curation (Sec. 4.3, App. E)", "",
             f"{len(res.kept)} of {n_candidates} candidate images kept; "
             f"{int(a.kept.sum())} of {len(a)} attributes, {int((p.reason == '').sum())} of {len(p)} pairings.", "",
             *([f"Attributes without study-1 answers (all their images dropped): "
                f"{', '.join(sorted(set(res.pairings.index.get_level_values(1)) - set(a.index)))}", ""]
               if set(res.pairings.index.get_level_values(1)) - set(a.index) else []),
             "## Attributes (study 1, Q1)", "", "| attribute | human score | yes share | images | kept |",
             "|---|---|---|---|---|"]
    lines += [f"| {i} | {_fmt(r.human_score)} | {_fmt(r.yes_share)} | {r.images} | {'yes' if r.kept else 'no'} |"
              for i, r in a.iterrows()]
    dropped = p[p.reason != ""]
    lines += ["", "## Discarded pairings", "", "| class | S+ | Q1 score | Q2 yes share | reason |", "|---|---|---|---|---|"]
    lines += [f"| {c} | {t} | {_fmt(r.q1_score)} | {_fmt(r.q2_yes_share)} | {r.reason} |" for (c, t), r in dropped.iterrows()]
    f = res.faithfulness
    lines += ["", "## Faithfulness to the reference bird (Fig. 9)", "",
              f"{int((f > 0.5).sum())} of {len(f)} reference classes are faithful (Q2 \"no\") over half the time, "
              f"{int((f > 0.9).sum())} over 90 % ([fig9_faithfulness.png](fig9_faithfulness.png))."]
    lines += ["", "## Agreement (Krippendorff's alpha)", ""]
    lines += [f"- {k}: {v:.3f}" for k, v in res.alpha.items()] or ["- not enough overlapping answers"]
    if res.accuracy is not None:
        lines += ["", "## Annotator accuracy against the gold answers (Wilson 95 %)", "",
                  "| annotator | accuracy | interval | answers |", "|---|---|---|---|"]
        lines += [f"| {i} | {r.accuracy:.3f} | [{r.low:.3f}, {r.high:.3f}] | {int(r.answers)} |"
                  for i, r in res.accuracy.iterrows()]
    if res.human is not None:
        b, g = res.human["binary"], res.human["group"]
        lines += ["", "## Human rows (study-2 answers on the kept images, scored by sub_accuracy)", "",
                  "| mode | s+ | s- | answers |", "|---|---|---|---|",
                  f"| binary (Table 1) | {100 * b['s_plus']:.1f} | {100 * b['s_minus']:.1f} | {b['answers']} |",
                  f"| group (Table 2) | {100 * g['s_plus']:.1f} | {100 * g['s_minus']:.1f} | {g['answers']} |"]
    return "\n".join(lines) + "\n"


def run_curate(config: CurateConfig) -> CurateResult:
    """Run the job (module docstring) and return its tables."""
    from .figures import agreement_figure, faithfulness_figure
    from .human import human_rows

    rows, root = read_candidates(config.candidates)
    cands = candidates_frame(rows)
    answers = read_answers(config.annotations)
    try:
        attrs = attribute_scores(answers, cands, config.rules)
        class_sets, cub = (None, None)
        if config.world_seed is not None:
            class_sets, cub = _world_labels(config.world_seed, cands, list(attrs.index))
        pairs = pairing_scores(answers, cands, config.rules, class_sets)
        keys = pd.MultiIndex.from_arrays([cands.reference_class, cands.target_attribute])
        kept = cands[keys.isin(pairs.index[pairs.reason == ""]) & cands.target_attribute.isin(
            set(attrs.index[attrs.kept])).to_numpy()]
        human = None
        if ((answers.study == 2) & answers.candidate.isin(set(kept.index))).any():
            human = human_rows(answers, cands, kept=kept.index)
    except ValueError as err:
        raise UsageError(str(err), file=config.annotations) from None
    accuracy = annotator_accuracy(answers, gold_answers(config.truth)) if config.truth is not None else None
    faith = bird_faithfulness(answers, cands)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    answers[["annotator", "image", "study", "question", "answer"]].to_parquet(out / ANSWERS_FILE, index=False)
    agreement_figure(list(attrs.index), attrs.human_score.to_numpy(),
                     cub if cub is not None else np.full(len(attrs), np.nan), out / "fig6_agreement.png")
    faithfulness_figure(faith.to_numpy(), out / "fig9_faithfulness.png")
    dataset = _write_dataset(kept, root, out, config.write_images) if len(kept) else None
    kept_ids = set(kept.index)
    atomic_write_lines(out / KEPT_FILE, [json.dumps(r, sort_keys=True) for r in rows
                                         if candidate_id(r) in kept_ids])
    res = CurateResult(attrs, pairs, list(kept.index), agreement(answers), accuracy, human, faith, out / "curation.md",
                       dataset)
    summary = {
        "candidates": len(cands), "kept_images": len(kept),
        "unanswered_attributes": sorted(set(cands.target_attribute) - set(attrs.index)),
        "attributes": {a: {"human_score": r.human_score, "yes_share": r.yes_share, "kept": bool(r.kept)}
                       for a, r in attrs.iterrows()},
        "discarded_pairings": [{"reference_class": c, "target_attribute": t, "reason": r.reason}
                               for (c, t), r in pairs[pairs.reason != ""].iterrows()],
        "alpha": res.alpha,
        "accuracy": None if accuracy is None else accuracy[["accuracy", "low", "high", "answers"]].to_dict("index"),
        "human": None if human is None else {m: {"s_plus": h["s_plus"], "s_minus": h["s_minus"], "answers": h["answers"]}
                                             for m, h in human.items()},
    }
    write_report(out, summary, _markdown(res, len(cands)), results_name="curation.json", report_name=res.report.name,
                 nan_as_null=False, default=float)
    return res
