"""The Gradio Space: TDG, SUB, CCI, concepts and metrics in a browser.

``build_demo()`` returns the ``gr.Blocks``; ``spaces/concept-grounding/app.py`` and
``concept-grounding space`` launch it. Each tab is a module ``tab_*`` of plain handler
functions (the tests call them directly) over the package's own code; Gradio is only
imported by :mod:`.blocks`, when the demo is built.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_demo", "launch"]


def build_demo(*args: Any, **kwargs: Any) -> Any:
    """See :func:`concept_grounding.space.blocks.build_demo`; without the ``[space]`` extra,
    one line says to install it (:class:`~concept_grounding.extras.MissingExtraError`)."""
    from ..extras import require_extra

    require_extra("space", "the Space")
    from .blocks import build_demo as _build

    return _build(*args, **kwargs)


def launch(demo: Any, host: str = "127.0.0.1", port: int = 7860, **kwargs: Any) -> Any:
    """Queue and launch a demo the way the Space does (bounded concurrency, uploads bounded
    at the server to :data:`~.inputs.MAX_UPLOAD_BYTES`, no SSR, no share link, quiet API docs)."""
    from .blocks import CONCURRENCY_LIMIT
    from .inputs import MAX_UPLOAD_BYTES

    demo.queue(default_concurrency_limit=CONCURRENCY_LIMIT, max_size=64)
    return demo.launch(server_name=host, server_port=port, share=False, ssr_mode=False, show_error=True,
                       footer_links=["api"], max_file_size=MAX_UPLOAD_BYTES, **kwargs)
