"""File writing shared by the loaders (and anything else that writes dataset files).

* :func:`atomic_write_bytes` / :func:`atomic_write_lines`: write to a temporary file in
  the same folder, then ``os.replace`` it onto the target (a reader never sees half a file).
* :func:`encoded_image_bytes`: the bytes of a ``datasets.Image(decode=False)`` value in a
  given format (unchanged when already in it).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_lines", "encoded_image_bytes", "FORMAT_OF_SUFFIX"]

#: PIL format name by lower-case file suffix.
FORMAT_OF_SUFFIX: dict[str, str] = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG"}


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (parents created) through ``.<name>.tmp-<pid>`` + ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def atomic_write_lines(path: Path, lines: list[str]) -> None:
    """``lines`` joined by ``\\n`` with a final newline, UTF-8, written atomically."""
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))


def encoded_image_bytes(raw: dict | None, target_format: str) -> bytes | None:
    """The bytes of a ``datasets.Image(decode=False)`` value in ``target_format``.

    Bytes already in that format are returned unchanged (byte-identical files); others
    are decoded and re-encoded (PNG is lossless, JPEG quality 95 is not). ``None`` when
    there is no image (``raw`` is ``None`` or has neither bytes nor a path).
    """
    from PIL import Image

    if raw is None:
        return None
    data = raw.get("bytes")
    if data is None:
        if not raw.get("path"):
            return None
        data = Path(raw["path"]).read_bytes()
    with Image.open(io.BytesIO(data)) as im:
        if im.format == target_format:
            return data
        im.load()
        if target_format == "JPEG" and im.mode not in ("RGB", "L"):
            im = im.convert("RGB")
        buf = io.BytesIO()
        im.save(buf, format=target_format, **({"quality": 95} if target_format == "JPEG" else {}))
        return buf.getvalue()
