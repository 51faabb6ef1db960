"""Models the Space ships with the package instead of training them on first use.

Each shipped model is a folder under ``concept_grounding/assets/`` holding the saved model
and ``space_build.json``, the *recipe* it was trained with (sizes, epochs, seed, as a
dict). A tab loads the folder only when its own recipe for the running Space equals the
record exactly (:func:`shipped_folder`); any other build trains its model as before. The
folders are written by :func:`write_shipped`, called by each tab's ``ship_*`` function.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["ASSETS", "RECORD", "shipped_folder", "shipped_record", "write_shipped"]

#: The package's folder of shipped weights (``package-data``: ``assets/**``).
ASSETS = Path(__file__).resolve().parents[1] / "assets"
#: File name of a shipped model's recipe record.
RECORD = "space_build.json"


def shipped_record(folder: Path) -> dict[str, Any] | None:
    """The recipe recorded with the shipped model in ``folder``, or ``None`` when there is none."""
    record = Path(folder) / RECORD
    return json.loads(record.read_text()) if record.is_file() else None


def shipped_folder(folder: Path, recipe: dict[str, Any]) -> Path | None:
    """``folder`` when it holds a model shipped for exactly ``recipe``, else ``None``.

    >>> shipped_folder(ASSETS / "no-such-model", {"seed": 0}) is None
    True
    """
    return Path(folder) if shipped_record(folder) == recipe else None


def write_shipped(model: Any, folder: Path, recipe: dict[str, Any]) -> Path:
    """Save ``model`` (``save_pretrained``) and its ``recipe`` record into ``folder``; return it."""
    folder = Path(folder)
    model.save_pretrained(folder)
    (folder / RECORD).write_text(json.dumps(recipe, indent=1) + "\n")
    return folder
