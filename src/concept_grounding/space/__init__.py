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


def launch(
    demo: Any,
    host: str = "127.0.0.1",
    port: int = 7860,
    *,
    warm: bool = True,
    proxies: tuple[str, ...] | None = None,
    **kwargs: Any,
) -> Any:
    """Queue and launch a demo in the project's web shell (:func:`concept_grounding.web.shell.launch_blocks`:
    body cap, read timeouts, uploads checked against the demo's :class:`~concept_grounding.web.limits.WebLimits`,
    each visitor's share of the queue, no ``deep_link``, no server path shown, the cache swept, no SSR,
    no share link), with bounded concurrency and quiet API docs.

    ``proxies`` (default :func:`~concept_grounding.web.limits.trusted_proxies`:
    ``$CONCEPT_GROUNDING_TRUSTED_PROXIES``) are the only peers whose ``X-Forwarded-For`` names the visitor.

    ``warm`` builds every tab's default model in a background thread at launch
    (:func:`~.blocks.warm_up`). A SIGTERM (a hosted Space stopping, ``kill``) closes the
    demo as Ctrl-C does, so the sweep's shutdown deletes the files it stored.
    """
    import signal
    import threading

    from ..web.limits import Gate
    from ..web.shell import launch_blocks
    from .blocks import CONCURRENCY_LIMIT, delete_served, warm_up

    gate = getattr(demo, "space_gate", None) or Gate()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    store = getattr(demo, "space_store", None)
    if warm and store is not None:
        _import_model_libraries()  # before two threads (warm-up, a first visitor) can race to import them
        store.warming = True  # before the first page can open
        threading.Thread(target=warm_up, args=(store,), name="space-warm-up", daemon=True).start()
    launched = dict(
        server_name=host, server_port=port, show_error=True, footer_links=["api"], proxies=proxies, **kwargs
    )
    if kwargs.get("prevent_thread_lock"):  # returns at once: the caller closes the Space
        return launch_blocks(demo, gate=gate, takes_uploads=True, concurrency_limit=CONCURRENCY_LIMIT, **launched)
    try:  # blocks until Ctrl-C or SIGTERM
        return launch_blocks(demo, gate=gate, takes_uploads=True, concurrency_limit=CONCURRENCY_LIMIT, **launched)
    except KeyboardInterrupt:  # before Gradio's own wait began (it was still checking its URL): close as it would
        server = getattr(demo, "server", None)
        if server is not None:
            server.close()  # its shutdown deletes the cache
        return None
    finally:
        delete_served()  # Gradio deletes its own cache files; the served PNGs are ours


def _import_model_libraries() -> None:
    """Import torch and the transformers / diffusers model classes the tabs build, on this thread.

    Their lazy modules are not safe to import for the first time from two threads at once: the
    warm-up thread and a visitor's first request raced there ("cannot import name
    'PreTrainedModel' from 'transformers'"). A library that is not installed is left to the
    tab that needs it to report."""
    try:
        import diffusers
        import torch  # noqa: F401
        import transformers
    except ImportError:
        return
    for module, names in (
        (transformers, ("PreTrainedModel", "CLIPModel", "CLIPTextModel", "T5EncoderModel")),
        (diffusers, ("DiffusionPipeline", "FluxPipeline", "AutoencoderKL", "FluxTransformer2DModel")),
    ):
        for name in names:
            getattr(module, name)


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM handler: stop the way Ctrl-C stops (Gradio closes the server and deletes its cache)."""
    raise KeyboardInterrupt
