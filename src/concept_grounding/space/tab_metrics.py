"""Metrics tab: upload predictions (CSV or JSON), compute one of our metrics, plot it.

JSON works for every metric: an object whose keys are the metric function's keyword
arguments (arrays as nested lists), e.g. ``{"theta": [[...]], "class_attributes":
[[...]]}`` for CGIM. CSV (one row per image) works for the metrics whose inputs are
per-image rows; :data:`METRICS` documents the columns. The handlers are plain functions.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import metrics, plotting
from ..metrics.examples import EXAMPLES
from .common import figure_to_image, png_to_image, stopper
from .inputs import UserInputError, read_table

__all__ = [
    "METRICS",
    "DEFAULT_METRIC",
    "MetricSpec",
    "args_markdown",
    "load_inputs",
    "compute_metric",
    "compute_example",
    "metric_help",
    "scalar_results",
]


@dataclass(frozen=True)
class MetricSpec:
    """How the tab calls one metric.

    Attributes:
        function: the metric (from :mod:`concept_grounding.metrics`).
        title: name shown in the dropdown.
        csv_help: Markdown describing the CSV columns (empty: JSON only).
        plot: a :mod:`concept_grounding.plotting` helper taking the result dict (optional).
    """

    function: Callable[..., dict[str, Any]]
    title: str
    csv_help: str = ""
    plot: Callable[[dict[str, Any]], Any] | None = None

    @property
    def name(self) -> str:
        return self.function.__name__


def _specs(*specs: MetricSpec) -> dict[str, MetricSpec]:
    """name -> spec; every metric the package exports (``metrics.__all__``) that the tab offers."""
    unknown = [s.name for s in specs if s.name not in metrics.__all__]
    if unknown:  # pragma: no cover - a programming error, caught by the tests
        raise ImportError(f"not metrics of concept_grounding.metrics: {unknown}")
    return {s.name: s for s in specs}


METRICS: dict[str, MetricSpec] = _specs(
    MetricSpec(
        metrics.concept_confidence_deviation,
        "Concept Confidence Deviation (CCD, ConceptBed)",
        "one row per image: `split` (`generated` or `real`), `label` (concept id), and either "
        "`p_yes` (VQA mode) or the oracle's softmax columns `p_0`, `p_1`, ... (classifier mode).",
    ),
    MetricSpec(
        metrics.sub_accuracy,
        "SUB accuracy (s+ / s-)",
        "one row per SUB image: `target_attribute` (S+, a CUB name such as `has_crown_color::black`), "
        "`removed_attributes` (S-, `;`-separated, may be empty), optional `reference_class`, and one "
        "column per concept the model predicts, named by its CUB attribute (`has_crown_color::black`, ...) "
        "and holding the predicted probability (binary mode).",
        plot=plotting.sub_bars,
    ),
    MetricSpec(
        metrics.concept_global_importance, "Concept Global Importance (CGIM types 1-3)", plot=plotting.cgim_histograms
    ),
    MetricSpec(metrics.concept_existence, "Concept Existence (CEM @ l)"),
    MetricSpec(metrics.concept_location, "Concept Location (CLM @ l, alpha)"),
)
#: The metric the tab opens on: SUB's own score, whose CSV is one row per image, the simplest to upload.
DEFAULT_METRIC = "sub_accuracy"


def metric_help(name: str) -> str:
    """Markdown: the metric's inputs, from its docstring's Args section and the CSV spec."""
    spec = _spec(name)
    lines = [f"### {spec.title}"]
    func = spec.function
    params = [p for p in inspect.signature(func).parameters.values() if p.kind != p.VAR_KEYWORD]
    required = [p.name for p in params if p.default is p.empty]
    optional = [p.name for p in params if p.default is not p.empty]
    aliases = "".join(f"; `{m}` for `{f}`" for m, f in EVALUATE_NAMES.get(name, {}).items())
    lines.append(
        f"**JSON keys** (the function's arguments): required `{'`, `'.join(required)}`"
        + (f"; optional `{'`, `'.join(optional)}`" if optional else "")
        + ". The `evaluate` module's "
        f"names work too{aliases}: its card's example, saved as a `.json` file, is a file to try."
    )
    lines.append(f"**CSV columns:** {spec.csv_help}" if spec.csv_help else "**CSV:** not supported; use JSON.")
    if name in EXAMPLES:
        lines.append(
            "**Example** (save as a `.json` file and upload it, or press *Compute the example*):\n"
            "```json\n" + json.dumps(EXAMPLES[name]) + "\n```"
        )
    doc = inspect.getdoc(func) or ""
    if "Args:" in doc:
        lines.append("**Arguments:**\n\n" + args_markdown(doc.split("Args:", 1)[1].split("Returns:", 1)[0]))
    return "\n\n".join(lines)


#: reStructuredText a docstring uses, and its Markdown: ``x`` -> `x`; :func:`~a.b` -> `b`.
_RST_LITERAL = re.compile(r"``(.+?)``")
_RST_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]*\.)?([^`]+)`")


def args_markdown(section: str) -> str:
    """A Google-style ``Args:`` section as a Markdown list, reStructuredText markup made Markdown.

    >>> print(args_markdown('''
    ...     mode: ``"vqa"`` or see
    ...         :func:`~concept_grounding.metrics.sub_accuracy`.
    ...     n_bins: number of bins.'''))
    - `mode`: `"vqa"` or see `sub_accuracy`.
    - `n_bins`: number of bins.
    """
    items: list[list[str]] = []
    for line in inspect.cleandoc(section).splitlines():
        head = re.match(r"^([\w, */]+):\s+(.*)$", line)
        if head and not line.startswith(" "):
            items.append([f"`{head.group(1)}`:", head.group(2)])
        elif items and line.strip():
            items[-1].append(line.strip())
    text = "\n".join("- " + " ".join(words) for words in items)
    return _RST_ROLE.sub(r"`\1`", _RST_LITERAL.sub(r"`\1`", text))


def _spec(name: str) -> MetricSpec:
    if name not in METRICS:
        raise UserInputError(f"Unknown metric {name!r}; pick one of {sorted(METRICS)}.")
    return METRICS[name]


def _numbers(values: list[Any], column: str) -> np.ndarray:
    try:
        return np.asarray([float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        raise UserInputError(f"Column `{column}` must hold numbers only.") from None


def _wide(table: dict[str, list[Any]], prefix: str) -> np.ndarray | None:
    cols = sorted(
        (c for c in table if c.startswith(prefix) and c[len(prefix) :].isdigit()), key=lambda c: int(c[len(prefix) :])
    )
    if not cols:
        return None
    if [int(c[len(prefix) :]) for c in cols] != list(range(len(cols))):
        raise UserInputError(f"Columns `{prefix}0`, `{prefix}1`, ... must be numbered without gaps.")
    return np.stack([_numbers(table[c], c) for c in cols], axis=1)


def _need(table: dict[str, Any], columns: list[str], metric: str) -> None:
    missing = [c for c in columns if c not in table]
    if missing:
        raise UserInputError(
            f"The file is missing column(s) {missing} needed by {metric}; it has {sorted(table)[:12]}."
        )


def _csv_kwargs(name: str, table: dict[str, list[Any]]) -> dict[str, Any]:
    """Turn CSV columns into the metric's keyword arguments."""
    if name == "concept_confidence_deviation":
        _need(table, ["split", "label"], name)
        split = np.asarray([str(s).strip().lower() for s in table["split"]])
        bad = sorted(set(split) - {"generated", "real"})
        if bad:
            raise UserInputError(f"Column `split` must be 'generated' or 'real'; found {bad[:3]}.")
        labels = _numbers(table["label"], "label")  # the metric refuses non-integral labels (1.7), naming them
        if "p_yes" in table:
            probs, mode = _numbers(table["p_yes"], "p_yes"), "vqa"
        else:
            probs, mode = _wide(table, "p_"), "classifier"
            if probs is None:
                raise UserInputError("CCD needs a `p_yes` column (VQA) or `p_0`, `p_1`, ... columns (classifier).")
        gen, real = split == "generated", split == "real"
        if not gen.any() or not real.any():
            raise UserInputError("CCD needs both `generated` and `real` rows.")
        return {
            "generated_probabilities": probs[gen],
            "generated_labels": labels[gen],
            "real_probabilities": probs[real],
            "real_labels": labels[real],
            "mode": mode,
        }
    if name == "sub_accuracy":
        _need(table, ["target_attribute", "removed_attributes"], name)
        concept_columns = [c for c in table if c.startswith("has_") and "::" in c]
        if not concept_columns:
            raise UserInputError(
                "SUB accuracy needs one probability column per concept, named like `has_crown_color::black`."
            )
        kwargs = {
            "scores": np.stack([_numbers(table[c], c) for c in concept_columns], axis=1),
            "target_attributes": [str(v).strip() for v in table["target_attribute"]],
            "removed_attributes": [
                [a.strip() for a in str(v).split(";") if a.strip()] for v in table["removed_attributes"]
            ],
            "concept_names": concept_columns,
        }
        if "reference_class" in table:
            kwargs["reference_classes"] = [str(v) for v in table["reference_class"]]
        return kwargs
    raise UserInputError(f"{METRICS[name].title} takes JSON only (its inputs are matrices).")


#: The ``evaluate`` modules' names of a metric's inputs (``metrics/<name>/``) that differ from the
#: function's: a JSON file written for the module (its card's example) works here too.
EVALUATE_NAMES: dict[str, dict[str, str]] = {
    "sub_accuracy": {"predictions": "scores"},
    "concept_confidence_deviation": {"predictions": "generated_probabilities", "references": "generated_labels"},
}


def _function_names(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the ``evaluate`` module's input names (:data:`EVALUATE_NAMES`) renamed to the function's."""
    renamed = dict(data)
    for module_name, function_name in EVALUATE_NAMES.get(name, {}).items():
        if module_name in renamed:
            if function_name in renamed:
                raise UserInputError(f"Give `{module_name}` or `{function_name}`, not both (the same input).")
            renamed[function_name] = renamed.pop(module_name)
    return renamed


def _json_kwargs(func: Any, data: dict[str, Any]) -> dict[str, Any]:
    data = _function_names(func.__name__, data)
    params = inspect.signature(func).parameters
    unknown = sorted(set(data) - set(params))
    if unknown:
        raise UserInputError(f"Unknown key(s) {unknown}; this metric accepts {list(params)}.")
    required = [n for n, p in params.items() if p.default is p.empty and p.kind != p.VAR_KEYWORD]
    missing = [n for n in required if n not in data]
    if missing:
        raise UserInputError(f"The JSON is missing key(s) {missing}; required: {required}.")
    out = {}
    for key, value in data.items():
        if isinstance(value, list) and key not in (
            "concept_names",
            "concept_parts",
            "target_attributes",
            "removed_attributes",
            "reference_classes",
        ):
            try:
                value = np.asarray(value, dtype=np.float64)
            except (TypeError, ValueError):
                raise UserInputError(f"Key `{key}` must be a (nested) list of numbers of equal lengths.") from None
        if isinstance(value, list) and key in ("top_l", "alphas"):
            value = tuple(value)
        out[key] = value
    for key in ("top_l", "alphas"):
        if key in out and isinstance(out[key], np.ndarray):
            out[key] = tuple(out[key].astype(int if key == "top_l" else float).tolist())
    return out


def load_inputs(name: str, path: str) -> dict[str, Any]:
    """Read an uploaded file and return the metric's keyword arguments."""
    spec = _spec(name)
    func = spec.function
    table = read_table(path)
    is_csv = all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in table.values()) and not str(
        path
    ).lower().endswith(".json")
    return _csv_kwargs(name, table) if is_csv else _json_kwargs(func, table)


def scalar_results(result: dict[str, Any]) -> dict[str, float]:
    """The scalar entries of a metric's result dict (NaN kept as None for JSON)."""
    out: dict[str, float] = {}
    for key, value in result.items():
        if isinstance(value, (bool, np.bool_)):
            continue
        if isinstance(value, (int, float, np.integer, np.floating)) or (
            isinstance(value, np.ndarray) and value.ndim == 0
        ):
            number = float(value)
            out[key] = None if math.isnan(number) else round(number, 6)  # type: ignore[assignment]
    return out


def _default_plot(name: str, scalars: dict[str, float]) -> np.ndarray:
    from matplotlib.figure import Figure

    items = [(k, v) for k, v in scalars.items() if v is not None]
    fig = Figure(figsize=(6, 0.35 * max(len(items), 3) + 1))  # not pyplot: concurrent requests
    ax = fig.subplots()
    ax.barh([k for k, _ in items][::-1], [v for _, v in items][::-1], color="#4a7fb5")
    ax.set_title(METRICS[name].title)
    ax.set_xlabel("value")
    fig.tight_layout()
    return figure_to_image(fig)


def compute_example(name: str) -> tuple[dict[str, float], np.ndarray]:
    """:func:`compute_metric` on the metric's example (:data:`concept_grounding.metrics.examples.EXAMPLES`),
    written as the JSON file a visitor would upload."""
    import tempfile
    from pathlib import Path

    if name not in EXAMPLES:
        raise UserInputError(f"{_spec(name).title} has no example.")
    with tempfile.TemporaryDirectory(prefix="metric-example-") as folder:
        path = Path(folder) / f"{name}.json"
        path.write_text(json.dumps(EXAMPLES[name]), encoding="utf-8")
        return compute_metric(name, str(path))


def compute_metric(
    name: str, path: str | None, cancelled: Callable[[], bool] | None = None
) -> tuple[dict[str, float], np.ndarray]:
    """Compute metric ``name`` on the uploaded file at ``path``. ``cancelled`` is asked before
    each stage (the metric, the plot); once it answers true the call stops with
    :class:`~.common.Cancelled`.

    Returns:
        (scalar results, plot as ``(H, W, 3)`` uint8). The plot is the metric's own
        plotting helper when the package has one, else a bar chart of the scalars.
    """
    if not path:
        raise UserInputError("Please upload a CSV or JSON file of predictions.")
    spec = _spec(name)
    stop = stopper(cancelled)
    kwargs = load_inputs(name, path)
    stop("the metric")
    try:
        result = spec.function(**kwargs)
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise UserInputError(f"{spec.title} rejected the inputs: {err}") from None
    scalars = scalar_results(result)
    if not scalars:
        raise UserInputError(f"{spec.title} returned no scalar result for these inputs.")
    image = None
    stop("the plot")
    if spec.plot is not None:
        try:
            image = png_to_image(spec.plot(result))
        except (TypeError, ValueError, KeyError):
            image = None
    return scalars, image if image is not None else _default_plot(name, scalars)
