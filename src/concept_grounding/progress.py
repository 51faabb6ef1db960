"""One switch for the progress bars a call shows besides its own, and one for the log lines.

Our own bars are ``tqdm(..., disable=not progress)``. The Hugging Face libraries draw
theirs (``datasets``' "Generating train split", "Casting the dataset", ...;
``huggingface_hub``'s downloads) behind global switches; :func:`progress_bars` turns
those off for the duration of a block when ``progress=False`` was asked for, and puts
them back as they were afterwards.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["progress_bars", "log_lines"]


class _CurrentStderr(logging.StreamHandler):
    """A handler that writes each record to ``sys.stderr`` as it is *then* (as logging's own
    last-resort handler does), not to the stream it was created with."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self):  # noqa: ANN201
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # noqa: ANN001
        pass


@contextmanager
def log_lines(level: int = logging.INFO, logger: str = "concept_grounding") -> Iterator[None]:
    """Within the block, the package's log records of ``level`` and above print as bare lines on
    ``sys.stderr``; afterwards the logger is as it was. A command's ``run`` wraps its work in it
    (what ``logging.basicConfig(level=INFO, format="%(message)s")`` did, but scoped: other
    libraries' INFO records stay quiet, and a command run in-process (tests, the demo) leaves no
    handler behind bound to a stream that is later closed).

    >>> import io, contextlib
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err), log_lines():
    ...     logging.getLogger("concept_grounding.x").info("shown")
    ...     logging.getLogger("other.library").info("not shown")
    >>> logging.getLogger("concept_grounding.x").info("after the block: not shown")
    >>> print(err.getvalue(), end="")
    shown
    """
    log = logging.getLogger(logger)
    handler = _CurrentStderr()
    handler.setFormatter(logging.Formatter("%(message)s"))
    was = log.level
    log.addHandler(handler)
    log.setLevel(level)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(was)


@contextmanager
def progress_bars(enabled: bool = True) -> Iterator[None]:
    """Within the block, ``datasets``' and ``huggingface_hub``'s bars are off unless ``enabled``.

    >>> import datasets
    >>> with progress_bars(False):
    ...     datasets.utils.are_progress_bars_disabled()
    True
    """
    if enabled:
        yield
        return
    import datasets.utils as ds
    import huggingface_hub.utils as hub

    was = ds.are_progress_bars_disabled(), hub.are_progress_bars_disabled()
    ds.disable_progress_bars()
    hub.disable_progress_bars()
    try:
        yield
    finally:
        if not was[0]:
            ds.enable_progress_bars()
        if not was[1]:
            hub.enable_progress_bars()
