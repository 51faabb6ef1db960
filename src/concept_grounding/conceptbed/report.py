"""The Markdown report of a ``conceptbed`` run (ConceptBed, Patel et al., Tables 1, 2, 3, 7, 8; docs/conceptbed/)."""

from __future__ import annotations

from typing import Any

from .table2 import table2_markdown
from .table3 import table3_markdown

__all__ = ["render_report"]


def _table(rows: dict[str, dict[str, float]], columns: list[str], fmt: str = "{:.4f}") -> list[str]:
    lines = ["| | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(fmt.format(row[c]) for c in columns) + " |" for name, row in rows.items()]
    return lines


def render_report(results: dict[str, Any]) -> str:
    """The Markdown report of a run's ``results``."""
    tasks = list(next(iter(results["table1"].values())))
    lines = [
        "# ConceptBed on the bird world",
        "",
        "CCD (ConceptBed Eq. 3; lower is better, 0: the oracle is as confident as on real images).",
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
    lines += ["", "## Table 1: CCD per learner and task", ""] + _table(results["table1"], tasks)
    t7 = results["table7"]
    lines += ["", f"## Table 7: accuracy, MSP, ECE and CCD ({results['table7_task']})", ""]
    lines += _table(t7, ["accuracy", "msp", "ece", "ccd"])
    if results["table8"]:
        caps = list(results["table8"])
        rows = {l: {c: results["table8"][c][l] for c in caps} for l in results["table1"]}
        lines += ["", "## Table 8: CCD of the species tasks under each oracle capacity", ""] + _table(rows, caps)
        lines += [
            "",
            "Oracle accuracies: " + ", ".join(f"{c} {100 * a:.1f} %" for c, a in results["table8_oracles"].items()),
        ]
    lines += ["", f"## Baseline: DINO-style pairwise cosine ({results['baselines']['encoder']}; higher is closer)", ""]
    lines += _table(results["baselines"]["dino"], tasks)
    if "table2" in results:
        lines += table2_markdown(results)
    if "table3" in results:
        lines += table3_markdown({"table3": results["table3"], **results["table3_detail"]})
    lines += ["", "## Figures", "", "![Fig. 4](fig4_contact_sheet.png)", "", "![Fig. 5](fig5_sensitivity.png)", ""]
    return "\n".join(lines)
