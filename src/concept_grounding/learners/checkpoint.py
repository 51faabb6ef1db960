"""A learner run's output folder and its resumable checkpoint (docs/guide/learners.md).

:func:`check_out` records a run's config in its folder and refuses a folder holding another run's;
:func:`save_checkpoint` writes ``accelerate``'s state so an interruption keeps the previous one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ..errors import UsageError, named
from .config import LearnConfig

__all__ = ["CHECKPOINT", "check_out", "save_checkpoint"]

#: the checkpoint folder's name under a run's work folder
CHECKPOINT = "checkpoint"

#: settings a resumed run may change (where it runs, how often it checkpoints)
_RESUME_FREE = (
    "device",
    "checkpoint_every",
    "threads",
    "prior_cache",
    "validation_prompt",
    "num_validation_images",
    "validation_steps",
    "validation_inference_steps",
)


def check_out(config: LearnConfig, out: Path) -> None:
    """Record the config in ``out`` or refuse one that holds another run's."""
    path = out / "config.json"
    text = config.to_json()

    def settled(settings: dict) -> dict:
        """The settings a resumed run must keep."""
        return {k: v for k, v in settings.items() if k not in _RESUME_FREE}

    if path.exists() and settled(json.loads(path.read_text())) != settled(json.loads(text)):
        raise UsageError(
            "holds a learner run with another config; use a fresh folder or the same settings", argument=named("out")
        )
    out.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(text)


def save_checkpoint(accelerator: Any, folder: Path) -> None:
    """``accelerator.save_state`` into ``folder``, swapped in whole (an interruption keeps the previous one).

    accelerate writes a state from the main process only: under :func:`~.train.learn_many`'s sharding the
    other processes' concepts keep no checkpoint (an interrupted one restarts, with the same result).
    """
    if not accelerator.is_main_process:
        return
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    accelerator.save_state(str(tmp))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
