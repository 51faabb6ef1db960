"""What the ``curate`` job writes (docs/human_validation.md): :class:`CurateResult` and
:func:`write_curation` -- the dataset in SUB's Hub layout, the answers, ``kept.jsonl``, the figures and the report."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import UsageError
from ..fileio import atomic_write_lines, markdown_table, write_report
from .curate_inputs import CurateConfig
from .sampling import candidate_id

if TYPE_CHECKING:  # pandas loads when the job runs, not when the command line parses
    import pandas as pd

__all__ = ["CurateResult", "write_curation"]

DATASET_FILE = "dataset/data/test-00000-of-00001.parquet"


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
        ``curation.md`` under ``out`` (:mod:`.curate_job`); returns ``curation.md``'s path."""
        return write_curation(self, out)


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
    """:meth:`CurateResult.save`: every file of step 4 of :mod:`.curate_job`'s docstring; returns ``curation.md``."""
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
