"""The report folder of ``concept-grounding sub``: JSON, Markdown and PNG bar charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = []

#: breakdown level -> (SubEvaluation attribute, header)
BREAKDOWN_LEVELS: dict[str, tuple[str, str]] = {
    "group": ("by_group", "attribute group"),
    "attribute": ("by_attribute", "target attribute"),
    "class": ("by_class", "reference class"),
}
_COLUMNS = (("s_plus", "s+"), ("chance_s_plus", "chance s+"), ("s_minus", "s-"), ("chance_s_minus", "chance s-"))


def _rows(table: dict[str, dict[str, float]]) -> list[dict]:
    return [{"name": name, **values, "n": f"{values['n_s_plus']} / {values['n_s_minus']}"} for name, values in table.items()]


def write_sub_report(result: Any, out: Path, *, scores: bool = False) -> Path:
    """Write the report folder of ``result``, a :class:`~.sub.SubEvaluation` (read by its
    attributes only, so this module does not import :mod:`.sub`, which calls it):
    ``results.json`` (:meth:`SubEvaluation.summary`), ``report.md`` (headline and every
    breakdown, percent) and ``sub_per_<level>.png`` for group, attribute and class."""
    from ..bench.report import markdown_table, percent, write_json
    from ..plotting import sub_bars

    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", result.summary())
    if scores:
        extra = {} if result.none_scores is None else {"none_scores": result.none_scores}
        np.savez_compressed(out / "scores.npz", scores=result.scores, concept_names=np.array(result.concept_names),
                            **extra)
    lines = [
        f"# SUB accuracy of {result.model or 'the model'}",
        "",
        f"{result.num_images} SUB images from {result.source}; {result.mode} mode, protocol `{result.protocol}`;"
        f" {result.n_s_plus} images count for s+, {result.n_s_minus} for s-"
        f" ({result.skipped_target} targets and {result.skipped_removed} removed attributes the model has no"
        f" column for). Inference: {result.seconds:.1f} s ({result.images_per_second:.1f} images/s).",
        "",
        markdown_table([{"name": "model", "s_plus": result.s_plus, "s_minus": result.s_minus},
                        {"name": "random chance", "s_plus": result.chance_s_plus, "s_minus": result.chance_s_minus}],
                       (("s_plus", "s+"), ("s_minus", "s-")), first=("name", "")),
        "",
        f"s+ = {percent(result.s_plus)} % (chance {percent(result.chance_s_plus)} %), "
        f"s- = {percent(result.s_minus)} % (chance {percent(result.chance_s_minus)} %).",
        "",
    ]
    for level, (attr, header) in BREAKDOWN_LEVELS.items():
        png = f"sub_per_{level}.png"
        sub_bars(result.metric, out / png, level=level, title=f"s+ / s- per {header}")
        lines += [f"## By {header}", "", f"![s+ / s- per {header}]({png})", "",
                  markdown_table(_rows(getattr(result, attr)), _COLUMNS + (("n", "n (s+ / s-)"),), first=("name", header)),
                  ""]
    (out / "report.md").write_text("\n".join(lines))
    return out
