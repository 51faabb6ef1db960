"""Files the Space serves and takes: images written whole into Gradio's cache, upload paths checked.

Handlers return images as paths of PNGs :func:`served_png` wrote (never arrays: see its
docstring), and read a visitor's upload through :func:`upload_path`. :func:`delete_served`
is the shutdown's: nothing a visitor caused stays on disk.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

__all__ = ["served_png", "big_png", "delete_served", "upload_path", "or_zero"]


def big_png(image: Any, min_side: int = 256) -> str | None:
    """A small ``(H, W, 3)`` uint8 image, nearest-neighbour upscaled so the page shows its
    pixels, as a PNG file in Gradio's cache (:func:`served_png`)."""
    import numpy as np

    if image is None:
        return None
    factor = max(1, -(-min_side // max(1, min(image.shape[:2]))))
    return served_png(np.repeat(np.repeat(image, factor, axis=0), factor, axis=1) if factor > 1 else image)


def served_png(image: Any) -> str | None:
    """Write an ``(H, W, 3)`` uint8 image as a PNG into Gradio's file cache; return its path
    (``None`` for ``None``).

    Handlers return images as these paths, not arrays. For an array, Gradio 6 rewrites
    ``<cache>/<content hash>/image.webp`` in place on every request, so when two
    concurrent requests produce the same image, one visitor can be served a half-written
    file (``benchmarks/bench_space.py`` got an empty one). Here the file is written under a
    temporary name and renamed into place, so it is always whole; Gradio's own copy-to-cache
    step then finds it under the same content hash and serves it as is. PNG is lossless,
    so the page shows the exact pixels.
    """
    import io
    import os

    from gradio.processing_utils import hash_bytes
    from gradio.utils import get_upload_folder
    from PIL import Image

    from ..fileio import atomic_write_bytes

    if image is None or _CLOSING.is_set():  # the Space is shutting down: write nothing more
        return None
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="png")
    data = buffer.getvalue()
    path = Path(get_upload_folder()) / hash_bytes(data) / "image.png"
    try:
        os.utime(path)  # served again: young again for the cache sweep (DELETE_CACHE)
    except FileNotFoundError:
        atomic_write_bytes(path, data)
    _SERVED.add(path)
    return str(path)


#: The PNGs :func:`served_png` wrote (Gradio's cache deletion at shutdown knows only its own files).
_SERVED: set[Path] = set()
#: Set by :func:`delete_served`: requests still running at shutdown write no more images.
_CLOSING = threading.Event()


def delete_served() -> int:
    """Delete every PNG :func:`served_png` wrote, and its folder when empty (the Space's
    shutdown: nothing a visitor caused stays on disk); return how many files went. Images a
    request still running would serve afterwards are not written."""
    _CLOSING.set()
    gone = 0
    for path in list(_SERVED):
        try:
            path.unlink()
            gone += 1
        except FileNotFoundError:
            pass
        with contextlib.suppress(OSError):
            path.parent.rmdir()
        _SERVED.discard(path)
    return gone


def or_zero(value: Any) -> Any:
    """An emptied number field (``None``) reads as 0; anything else is checked by the handler."""
    return 0 if value is None else value


def upload_path(file: Any, field: str) -> str | None:
    """The local path of the ``gr.File`` value of ``field``, checked to be a file in Gradio's upload folder."""
    from .inputs import check_upload_path

    if file is None:
        return None
    path = (
        getattr(file, "name", None)
        or getattr(file, "path", None)
        or (file.get("path") if isinstance(file, dict) else file)
    )
    if not path:
        return None
    return str(check_upload_path(path, _upload_roots(), field=field))


def _upload_roots() -> tuple[str, ...]:
    from gradio.utils import get_upload_folder

    return (get_upload_folder(),)
