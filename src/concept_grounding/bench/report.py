"""Markdown tables and report folders for ``concept-grounding bench``.

Tables follow the layout of the SUB paper's Table 1 (binary concept models) and
Table 2 (open-vocabulary models): one row per model, columns ``s+`` and ``s-`` on SUB
and concept accuracy on all concepts and on the SUB attribute subset, in percent.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..evaluation.report import percent, score_cells
from ..fileio import markdown_table
from .artifacts import BenchArtifacts, model_slug

if TYPE_CHECKING:
    from .config import BenchConfig
    from .data import BenchData

__all__ = ["percent", "slug", "finding", "bench_markdown", "human_report_rows", "HUMAN_AS_PUBLISHED"]

#: (key, header) of the SUB paper's Tables 1 and 2.
TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("s_plus", "SUB s+"),
    ("s_minus", "SUB s-"),
    ("concept_accuracy", "acc. (all concepts)"),
    ("concept_accuracy_sub", "acc. (SUB subset)"),
)

#: Extra Table 1 columns that only the world can fill, and the class accuracy.
WORLD_COLUMNS: tuple[tuple[str, str], ...] = (
    ("concept_accuracy_exact", "acc. vs exact labels"),
    ("class_accuracy", "class acc."),
)

#: The human rows the SUB paper reports on real SUB / CUB (percent), typed in from the paper: shown
#: beside runs on real data only, on their own line labelled "as published"
#: (:data:`~concept_grounding.evaluation.human_rows.AS_PUBLISHED`). The computed Human rows come from
#: study-2 annotations (:func:`human_report_rows`).
HUMAN_AS_PUBLISHED: dict[str, dict[str, float]] = {
    "table1": {"s_plus": 94.0, "s_minus": 96.8, "concept_accuracy": 79.4, "concept_accuracy_sub": 82.5},
    "table2": {"s_plus": 92.4, "s_minus": 97.3, "concept_accuracy": 69.3, "concept_accuracy_sub": 65.3},
}


def human_report_rows(sub: str | None, source: str) -> dict[str, list[dict]]:
    """The Human rows of Tables 1-2 (``{"table1": [...], "table2": [...]}``, fractions):
    computed from the study-2 annotations that ``curate`` wrote beside the SUB source
    (:func:`~concept_grounding.evaluation.human_rows.human_rows_beside`) when there are any, then,
    on real data, the paper's numbers on a separate line marked "as published"."""
    from ..evaluation.human_rows import AS_PUBLISHED, human_rows_beside

    computed = human_rows_beside(sub)
    out: dict[str, list[dict]] = {}
    for table in ("table1", "table2"):
        rows = [computed[table]] if computed else []
        if source != "world":
            rows.append({"name": AS_PUBLISHED, **{k: v / 100 for k, v in HUMAN_AS_PUBLISHED[table].items()}})
        out[table] = rows
    return out


def slug(name: str) -> str:
    """Folder / file name of a model: ``"CBM (ind., per-img.)"`` -> ``"cbm-ind-per-img"``.

    >>> slug("CBM (ind., per-img.)")
    'cbm-ind-per-img'
    """
    return model_slug(name)


def finding(rows: list[dict]) -> str:
    cbms = [r for r in rows if not r.get("reference") and r["name"].startswith(("CBM", "CEM"))]
    if not cbms:
        return "No CBM was trained, so the SUB paper's finding cannot be checked."
    measured = [float(r["s_plus"]) for r in cbms if r["s_plus"] is not None and math.isfinite(r["s_plus"])]
    mean_plus = float(np.mean(measured)) if measured else math.nan  # no "Mean of empty slice" warning
    below = [r["name"] for r in cbms if r["s_plus"] < r["chance_s_plus"]]
    verdict = "reproduces" if len(below) > len(cbms) / 2 else "does not reproduce"
    return (
        f"SUB paper's finding (CBMs detect substituted attributes below chance): **{verdict}** here. "
        f"{len(below)} of {len(cbms)} CBM/CEM variants score s+ below chance (50 %); their mean s+ is "
        f"{percent(mean_plus)} %."
    )


def bench_markdown(
    config: BenchConfig,
    data: BenchData,
    columns,
    t1,
    t2,
    posthoc,
    timings,
    plots: list[tuple[str, str]],
    ccd: dict[str, Any] | None = None,
) -> str:
    """The bench's ``report.md`` (Tables 1-2, post-hoc CBM, CCD, run time); the runner writes it
    with :func:`~concept_grounding.fileio.write_report`."""
    cols1 = TABLE_COLUMNS + (WORLD_COLUMNS if data.source == "world" else (("class_accuracy", "class acc."),))
    chance1 = {
        "name": "random chance",
        "s_plus": 0.5,
        "s_minus": 0.5,
        "concept_accuracy": 0.5,
        "concept_accuracy_sub": 0.5,
        "concept_accuracy_exact": 0.5,  # a coin per binary concept (App. F)
        "class_accuracy": 1.0 / len(data.class_names),
    }  # a uniform guess among the classes
    human = human_report_rows(config.sub, data.source)
    rows1 = [chance1, *t1, *human["table1"]]
    lines = [
        f"# SUB benchmark on the {'bird world' if data.source == 'world' else 'CUB + SUB'}",
        "",
        f"{data.train.num_rows} train / {data.test.num_rows} test images of {len(data.class_names)} classes;"
        f" {data.sub.num_rows} SUB images; {len(columns)} concepts ({config.concepts}); image size"
        f" {config.world.image_size} px; seed {config.world.seed}; {config.threads} CPU thread(s). Configuration:"
        " [config.json](config.json); every number: [results.json](results.json) (the same bytes for the same"
        " configuration on the same machine); wall times and the machine: [timings.json](timings.json).",
        "",
        "## Table 1: binary concept models",
        "",
        "s+: share of SUB images whose substituted attribute S+ is predicted present (p > 0.5); s-: share of"
        " removed attributes S- predicted absent. Concept accuracy on the test split against class-level labels"
        " (the CBM convention), on all concepts and on the SUB attributes among them"
        + ("; on the world also against the exact per-image labels." if data.source == "world" else "."),
        "",
        markdown_table(*score_cells(rows1, cols1)),
        "",
        finding(t1),
        "",
        *(f"![{name}: s+ / s- per attribute]({file})" for name, file in plots[:1]),
        "",
        "s+ / s- breakdowns: " + ", ".join(f"[{name}]({file})" for name, file in plots) + ".",
        "",
    ]
    if t2:
        chance2 = {
            "name": "random chance",
            "s_plus": t2[0]["chance_s_plus"],
            "s_minus": t2[0]["chance_s_minus"],
            **{k.removeprefix("chance_"): v for k, v in t2[0].items() if k.startswith("chance_concept_accuracy")},
        }
        lines += [
            "## Table 2: open-vocabulary models (group mode)",
            "",
            "Within S+'s attribute group, the value with the highest image-text similarity is predicted present."
            " Chance follows SUB appendix F, for the concept-accuracy columns too (a uniform pick within each"
            " group, scored against every label).",
            "",
            markdown_table(
                *score_cells(
                    [chance2, *t2, *human["table2"]],
                    TABLE_COLUMNS + (("concept_accuracy_exact", "acc. vs exact labels"),),
                )
            ),
            "",
        ]
    if posthoc:
        ex, loc, cg = posthoc["existence"], posthoc["location"], posthoc["cgim"]
        ls = (1, 3, 5)
        lines += [
            "## Post-hoc CBM (Aysel et al.)",
            "",
            f"Backbone class accuracy through the concept bottleneck: {percent(posthoc['class_accuracy'])} %.",
            "",
            "### CGIM (concept global importance, cosine similarity with the class-level truth)",
            "",
            markdown_table(
                *score_cells(
                    [
                        {"name": level, **{f"t{t}": cg.get(f"{level}_type{t}") for t in (1, 2, 3)}}
                        for level in ("concept", "class")
                    ],
                    [("t1", "type 1 (theta)"), ("t2", "type 2 (U*)"), ("t3", "type 3 (theta * U*)")],
                    first=("name", "per"),
                    fractions=False,
                )
            ),
            "",
            "![CGIM histograms](cgim_histograms.png)",
            "",
            "### Concept existence (top-l concepts by theta * u that are truly present)",
            "",
            markdown_table(
                *score_cells(
                    [
                        {"name": subset, **{f"l{l}": ex.get(f"existence@{l}{suffix}") for l in ls}}
                        for subset, suffix in (("all test images", ""), ("correctly classified", "_correct"))
                    ],
                    [(f"l{l}", f"l = {l}") for l in ls],
                    first=("name", "images"),
                )
            ),
            "",
            "### Concept location (part centre inside the alpha-scaled top region of the CoAM)",
            "",
            markdown_table(
                *score_cells(
                    [
                        {"name": f"alpha = {a}", **{f"l{l}": loc.get(f"location@{l}_alpha{a}") for l in ls}}
                        for a in (1, 3, 6)
                    ],
                    [(f"l{l}", f"l = {l}") for l in ls],
                    first=("name", "region"),
                )
            ),
            "",
            "![CoAM gallery](coam_gallery.png)",
            "",
        ]
    if ccd:
        lines += [
            "## Concept Confidence Deviation (ConceptBed) of the SUB images",
            "",
            f"Oracle: the class softmax of {ccd['oracle']}; concept = reference class; real = test images of that"
            " class. CCD > 0: the counterfactuals look less like their class to the oracle than real birds do.",
            "",
            markdown_table(
                *score_cells(
                    [{"name": r, **ccd[r]} for r in ("per_concept", "pooled")],
                    [
                        ("ccd", "CCD"),
                        ("accuracy", "oracle acc. (SUB)"),
                        ("real_accuracy", "oracle acc. (real)"),
                        ("msp", "MSP"),
                        ("ece", "ECE"),
                    ],
                    first=("name", "reduction"),
                    fractions=False,
                )
            ),
            "",
        ]
    lines += ["## Run time", "", ", ".join(f"{k}: {v:.0f} s" for k, v in timings.items()), ""]
    return "\n".join(lines)


def plot_breakdowns(rows: list[dict], out: Path) -> list[tuple[str, str]]:
    """Per-attribute s+ / s- bars for every evaluated model, plus per-group and per-class
    bars for the first one; returns (title, file) pairs in report order."""
    from ..plotting import sub_bars

    files = BenchArtifacts(out)
    written = []
    models = [r for r in rows if not r.get("reference")]
    for row in models:
        path = files.breakdown_plot(row["name"])
        sub_bars(row, path, title=f"{row['name']}: s+ / s- per substituted attribute")
        written.append((row["name"], path.name))
    for level in ("group", "class") if models else ():
        path = files.breakdown_plot(models[0]["name"], level)
        sub_bars(models[0], path, level=level, title=f"{models[0]['name']}: s+ / s- per {level}")
        written.append((f"{models[0]['name']} per {level}", path.name))
    return written
