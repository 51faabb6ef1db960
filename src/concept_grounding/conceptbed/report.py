"""The Markdown report of a ``conceptbed`` run (ConceptBed, Patel et al., Tables 1, 2, 3, 7, 8; docs/conceptbed/)."""

from __future__ import annotations

from typing import Any

from .table2 import table2_markdown
from .table3 import table3_markdown

__all__ = ["render_report", "with_interval"]

#: the report's header on CCD and its sign (docs/ccd.md, "The sign")
CCD_HEADER = (
    "CCD (ConceptBed Eq. 3: real minus generated oracle confidence; lower is better, 0: the oracle is as confident "
    "as on real images). ConceptBed's released evaluation code reports generated minus real (higher is better); "
    "we keep the paper's sign (docs/ccd.md). Each cell: value [95 % bootstrap interval over concepts and images]."
)


def with_interval(value: float | None, interval: list[float] | None, fmt: str = "{:.4f}") -> str:
    """``"value [lo, hi]"`` (``"-"`` for no value; the bare value where no interval was computed).

    >>> with_interval(0.5, [0.25, 0.75], "{:.2f}")
    '0.50 [0.25, 0.75]'
    """
    if value is None:
        return "-"
    if interval is None:
        return fmt.format(value)
    return f"{fmt.format(value)} [{fmt.format(interval[0])}, {fmt.format(interval[1])}]"


def _table(
    rows: dict[str, dict[str, float]],
    columns: list[str],
    fmt: str = "{:.4f}",
    intervals: dict[str, dict[str, list[float]]] | None = None,
) -> list[str]:
    lines = ["| | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, row in rows.items():
        bounds = (intervals or {}).get(name, {})
        lines.append(f"| {name} | " + " | ".join(with_interval(row[c], bounds.get(c), fmt) for c in columns) + " |")
    return lines


def _dino(results: dict[str, Any], tasks: list[str]) -> list[str]:
    """The DINO-style baseline with its real-vs-real ceiling as the last row."""
    base = results["baselines"]
    rows = dict(base["dino"])
    if "dino_ceiling" in base:
        rows["real vs real (ceiling)"] = base["dino_ceiling"]
    lines = ["", f"## Baseline: DINO-style pairwise cosine ({base['encoder']}; higher is closer)", ""]
    lines += _table(rows, tasks)
    lines += [
        "",
        "Ceiling: the same cosine between the two halves of each concept's real images (what drawing the concept's "
        "own real images reaches). The Original row compares the real images with themselves, self-pairs included.",
    ]
    return lines


def render_report(results: dict[str, Any]) -> str:
    """The Markdown report of a run's ``results``."""
    tasks = list(next(iter(results["table1"].values())))
    intervals = results.get("intervals", {})
    lines = [
        "# ConceptBed on the bird world",
        "",
        CCD_HEADER,
        "",
        f"Computed with {results['config'].get('threads', '?')} CPU thread(s).",
        "",
        "## Oracles (validation on held-out renders; a CCD needs >= 95 %)",
        "",
    ]
    lines += [
        f"- {t}: {o['kind']} oracle ({o['capacity']}, {o['epochs']} epochs), {100 * o['accuracy']:.1f} %"
        for t, o in results["oracles"].items()
        if t != "vqa"
    ]
    if results.get("short_tasks"):
        held = ", ".join(f"{t} {n}" for t, n in results["short_tasks"].items())
        lines += ["", f"Fewer concepts than --concepts {results['concepts_asked']} (every one it holds): {held}."]
    lines += ["", "## Table 1: CCD per learner and task", ""]
    lines += _table(results["table1"], tasks, intervals=intervals.get("table1"))
    t7 = results["table7"]
    lines += ["", f"## Table 7: accuracy, MSP, ECE and CCD ({results['table7_task']})", ""]
    lines += _table(t7, ["accuracy", "msp", "ece", "ccd"], intervals=intervals.get("table7"))
    if results["table8"]:
        caps = list(results["table8"])
        rows = {l: {c: results["table8"][c][l] for c in caps} for l in results["table1"]}
        t8 = intervals.get("table8", {})
        bounds = {l: {c: t8[c][l] for c in caps if l in t8.get(c, {})} for l in results["table1"]}
        lines += ["", "## Table 8: CCD of the species tasks under each oracle capacity", ""]
        lines += _table(rows, caps, intervals=bounds)
        lines += [
            "",
            "Oracle accuracies: " + ", ".join(f"{c} {100 * a:.1f} %" for c, a in results["table8_oracles"].items()),
        ]
    lines += _dino(results, tasks)
    if "table2" in results:
        lines += table2_markdown(results)
    if "table3" in results:
        lines += table3_markdown({"table3": results["table3"], **results["table3_detail"]})
    lines += ["", "## Figures", "", "![Fig. 4](fig4_contact_sheet.png)", "", "![Fig. 5](fig5_sensitivity.png)", ""]
    return "\n".join(lines)
