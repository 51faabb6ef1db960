"""The page of a metric Space: every ``compute`` argument as one JSON object.

``evaluate.utils.launch_gradio_widget`` cannot serve these modules: it sends only the
feature columns, while each of them needs a compute-time argument (``theta``,
``real_probabilities`` / ``real_labels``, ``concept_names``), and evaluate 0.4.6 builds it
with ``gr.inputs``, gone since Gradio 4. Each ``metrics/<name>/app.py`` therefore calls
:func:`launch_metric_space`, which loads the module from the file next to it (not from its
folder: on a Space the folder is named ``app``, and ``evaluate.load("app")`` would import
``app/app.py`` itself) and serves one JSON box, filled with the module's own example
(``WIDGET_EXAMPLE`` in the module file, the example of its card), and the result.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["module_file", "load_metric", "widget_example", "compute_json", "metric_space", "launch_metric_space"]

#: Longest JSON text the widget computes on (characters).
MAX_JSON_CHARS = 1_000_000


def module_file(folder: str | os.PathLike) -> Path:
    """The module script of a metric folder: its one ``*.py`` besides ``app.py``.

    Raises:
        FileNotFoundError: there is none, or more than one.
    """
    scripts = sorted(p for p in Path(folder).glob("*.py") if p.name != "app.py" and not p.name.startswith("_"))
    if len(scripts) != 1:
        raise FileNotFoundError(f"{folder}: expected one metric script besides app.py, found {[p.name for p in scripts]}")
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


def metric_space(metric: Any, example: dict[str, Any]) -> Any:
    """The metric Space's ``gr.Blocks``: its description, one JSON box (``example`` to start
    with), a Compute button and the result."""
    import gradio as gr

    def run(text: str) -> dict[str, Any]:
        try:
            return compute_json(metric, text)
        except ValueError as err:
            raise gr.Error(" ".join(str(err).split())[:500], print_exception=False) from None

    title = type(metric).__name__
    with gr.Blocks(title=title, analytics_enabled=False) as demo:
        gr.Markdown(f"# {title}\n\n{metric.description}\n\nEnter the `compute()` arguments as one JSON "
                    "object (arrays as nested lists); the example below is the card's.")
        arguments = gr.Code(json.dumps(example, indent=1), language="json", label="compute() arguments",
                            elem_id="metric-arguments")
        button = gr.Button("Compute", variant="primary")
        result = gr.JSON(label="Result", elem_id="metric-result")
        button.click(run, arguments, result, api_name="compute")
    return demo


def launch_metric_space(app_file: str | os.PathLike) -> None:
    """What ``metrics/<name>/app.py`` runs: load the module next to ``app_file`` and serve
    :func:`metric_space` (host and port from ``GRADIO_SERVER_NAME`` / ``GRADIO_SERVER_PORT``)."""
    metric = load_metric(Path(app_file).resolve().parent)
    demo = metric_space(metric, widget_example(metric))
    demo.queue(max_size=32).launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                                   server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")), ssr_mode=False)
