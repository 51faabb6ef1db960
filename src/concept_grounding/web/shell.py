"""The one web shell every app of the project is served in: the Space, the annotation app and any later one.

:func:`launch_blocks` queues and launches a ``gr.Blocks`` behind the same edge, whatever the app:
read timeouts (:mod:`.timeouts`), a cap on every body (:class:`~.middleware.BodyCap`), uploads
checked and granted (:class:`~.middleware.UploadGate`) or refused where the app takes none
(:class:`~.middleware.NoUploads`), every queue join checked and each visitor's share of the queue
bounded, Gradio's ``deep_link`` off (:class:`~.events.EventGate`), the cache's absolute path never
shown (:class:`~.paths.HideServerPaths`), the cache swept (:func:`~.sweep.sweep_lifespan`), the
trusted proxies named once. The settings are the fields of :class:`~.limits.WebLimits`; the manual
with their defaults is docs/guide/web_shell.md.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import Any

from .limits import Gate, trusted_proxies

__all__ = ["launch_blocks", "shell_middleware"]


def shell_middleware(blocks: Any, gate: Gate, *, takes_uploads: bool, inner: Sequence[Any] = ()) -> list[Any]:
    """The shell's Starlette middlewares for ``blocks``, outermost first; ``inner`` (an app's own)
    run inside the body checks and outside the event and upload checks."""
    from gradio.utils import get_upload_folder
    from starlette.middleware import Middleware

    from .events import EventGate
    from .middleware import BodyCap, NoUploads, UploadGate
    from .paths import HideServerPaths
    from .timeouts import BodyDeadline

    folder = get_upload_folder()
    return [
        Middleware(BodyDeadline, gate=gate),  # outermost: every body read below is timed
        Middleware(BodyCap, gate=gate),  # nothing below buffers an oversized body
        Middleware(HideServerPaths, root=folder),  # every response
        *inner,
        Middleware(EventGate, gate=gate, blocks=blocks, folder=folder),
        Middleware(UploadGate, gate=gate) if takes_uploads else Middleware(NoUploads, gate=gate),
    ]


def launch_blocks(
    blocks: Any,
    *,
    gate: Gate | None = None,
    takes_uploads: bool,
    concurrency_limit: int,
    proxies: tuple[str, ...] | None = None,
    **kwargs: Any,
) -> Any:
    """Queue ``blocks`` (``concurrency_limit`` events at once by default, ``queue_size`` waiting)
    and launch it in the shell; returns what ``blocks.launch`` returns.

    Args:
        blocks: the app.
        gate: its :class:`~.limits.Gate` (default: one over :meth:`~.limits.WebLimits.from_env`).
        takes_uploads: whether the app takes files (else every upload is refused, HTTP 403).
        concurrency_limit: Gradio's ``default_concurrency_limit``.
        proxies: the peers whose ``X-Forwarded-For`` names the visitor (default
            :func:`~.limits.trusted_proxies`); they become uvicorn's ``FORWARDED_ALLOW_IPS``.
        kwargs: ``blocks.launch``'s own (``server_name``, ``server_port``, ``app_kwargs``, ...).
    """
    from .sweep import sweep_lifespan
    from .timeouts import timed_server

    gate = gate if gate is not None else Gate()
    limits = gate.limits
    os.environ["FORWARDED_ALLOW_IPS"] = ",".join(trusted_proxies() if proxies is None else proxies)  # read by uvicorn
    blocks.queue(default_concurrency_limit=concurrency_limit, max_size=limits.queue_size)
    app_kwargs = dict(kwargs.pop("app_kwargs", None) or {})
    app_kwargs["middleware"] = shell_middleware(
        blocks, gate, takes_uploads=takes_uploads, inner=list(app_kwargs.get("middleware", []))
    )
    from gradio.utils import get_upload_folder

    app_kwargs["lifespan"] = sweep_lifespan(
        *limits.delete_cache, inner=app_kwargs.get("lifespan"), folder=get_upload_folder()
    )
    launched: dict[str, Any] = dict(
        share=False, ssr_mode=False, max_file_size=limits.max_upload_bytes, app_kwargs=app_kwargs, **kwargs
    )
    if "_frontend" in inspect.signature(blocks.launch).parameters:
        # Gradio's self-check (a HEAD of the page, 3 s timeout) only decides whether a share link is
        # needed, which the shell never makes; under load it timed out and stopped the app
        launched["_frontend"] = False
    with timed_server(limits.header_timeout_s):
        return blocks.launch(**launched)
