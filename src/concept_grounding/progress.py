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

__all__ = ["progress_bars", "show_log_lines"]


class _CurrentStderr(logging.StreamHandler):
    """A handler that writes each record to ``sys.stderr`` as it is *then* (as logging's own
    last-resort handler does), not to the stream it was created with: a command run in-process
    (tests, the demo) whose ``sys.stderr`` is later closed or replaced leaves no dead handler behind."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self):  # noqa: ANN201
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # noqa: ANN001
        pass


def show_log_lines(level: int = logging.INFO) -> None:
    """Print log records of ``level`` and above as bare lines on the current ``sys.stderr``
    (what a command wants of ``logging.basicConfig(level=..., format="%(message)s")``); calling
    it again adds no second handler.

    >>> show_log_lines(); show_log_lines()
    >>> sum(isinstance(h, _CurrentStderr) for h in logging.getLogger().handlers)
    1
    """
    root = logging.getLogger()
    if not any(isinstance(h, _CurrentStderr) for h in root.handlers):
        handler = _CurrentStderr()
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(handler)
    root.setLevel(level)


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
