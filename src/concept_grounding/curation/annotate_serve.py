"""Serving the annotation app (:func:`serve_app`): the project's web shell (docs/guide/web_shell.md) with the
keyboard shortcuts, no uploads and no file route that reaches the store or the private candidates folder
(docs/human_validation.md, "Who annotates")."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .annotate_app import CONCURRENCY, build_app, gradio_major
from .annotate_page import SHORTCUTS_JS, FilePath
from .study import SUB_STUDY_1, SUB_STUDY_2, Study
from .study_store import StudyStore

__all__ = ["launch_app", "serve_app"]


def launch_app(app: Any, *, gate: Any = None, **kwargs: Any) -> Any:
    """Launch ``app`` in the web shell (:func:`concept_grounding.web.shell.launch_blocks`: it takes no
    uploads), with the keyboard shortcuts in the page head (where this Gradio takes them). ``gate``:
    a :class:`~concept_grounding.web.limits.Gate` (default: the limits of the environment)."""
    from ..web.shell import launch_blocks

    if gradio_major() >= 6:
        kwargs.setdefault("head", SHORTCUTS_JS)
    return launch_blocks(app, gate=gate, takes_uploads=False, concurrency_limit=CONCURRENCY, **kwargs)


def serve_app(
    store: StudyStore,
    image_path: FilePath,
    *,
    port: int,
    private: Sequence[str | Path] = (),
    studies: Sequence[Study] = (SUB_STUDY_1, SUB_STUDY_2),
    **kwargs: Any,
) -> Any:
    """Build and launch the app on ``port``; returns it (``prevent_thread_lock=True`` to keep
    going). No file route serves anything of ours: the images travel inline, so no folder is
    an allowed path, and ``private`` (e.g. the candidates folder with its truth and metadata) and
    the store's files are blocked paths, which win over anything Gradio serves by default.
    ``image_path`` and ``studies``: as :func:`build_app`'s; ``kwargs``: :func:`launch_app`'s."""
    app = build_app(store, studies, image_path)
    db = store.path.resolve()
    blocked = sorted({str(Path(p).resolve()) for p in private} | {str(db), f"{db}-wal", f"{db}-shm", f"{db}-journal"})
    launch_app(app, server_port=port, allowed_paths=[], blocked_paths=blocked, **kwargs)
    return app
