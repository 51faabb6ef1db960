"""The statistics of the world TDG experiment (``benchmarks/bench_tdg_world.py``): the table of
the finding with 95 % cluster-bootstrap intervals over pairings, its power, and the report.

A *record* is one judged image: ``reference_class``, ``target_attribute``, ``group``,
``method`` and the judge's verdicts :data:`METRICS` (``success``: S+ found and species kept;
``s_plus_found``; ``species_kept``; ``s_minus_removed``; ``p_s_plus``: the judge's p(S+)),
plus ``pairing_guide_positive`` (:func:`mark_guide_positive`). The math lives in
:mod:`concept_grounding.judge.stats` (:func:`~concept_grounding.judge.stats.summarise`,
:func:`~concept_grounding.judge.stats.paired_sample_size`,
:func:`~concept_grounding.judge.stats.detectable_difference`); here it is applied per method,
group and pairing.

>>> rows = [{"reference_class": c, "target_attribute": "a", "success": s, "s_plus_found": s, "species_kept": 1,
...          "s_minus_removed": 0, "p_s_plus": 0.5} for c, s in (("x", 1), ("y", 0))]
>>> summarise_rows(rows, bootstrap=10, seed=0)["success"]["mean"]
0.5
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from concept_grounding.fileio import markdown_table

__all__ = ["METRICS", "summarise_rows", "mark_guide_positive", "table", "power", "ci", "write_world_tdg_report"]

#: The per-image verdicts summarised (all 0/1 but ``p_s_plus``).
METRICS = ("success", "s_plus_found", "species_kept", "s_minus_removed", "p_s_plus")


def pairing_key(record: dict) -> str:
    """``"<reference class>|<target attribute>"``: the cluster of the bootstrap."""
    return f"{record['reference_class']}|{record['target_attribute']}"


def summarise_rows(rows: list[dict], bootstrap: int, seed: int) -> dict[str, Any]:
    """Per metric of :data:`METRICS`: ``{"mean", "ci95": [lo, hi], "n"}``, the interval a
    cluster bootstrap over pairings (``bootstrap`` resamples, seeded)."""
    from concept_grounding.judge.stats import summarise

    clusters = np.array([pairing_key(r) for r in rows])
    return {k: summarise(np.array([r[k] for r in rows], float), clusters, bootstrap, seed) for k in METRICS}


def mark_guide_positive(records: list[dict]) -> None:
    """Set each record's ``pairing_guide_positive``: a pairing's guide "shows S+" when most of
    TDG's guide images for it do (``guide_s_plus`` of its ``method == "tdg"`` records; a tie is not a majority).

    >>> recs = [{"reference_class": "x", "target_attribute": "a", "method": "tdg", "guide_s_plus": g}
    ...         for g in (1, 1, 0)]
    >>> mark_guide_positive(recs); recs[0]["pairing_guide_positive"]
    True
    """
    votes: dict[str, list] = defaultdict(list)
    for r in records:
        if r["method"] == "tdg":
            votes[pairing_key(r)].append(r["guide_s_plus"])
    positive = {k for k, v in votes.items() if np.mean(v) > 0.5}
    for r in records:
        r["pairing_guide_positive"] = pairing_key(r) in positive


def table(records: list[dict], validated: tuple[str, ...], bootstrap: int, seed: int) -> dict[str, Any]:
    """The finding: ``overall`` and ``guide_positive`` (validated groups only), ``per_group``
    (every group), ``per_pairing`` (the verdicts of every record), per method (prompting first,
    then tdg, then the others by name); ``excluded_groups``: the groups outside ``validated``."""
    out: dict[str, Any] = {
        "validated_groups": list(validated),
        "overall": {},
        "guide_positive": {},
        "per_group": {},
        "per_pairing": {},
        "excluded_groups": sorted({r["group"] for r in records} - set(validated)),
    }
    methods = sorted({r["method"] for r in records}, key=lambda m: (m != "prompting", m != "tdg", m))
    for method in methods:
        rows = [r for r in records if r["method"] == method and r["group"] in validated]
        if not rows:
            continue
        out["overall"][method] = summarise_rows(rows, bootstrap, seed)
        pos = [r for r in rows if r["pairing_guide_positive"]]
        out["guide_positive"][method] = summarise_rows(pos, bootstrap, seed) if pos else None
        for group in sorted({r["group"] for r in records}):
            sub = [r for r in records if r["method"] == method and r["group"] == group]
            if sub:
                out["per_group"].setdefault(group, {})[method] = summarise_rows(sub, bootstrap, seed)
        for r in [r for r in records if r["method"] == method]:
            key = pairing_key(r)
            out["per_pairing"].setdefault(key, {}).setdefault(method, []).append(
                {k: r[k] for k in ("success", "s_plus_found", "species_kept", "s_minus_removed", "p_s_plus")}
            )
    return out


def power(tab: dict) -> dict[str, Any]:
    """Images per method for 80 % power at a 3-point difference (at the measured prompting
    success, clipped to [0.01, 0.96], and at the worst case 50 %), the images per pairing that
    makes over the table's pairings, and the difference this run's images per method can detect
    (two-sided z test of two proportions at alpha 0.05, :func:`~concept_grounding.judge.stats.paired_sample_size`)."""
    from concept_grounding.judge.stats import detectable_difference, paired_sample_size

    p = tab["overall"].get("prompting", {}).get("success", {}).get("mean", 0.5)
    p = min(max(float(p), 0.01), 0.96)
    n = tab["overall"].get("prompting", {}).get("success", {}).get("n", 0)
    need = paired_sample_size(p, p + 0.03)
    return {
        "p_prompting": p,
        "images_needed_for_3_points": need,
        "images_needed_worst_case": paired_sample_size(0.5, 0.53),
        "images_per_method": n,
        "pairings": len(tab["per_pairing"]),
        "images_per_pairing_needed": int(np.ceil(need / max(1, len(tab["per_pairing"])))),
        "detectable_difference": detectable_difference(n, p) if n else float("nan"),
    }


def ci(d: dict | None, pct: bool = True) -> str:
    """``"mean % [lo, hi]"`` of a :func:`summarise_rows` entry (``pct=False``: 3 decimals); ``"-"`` for none.

    >>> ci({"mean": 0.5, "ci95": [0.25, 0.75]}), ci({"mean": 0.5, "ci95": [0.25, 0.75]}, pct=False), ci(None)
    ('50.0 % [25.0, 75.0]', '0.500 [0.250, 0.750]', '-')
    """
    if not d:
        return "-"
    if not pct:
        return f"{d['mean']:.3f} [{d['ci95'][0]:.3f}, {d['ci95'][1]:.3f}]"
    return f"{100 * d['mean']:.1f} % [{100 * d['ci95'][0]:.1f}, {100 * d['ci95'][1]:.1f}]"


def substitution_lines(results: dict) -> list[str]:
    """The report's substitution section: overall and guide-positive tables, per group, and the power."""
    tab, pw = results["table"], results["power"]
    heads = [
        "method",
        "success (S+ found and species kept)",
        "S+ found",
        "species kept",
        "S- removed",
        "mean judge p(S+)",
    ]

    def row(m: str, d: dict) -> list[str]:
        return [
            m,
            ci(d["success"]),
            ci(d["s_plus_found"]),
            ci(d["species_kept"]),
            ci(d["s_minus_removed"]),
            ci(d["p_s_plus"], pct=False),
        ]

    methods = list(tab["overall"])
    per_group = [
        [g, "yes" if g in tab["validated_groups"] else "no", *(ci(d[m]["success"]) if m in d else "-" for m in methods)]
        for g, d in tab["per_group"].items()
    ]
    lines = [
        "## Substitution, every SUB pairing of the validated groups (95 % bootstrap intervals over pairings)",
        "",
        f"Validated groups: {', '.join(tab['validated_groups'])}.",
        f"Left out (the judge misses a bar there): {', '.join(tab['excluded_groups']) or 'none'}.",
        "",
        markdown_table(heads, [row(m, d) for m, d in tab["overall"].items()]),
        "",
        "### Pairings whose TDG guide shows S+",
        "",
        markdown_table(heads, [row(m, d) for m, d in tab["guide_positive"].items() if d]),
        "",
        "### Per attribute group (success; every group, validated or not)",
        "",
        markdown_table(["group", "validated", *methods], per_group),
    ]
    lines += [
        "",
        f"**Power.** At the measured prompting success ({100 * pw['p_prompting']:.1f} %), 80 % power for a "
        f"3-point difference needs {pw['images_needed_for_3_points']} images per method "
        f"({pw['images_per_pairing_needed']} per pairing; worst case p = 50 %: {pw['images_needed_worst_case']}). "
        f"This run has {pw['images_per_method']} per method, which detects a difference of "
        f"{100 * pw['detectable_difference']:.1f} points with 80 % power.",
        "",
    ]
    return lines


def write_world_tdg_report(results: dict, path: Path) -> None:
    """``report.md`` of a results dict (:func:`~.world_tdg.run_world_tdg`): validation, quality,
    substitution (only when the judge meets the bars), eta sweep, filter, time."""
    v = results["validation"]
    lines = [
        "# TDG vs prompting on the world-trained Flux (bench_tdg_world.py)",
        "",
        f"Command: `{results['command']}`; wall time {results['seconds']:.0f} s.",
        "",
        "## Judge validation (held-out exact edits and renders of the generator's world)",
        "",
        v["markdown"],
        "",
    ]
    if "quality" in results:
        q = results["quality"]
        lines += [
            "## Generator quality on in-distribution prompts (by the judge)",
            "",
            markdown_table(
                [
                    "species agreement",
                    "prompted attributes found",
                    "colour guides ('a photo of a bird with S+') show S+",
                ],
                [
                    [
                        f"{100 * q['species_agreement']:.1f} % ({q['n_species_images']} images)",
                        f"{100 * q['prompted_attributes_found']:.1f} % ({q['n_attribute_images']})",
                        f"{100 * q['guide_s_plus_shown']:.1f} % ({q['n_guide_images']})",
                    ]
                ],
            ),
            "",
            "Bars (docs/tdg_world/validation.md): each >= 85 %: **"
            + (
                "met"
                if min(q["species_agreement"], q["prompted_attributes_found"], q["guide_s_plus_shown"]) >= 0.85
                else "NOT met"
            )
            + "**.",
            "",
        ]
    if not v["supports_finding"]:
        lines += [
            "## No substitution finding",
            "",
            "The judge misses the validation bars (" + "; ".join(v["failures"]) + "), so its verdicts on "
            "generated images would measure the judge, not TDG. No substitution table is printed.",
            "",
        ]
    elif "table" in results:
        lines += substitution_lines(results)
    if "eta_sweep" in results:
        sweep = [
            [k, ci(d["s_plus_found"]), ci(d["species_kept"]), ci(d["success"]), ci(d["p_s_plus"], pct=False)]
            for k, d in results["eta_sweep"]["results"].items()
        ]
        lines += [
            f"## Eta sweep ({results['eta_sweep']['pairings']} pairings of the validated groups)",
            "",
            markdown_table(["TDG setting", "S+ found", "species kept", "success", "mean p(S+)"], sweep),
            "",
        ]
    if "filter" in results:
        f = results["filter"]
        sv = f["scorer_validation"]["overall"]
        lines += [
            "## VQA filter (world-CLIP scorer) vs the judge",
            "",
            f"The scorer on {f['scorer_validation']['edits']} exact edits: AUROC {sv['auroc']:.3f} (edit vs original), "
            f"S+ top answer on edits {100 * sv['s_plus_accuracy']:.1f} %, "
            f"on originals {100 * sv['false_s_plus']:.1f} %.",
            "",
            markdown_table(
                [
                    "method",
                    "kept / images",
                    "judge success, all",
                    "judge success, kept",
                    "AUROC(filter p(S+), judge S+)",
                ],
                [
                    [
                        m,
                        f"{f[m]['kept']} / {f[m]['images']}",
                        f"{100 * f[m]['judge_success_all']:.1f} %",
                        f"{100 * f[m]['judge_success_kept']:.1f} %",
                        f"{f[m]['auroc_filter_p_vs_judge_s_plus']:.3f}",
                    ]
                    for m in ("prompting", "tdg")
                ],
            ),
            "",
        ]
    if "timing" in results:
        t = results["timing"]
        lines += [
            "## Time",
            "",
            f"TDG pair {t['tdg_pair_s']:.3f} s vs FluxPipeline batch-2 {t['flux_batch2_s']:.3f} s: "
            f"ratio **{t['ratio']:.3f}** (CPU time, median of {t['rounds']} interleaved rounds, range "
            f"{t['ratio_min']:.3f}-{t['ratio_max']:.3f}; A/A control {t['ratio_aa']:.3f}).",
            "",
        ]
    if "table" in results:
        lines += ["![contact sheet](contact_sheet.png)", ""]
    path.write_text("\n".join(lines))
