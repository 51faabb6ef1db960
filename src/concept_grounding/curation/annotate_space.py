"""The annotation app as a Hugging Face Space (``concept-grounding annotate --space-folder``).

:func:`write_space` writes a folder to push as a Gradio Space: ``README.md`` (the card, with
``hf_oauth: true``: annotators sign in with Hugging Face and the app takes the annotator id from
the verified profile only), ``requirements.txt`` (``gradio[oauth]``, which the login needs),
``app.py`` (``concept-grounding annotate`` over the copied files), ``candidates/`` (the
``metadata.jsonl`` rows and their images; never ``truth.jsonl``) and ``annotations.db`` (a
consistent copy of the store; a Space's disk is not kept across restarts, so pass
``--hub-repo`` to push the answers to a dataset repo as they come).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from .annotate_job import AnnotateConfig

__all__ = ["CARD", "REQUIREMENTS", "write_space"]

#: the Space's card; ``hf_oauth`` turns on "Sign in with Hugging Face"
CARD = """---
title: SUB annotation
emoji: 🐦
colorFrom: yellow
colorTo: blue
sdk: gradio
app_file: app.py
hf_oauth: true
hf_oauth_expiration_minutes: 480
pinned: false
---

SUB's human studies (Bader et al., App. E), served by `concept-grounding annotate`. Sign in with
Hugging Face: your answers are stored under your Hugging Face username, and nobody else's
answers are shown to you or can be changed by you.
"""

#: the Space's requirements: the package and Gradio with its OAuth extra (the login button needs it)
REQUIREMENTS = "concept-grounding[space]\ngradio[oauth]>=5.0\n"

_APP = '''"""SUB annotation Space: written by `concept-grounding annotate --space-folder`."""
import sys

from concept_grounding.cli import main

sys.exit(main({args!r}))
'''


def _copy_candidates(rows: list[dict], root: Path, dest: Path) -> None:
    """``rows``' images under ``dest`` (relative names kept, absolute ones put in ``images/``) and their
    ``metadata.jsonl``."""
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for row in rows:
        name = Path(str(row["file_name"]))
        target = Path("images") / name.name if name.is_absolute() else name
        if ".." in target.parts:
            target = Path("images") / name.name
        (dest / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(name if name.is_absolute() else root / name, dest / target)
        out.append(json.dumps({**row, "file_name": target.as_posix()}, sort_keys=True))
    (dest / "metadata.jsonl").write_text("\n".join(out) + "\n")


def write_space(config: AnnotateConfig, rows: list[dict], root: Path, store_path: Path) -> Path:
    """Write the Space of the module docstring into ``config.space_folder``; returns the folder."""
    folder = Path(config.space_folder)
    folder.mkdir(parents=True, exist_ok=True)
    _copy_candidates(rows, root, folder / "candidates")
    with sqlite3.connect(store_path) as src, sqlite3.connect(folder / "annotations.db") as dst:
        src.backup(dst)
    args = [
        "annotate",
        "--candidates",
        "candidates",
        "--db",
        "annotations.db",
        "--per-attribute",
        str(config.per_attribute),
        "--per-pairing",
        str(config.per_pairing),
        "--seed",
        str(config.seed),
        "--port",
        "7860",
    ]
    if config.hub_repo:
        args += ["--hub-repo", config.hub_repo, "--hub-every", f"{config.hub_every:g}"]
    (folder / "app.py").write_text(_APP.format(args=args))
    (folder / "README.md").write_text(CARD)
    (folder / "requirements.txt").write_text(REQUIREMENTS)
    return folder
