"""Markdown tables and report folders for ``concept-grounding bench``.

Tables follow the layout of the SUB paper's Table 1 (binary concept models) and
Table 2 (open-vocabulary models): one row per model, columns ``s+`` and ``s-`` on SUB
and concept accuracy on all concepts and on the SUB attribute subset, in percent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["markdown_table", "percent", "write_json", "TABLE_COLUMNS", "HUMAN_ROWS"]

#: (key, header) of the SUB paper's Tables 1 and 2.
TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("s_plus", "SUB s+"),
    ("s_minus", "SUB s-"),
    ("concept_accuracy", "acc. (all concepts)"),
    ("concept_accuracy_sub", "acc. (SUB subset)"),
)

#: The human rows the SUB paper reports on real SUB / CUB (percent); they are facts about
#: people looking at real photos, shown for reference beside runs on real data only.
HUMAN_ROWS: dict[str, dict[str, float]] = {
    "table1": {"s_plus": 94.0, "s_minus": 96.8, "concept_accuracy": 79.4, "concept_accuracy_sub": 82.5},
    "table2": {"s_plus": 92.4, "s_minus": 97.3, "concept_accuracy": 69.3, "concept_accuracy_sub": 65.3},
}


def percent(value: float | None, digits: int = 1) -> str:
    """Format a fraction in [0, 1] as a percentage; ``None``/NaN as an en dash.

    >>> percent(0.4567), percent(None), percent(float("nan"))
    ('45.7', '–', '–')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{100.0 * value:.{digits}f}"


def markdown_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[tuple[str, str]],
    *,
    first: tuple[str, str] = ("name", "model"),
    fractions: bool = True,
) -> str:
    """A GitHub Markdown table; numeric cells are fractions shown as percent.

    >>> print(markdown_table([{"name": "CBM", "s_plus": 0.5}], [("s_plus", "s+")]))
    | model | s+ |
    |---|---|
    | CBM | 50.0 |
    """
    key0, head0 = first
    lines = ["| " + " | ".join([head0, *(h for _, h in columns)]) + " |", "|" + "---|" * (len(columns) + 1)]
    for row in rows:
        cells = [str(row.get(key0, ""))]
        for key, _ in columns:
            value = row.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                cells.append(percent(float(value)) if fractions else f"{value:.3g}")
            else:
                cells.append("–" if value is None else str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _jsonable(value: Any) -> Any:
    import numpy as np

    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: Path, payload: Any) -> None:
    """Write ``payload`` as indented JSON (numpy arrays and NaN made JSON-safe), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_jsonable(payload), indent=2))
    tmp.replace(path)
