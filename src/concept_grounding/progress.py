"""One switch for the progress bars a call shows besides its own.

Our own bars are ``tqdm(..., disable=not progress)``. The Hugging Face libraries draw
theirs (``datasets``' "Generating train split", "Casting the dataset", ...;
``huggingface_hub``'s downloads) behind global switches; :func:`progress_bars` turns
those off for the duration of a block when ``progress=False`` was asked for, and puts
them back as they were afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["progress_bars"]


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
