"""The page of a metric Space: every ``compute`` argument as one JSON object.

``evaluate.utils.launch_gradio_widget`` cannot serve these modules: it sends only the
feature columns, while each of them needs a compute-time argument (``theta``,
``real_probabilities`` / ``real_labels``, ``concept_names``), and evaluate 0.4.6 builds it
with ``gr.inputs``, gone since Gradio 4. Each ``metrics/<name>/app.py`` therefore calls
:func:`launch_metric_space`, which loads the module from the file next to it (not from its
folder: on a Space the folder is named ``app``, and ``evaluate.load("app")`` would import
``app/app.py`` itself) and serves one tab per config the card describes (``WIDGET_EXAMPLES`` in
the module file, config -> example; else the one ``WIDGET_EXAMPLE``): a JSON box filled with the
config's example, every argument's help taken from the module's own ``inputs_description``, and
the result, with NaN shown as ``"NaN"`` (JSON has no NaN). The page's title is the card's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "module_file",
    "load_metric",
    "widget_example",
    "widget_examples",
    "argument_help",
    "card_title",
    "json_safe",
    "compute_json",
    "metric_space",
    "launch_metric_space",
]

#: Longest JSON text the widget computes on (characters).
MAX_JSON_CHARS = 1_000_000


def module_file(folder: str | os.PathLike) -> Path:
    """The module script of a metric folder: its one ``*.py`` besides ``app.py``.

    Raises:
        FileNotFoundError: there is none, or more than one.
    """
    scripts = sorted(p for p in Path(folder).glob("*.py") if p.name != "app.py" and not p.name.startswith("_"))
    if len(scripts) != 1:
        raise FileNotFoundError(
            f"{folder}: expected one metric script besides app.py, found {[p.name for p in scripts]}"
        )
    return scripts[0]


def load_metric(folder: str | os.PathLike, config_name: str | None = None) -> Any:
    """``evaluate.load`` of the folder's module script, by its file path (whatever the folder's name)."""
    import evaluate

    return evaluate.load(str(module_file(folder)), config_name)


def widget_example(metric: Any) -> dict[str, Any]:
    """The ``WIDGET_EXAMPLE`` of the module file ``metric`` was loaded from."""
    import sys

    example = getattr(sys.modules.get(type(metric).__module__), "WIDGET_EXAMPLE", None)
    if not isinstance(example, dict):
        raise AttributeError(f"{type(metric).__name__}: its module defines no WIDGET_EXAMPLE dict")
    return example


def widget_examples(metric: Any) -> dict[str, dict[str, Any]]:
    """``config -> example`` of the module ``metric`` was loaded from: its ``WIDGET_EXAMPLES`` (the
    first config is the default), else ``{metric.config_name: WIDGET_EXAMPLE}``."""
    import sys

    examples = getattr(sys.modules.get(type(metric).__module__), "WIDGET_EXAMPLES", None)
    if isinstance(examples, dict) and examples:
        return dict(examples)
    return {metric.config_name: widget_example(metric)}


def argument_help(inputs_description: str, names: tuple[str, ...] = ()) -> dict[str, str]:
    r"""``argument -> help`` from the ``Args:`` section of a module's ``inputs_description`` (its
    ``_KWARGS_DESCRIPTION``): each ``name (type): text`` entry with its continuation lines; each of
    ``names`` documented inside another entry gets that entry.

    >>> argument_help("Args:\n    theta (`array`): weights,\n        one row per concept.\nReturns:\n    x")
    {'theta': '(`array`): weights, one row per concept.'}
    """
    import re

    found: dict[str, str] = {}
    section = re.search(r"Args:\n(.*?)(?:\n\S|\Z)", inputs_description or "", flags=re.S)
    name = None
    for line in (section.group(1) if section else "").splitlines():
        entry = re.match(r"\s{2,6}(\w+)\s*(.*)", line)
        if entry and not line.startswith(" " * 7):
            name, found[entry.group(1)] = entry.group(1), entry.group(2).strip()
        elif name and line.strip():
            found[name] += " " + line.strip()
    for other in names:  # documented inside another entry ("alphas (...), top_l (...)")
        if other not in found:
            owner = next((f"{key} {text}" for key, text in found.items() if re.search(rf"\b{other}\b", text)), None)
            if owner:
                found[other] = f"see {owner}"
    return found


def card_title(folder: str | os.PathLike) -> str | None:
    """The ``title`` of ``folder/README.md``'s YAML header (the metric card), or ``None``."""
    path = Path(folder) / "README.md"
    if not path.is_file():
        return None
    from huggingface_hub import SpaceCard

    title = SpaceCard.load(path).data.get("title")
    return str(title) if title else None


def json_safe(value: Any) -> Any:
    """``value`` with every NaN / infinity as the string ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``
    (JSON has no such numbers: Gradio would show ``null``).

    >>> json_safe({"ccd": float("nan"), "n": [1.0, float("-inf")]})
    {'ccd': 'NaN', 'n': [1.0, '-Infinity']}
    """
    import math

    from ..metrics.module_inputs import to_plain

    value = to_plain(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def compute_json(metric: Any, text: str) -> dict[str, Any]:
    """``metric.compute(**json.loads(text))``; a bad text or input raises ``ValueError`` in one line."""
    if len(text or "") > MAX_JSON_CHARS:
        raise ValueError(f"arguments: at most {MAX_JSON_CHARS:,} characters of JSON, got {len(text):,}")
    try:
        kwargs = json.loads(text or "")
    except json.JSONDecodeError as err:
        raise ValueError(f"arguments: not valid JSON ({err})") from None
    except RecursionError:
        raise ValueError("arguments: the JSON nests too deeply") from None
    if not isinstance(kwargs, dict):
        raise ValueError("arguments: expected one JSON object of compute() arguments")
    try:
        return metric.compute(**kwargs)
    except TypeError as err:
        raise ValueError(f"arguments: {err}") from None


def metric_space(metrics: dict[str, Any], examples: dict[str, dict[str, Any]], title: str | None = None) -> Any:
    """The metric Space's ``gr.Blocks``: the card's ``title`` and the module's description, then one
    tab per config (``metrics``: config -> the module loaded with it; ``examples``: its example),
    each with a JSON box, a table of the arguments' help, a Compute button (API name ``compute``
    for the first config, ``compute_<config>`` for the others) and the result."""
    import gradio as gr

    from ..fileio import markdown_table

    first = next(iter(metrics.values()))
    title = title or type(first).__name__
    with gr.Blocks(title=title, analytics_enabled=False) as demo:
        gr.Markdown(
            f"# {title}\n\n{first.description}\n\nEnter the `compute()` arguments as one JSON object "
            '(arrays as nested lists); each config\'s tab starts from its example. NaN is shown as "NaN".'
        )
        for index, (config, metric) in enumerate(metrics.items()):
            with gr.Tab(f"config: {config}", id=f"config-{config}"):
                example = examples[config]
                helps = argument_help(metric.inputs_description, tuple(example))
                rows = [[f"`{name}`", helps.get(name, "")] for name in example]
                gr.Markdown(f'`evaluate.load(..., "{config}")`\n\n' + markdown_table(["argument", "help"], rows))
                arguments = gr.Code(
                    json.dumps(example, indent=1),
                    language="json",
                    label="compute() arguments",
                    elem_id=f"metric-arguments-{config}",
                )
                button = gr.Button("Compute", variant="primary")
                result = gr.JSON(label="Result", elem_id=f"metric-result-{config}")
                button.click(
                    _runner(metric), arguments, result, api_name="compute" if index == 0 else f"compute_{config}"
                )
    return demo


def _runner(metric: Any):
    import gradio as gr

    def run(text: str) -> dict[str, Any]:
        try:
            return json_safe(compute_json(metric, text))
        except ValueError as err:
            raise gr.Error(" ".join(str(err).split())[:500], print_exception=False) from None

    return run


def launch_metric_space(app_file: str | os.PathLike) -> None:
    """What ``metrics/<name>/app.py`` runs: load the module next to ``app_file`` and serve
    :func:`metric_space` (host and port from ``GRADIO_SERVER_NAME`` / ``GRADIO_SERVER_PORT``)."""
    folder = Path(app_file).resolve().parent
    examples = widget_examples(load_metric(folder))
    metrics = {config: load_metric(folder, config) for config in examples}
    demo = metric_space(metrics, examples, card_title(folder))
    demo.queue(max_size=32).launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
        ssr_mode=False,
    )
