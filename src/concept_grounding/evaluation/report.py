"""The report folder of ``concept-grounding sub``: JSON, Markdown and PNG bar charts, and the
table and JSON helpers every report (``sub``, ``analyse``, ``bench``) writes with."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import markdown_table, write_json, write_report

__all__ = ["percent", "score_cells", "write_json"]

#: breakdown level -> (SubEvaluation attribute, header)
BREAKDOWN_LEVELS: dict[str, tuple[str, str]] = {
    "group": ("by_group", "attribute group"),
    "attribute": ("by_attribute", "target attribute"),
    "class": ("by_class", "reference class"),
}
_COLUMNS = (("s_plus", "s+"), ("chance_s_plus", "chance s+"), ("s_minus", "s-"), ("chance_s_minus", "chance s-"))


def percent(value: float | None, digits: int = 1) -> str:
    """Format a fraction in [0, 1] as a percentage; ``None``/NaN as an en dash.

    >>> percent(0.4567), percent(None), percent(float("nan"))
    ('45.7', '–', '–')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{100.0 * value:.{digits}f}"


def score_cells(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[tuple[str, str]],
    *,
    first: tuple[str, str] = ("name", "model"),
    fractions: bool = True,
) -> tuple[list[str], list[list[str]]]:
    """The header and cells of a score table for :func:`~concept_grounding.fileio.markdown_table`:
    ``first`` = (row key, header) then one column per ``(key, header)``; numeric cells are
    fractions shown as percent (``fractions``) or with 3 significant digits, missing ones an en dash.

    >>> from concept_grounding.fileio import markdown_table
    >>> print(markdown_table(*score_cells([{"name": "CBM", "s_plus": 0.5}], [("s_plus", "s+")])))
    | model | s+ |
    |---|---|
    | CBM | 50.0 |
    """
    key0, head0 = first
    cells = []
    for row in rows:
        line = [str(row.get(key0, ""))]
        for key, _ in columns:
            value = row.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                line.append(percent(float(value)) if fractions else f"{value:.3g}")
            else:
                line.append("–" if value is None else str(value))
        cells.append(line)
    return [head0, *(h for _, h in columns)], cells


def _rows(table: dict[str, dict[str, float]]) -> list[dict]:
    return [
        {"name": name, **values, "n": f"{values['n_s_plus']} / {values['n_s_minus']}"} for name, values in table.items()
    ]


def write_sub_report(result: Any, out: Path, *, scores: bool = False) -> Path:
    """Write the report folder of ``result``, a :class:`~.sub.SubEvaluation` (read by its
    attributes only, so this module does not import :mod:`.sub`, which calls it):
    ``results.json`` (:meth:`SubEvaluation.summary`), ``report.md`` (headline and every
    breakdown, percent) and ``sub_per_<level>.png`` for group, attribute and class."""
    from ..plotting import sub_bars

    out.mkdir(parents=True, exist_ok=True)
    if scores:
        extra = {} if result.none_scores is None else {"none_scores": result.none_scores}
        np.savez_compressed(
            out / "scores.npz", scores=result.scores, concept_names=np.array(result.concept_names), **extra
        )
    lines = [
        f"# SUB accuracy of {result.model or 'the model'}",
        "",
        f"{result.num_images} SUB images from {result.source}; {result.mode} mode, protocol `{result.protocol}`;"
        f" {result.n_s_plus} images count for s+, {result.n_s_minus} for s-"
        f" ({result.skipped_target} targets and {result.skipped_removed} removed attributes the model has no"
        f" column for). Inference: {result.seconds:.1f} s ({result.images_per_second:.1f} images/s).",
        "",
        markdown_table(
            *score_cells(
                [
                    {"name": "model", "s_plus": result.s_plus, "s_minus": result.s_minus},
                    {"name": "random chance", "s_plus": result.chance_s_plus, "s_minus": result.chance_s_minus},
                ],
                (("s_plus", "s+"), ("s_minus", "s-")),
                first=("name", ""),
            )
        ),
        "",
        f"s+ = {percent(result.s_plus)} % (chance {percent(result.chance_s_plus)} %), "
        f"s- = {percent(result.s_minus)} % (chance {percent(result.chance_s_minus)} %).",
        "",
    ]
    for level, (attr, header) in BREAKDOWN_LEVELS.items():
        png = f"sub_per_{level}.png"
        sub_bars(result.metric, out / png, level=level, title=f"s+ / s- per {header}")
        lines += [
            f"## By {header}",
            "",
            f"![s+ / s- per {header}]({png})",
            "",
            markdown_table(
                *score_cells(_rows(getattr(result, attr)), _COLUMNS + (("n", "n (s+ / s-)"),), first=("name", header))
            ),
            "",
        ]
    write_report(out, result.summary(), "\n".join(lines))
    _write_sub_eval_results(result, out)
    return out


def _write_sub_eval_results(result: Any, out: Path) -> Path | None:
    """``out/eval_results/<model>/sub.yaml``: s+ and s- on the SUB set evaluated (its Hub id, local
    folder name, or the world's SUB-style set)."""
    from ..eval_results import WORLD_SUB_DATASET, model_folder_name, result_entries, write_eval_results

    source = str(result.source)
    dataset = WORLD_SUB_DATASET if source == "bird world SUB export" else model_folder_name(source).replace("--", "/")
    notes = f"concept-grounding sub, {result.mode} mode, protocol {result.protocol}, {result.num_images} images"
    return write_eval_results(
        out,
        result.model or "model",
        "sub",
        result_entries(dataset, {"s_plus": result.s_plus, "s_minus": result.s_minus}, notes=notes),
    )
