"""Evaluation results on the Hub's terms: ``.eval_results/*.yaml`` files (Community Evals, Feb 2026).

A model repo's ``.eval_results/<name>.yaml`` is a list of results the Hub shows on the model page
and on the benchmark dataset's leaderboard. The schema followed (:data:`SCHEMA`) is the one of
``huggingface/hub-docs`` ``docs/hub/eval-results.md`` ("Adding Evaluation Results") and of
``huggingface_hub`` 2.4.0's ``_eval_results.py`` (``EvalResultEntry``,
``eval_result_entries_to_yaml``, which this module calls): per result ``dataset.id`` and
``dataset.task_id`` (required), ``dataset.revision``, ``value`` (required, a number),
``verifyToken``, ``date``, ``source`` (``url`` required when present; ``name``, ``user``,
``org``), ``evaluation_framework``, ``notes``.

Every command that evaluates models (``sub``, ``bench``, ``analyse``, ``cci-bench``, ``conceptbed``)
writes ``<out>/eval_results/<model>/<command>.yaml`` through :func:`write_eval_results`, beside its
``results.json`` and report (whose model cards keep the older ``model-index`` block). ``<model>``
is the model's Hub id with ``/`` as ``--`` (``openai--clip-vit-base-patch32``) or a local name,
which ``publish --results`` places under ``--namespace``. A dataset id without a namespace
(:data:`WORLD_SUB_DATASET`, the bird world rendered by the command) is the world dataset
``publish`` publishes: ``publish --results`` qualifies it and records the revision it pushed.
Values are the commands' own units (fractions in [0, 1]); a NaN is left out (YAML numbers only).

>>> entries = result_entries("Jessica-bader/SUB", {"s_plus": 0.25, "s_minus": float("nan")}, notes="paper protocol")
>>> entries
[{'dataset': {'id': 'Jessica-bader/SUB', 'task_id': 's_plus'}, 'value': 0.25, 'notes': 'paper protocol'}]
>>> check_eval_results(entries)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "SCHEMA",
    "WORLD_SUB_DATASET",
    "result_entries",
    "write_eval_results",
    "read_eval_results",
    "check_eval_results",
    "model_folder_name",
    "EVAL_RESULTS_DIR",
]

#: the folder of a command's ``--out`` that holds one sub-folder of ``.yaml`` files per evaluated model
EVAL_RESULTS_DIR = "eval_results"
#: the dataset id of results on the rendered bird world's SUB-style set (``publish`` adds the namespace)
WORLD_SUB_DATASET = "bird-world-sub"

_SOURCE = {
    "type": "object",
    "required": ["url"],
    "additionalProperties": False,
    "properties": {
        "url": {"type": "string", "minLength": 1},
        "name": {"type": "string"},
        "user": {"type": "string"},
        "org": {"type": "string"},
    },
}
#: JSON Schema of one ``.eval_results/*.yaml`` file (see the module docstring for its source)
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "required": ["dataset", "value"],
        "additionalProperties": False,
        "properties": {
            "dataset": {
                "type": "object",
                "required": ["id", "task_id"],
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "task_id": {"type": "string", "minLength": 1},
                    "revision": {"type": "string", "minLength": 1},
                },
            },
            "value": {"type": "number"},
            "verifyToken": {"type": "string"},
            "date": {"type": "string"},
            "source": _SOURCE,
            "evaluation_framework": {"type": "string"},
            "notes": {"type": "string"},
        },
    },
}


def result_entries(
    dataset_id: str,
    values: Mapping[str, float],
    *,
    revision: str | None = None,
    notes: str | None = None,
    source_url: str | None = None,
    source_name: str | None = None,
) -> list[dict[str, Any]]:
    """One result per ``task_id -> value`` of ``values`` (NaN left out), as the YAML file holds them.

    Built with ``huggingface_hub.EvalResultEntry`` and ``eval_result_entries_to_yaml``.
    """
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    entries = [
        EvalResultEntry(
            dataset_id=dataset_id,
            task_id=task,
            value=float(value),
            dataset_revision=revision,
            notes=notes,
            source_url=source_url,
            source_name=source_name,
        )
        for task, value in values.items()
        if value is not None and not math.isnan(float(value))
    ]
    return eval_result_entries_to_yaml(entries)


def model_folder_name(model: str) -> str:
    """The folder of a model's results: a Hub id with ``/`` as ``--``, else a file-safe slug.

    >>> model_folder_name("openai/clip-vit-base-patch32"), model_folder_name("CBM (joint)")
    ('openai--clip-vit-base-patch32', 'cbm-joint')
    """
    if re.fullmatch(r"[\w.-]+/[\w.-]+", model) and not Path(model).exists():
        return model.replace("/", "--")
    return re.sub(r"[^a-z0-9.]+", "-", Path(model).name.lower()).strip("-") or "model"


def check_eval_results(data: Any) -> None:
    """Raise a one-line ``ValueError`` unless ``data`` follows :data:`SCHEMA` (checked with ``jsonschema``
    when installed, else field by field)."""
    try:
        import jsonschema
    except ImportError:  # the base install: the same rules, by hand
        _check_by_hand(data)
        return
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(SCHEMA).iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the file"
        raise ValueError(f"eval results: {where}: {error.message}")


def _check_by_hand(data: Any) -> None:
    if not isinstance(data, list) or not data:
        raise ValueError("eval results: the file must be a non-empty list of results")
    for i, item in enumerate(data):
        dataset = item.get("dataset") if isinstance(item, dict) else None
        if not isinstance(dataset, dict) or not all(
            isinstance(dataset.get(k), str) and dataset[k] for k in ("id", "task_id")
        ):
            raise ValueError(f"eval results: {i}/dataset: needs a non-empty 'id' and 'task_id'")
        if isinstance(item.get("value"), bool) or not isinstance(item.get("value"), (int, float)):
            raise ValueError(f"eval results: {i}/value: must be a number")
        unknown = set(item) - set(SCHEMA["items"]["properties"])
        if unknown:
            raise ValueError(f"eval results: {i}: unknown field(s) {sorted(unknown)}")


def write_eval_results(out: str | Path, model: str, name: str, entries: list[dict[str, Any]]) -> Path | None:
    """Write ``<out>/eval_results/<model folder>/<name>.yaml`` (checked first); ``None`` (nothing
    written) when ``entries`` is empty."""
    import yaml

    if not entries:
        return None
    check_eval_results(entries)
    path = Path(out) / EVAL_RESULTS_DIR / model_folder_name(model) / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(entries, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def read_eval_results(folder: str | Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """``model folder -> file name -> results`` of an ``eval_results`` folder (or a folder holding one),
    each file checked.

    Raises:
        ValueError: no result file, or one that does not follow :data:`SCHEMA` (naming it).
    """
    import yaml

    root = Path(folder)
    root = root / EVAL_RESULTS_DIR if (root / EVAL_RESULTS_DIR).is_dir() else root
    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for path in sorted(root.glob("*/*.yaml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            check_eval_results(data)
        except (ValueError, yaml.YAMLError) as err:
            raise ValueError(f"--results: {path}: {' '.join(str(err).split())}") from None
        found.setdefault(path.parent.name, {})[path.stem] = data
    if not found:
        raise ValueError(f"--results: {folder} holds no eval_results/<model>/<name>.yaml file")
    return found
