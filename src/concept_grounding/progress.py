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

__all__ = ["progress_bars", "log_lines", "quiet_off_terminal"]

#: seconds between two redraws of a bar written to a file or a pipe (a log): a line a minute, not ten a second
LOG_REDRAW_SECONDS = 60


class _CurrentStderr(logging.StreamHandler):
    """A handler that writes each record to ``sys.stderr`` as it is *then* (as logging's own
    last-resort handler does), not to the stream it was created with."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
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


@contextmanager
def quiet_off_terminal(stream=None) -> Iterator[None]:
    """Within the block, when ``stream`` (default ``sys.stderr``) is not a terminal (a redirected log), every tqdm
    bar redraws at most once a minute (``TQDM_MININTERVAL``, which a caller's own setting overrides; tqdm reads it
    when it is first imported, so the command line enters the block before importing any command) and the
    Hugging Face libraries' bars are off; on a terminal nothing changes.

    >>> import io, os
    >>> with quiet_off_terminal(io.StringIO()):
    ...     os.environ["TQDM_MININTERVAL"]
    '60'
    """
    import os

    stream = sys.stderr if stream is None else stream
    if getattr(stream, "isatty", lambda: False)():
        yield
        return
    was = os.environ.get("TQDM_MININTERVAL")
    os.environ.setdefault("TQDM_MININTERVAL", str(LOG_REDRAW_SECONDS))
    try:
        with progress_bars(False):
            yield
    finally:
        if was is None:
            os.environ.pop("TQDM_MININTERVAL", None)
