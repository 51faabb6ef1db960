"""File writing shared by the loaders (and anything else that writes dataset files).

* :func:`atomic_path`: a temporary path beside the target to write to; ``os.replace`` puts
  it in place when the block succeeds (a reader never sees half a file), and it is removed
  when the block fails in any way (full disk, permission, interrupt): no temporary file
  survives, and an ``OSError`` names the target, not the temporary file.
* :func:`atomic_write_bytes` / :func:`atomic_write_lines`: bytes or text lines through it.
* :func:`encoded_image_bytes`: the bytes of a ``datasets.Image(decode=False)`` value in a
  given format (unchanged when already in it).
"""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_lines", "encoded_image_bytes", "FORMAT_OF_SUFFIX"]

#: PIL format name by lower-case file suffix.
FORMAT_OF_SUFFIX: dict[str, str] = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG"}


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path ``.<name>.tmp-<pid>-<random>`` beside ``path`` (parents created) for
    the block to write; it replaces ``path`` when the block succeeds and is removed when it
    fails. An ``OSError`` of the block (``ENOSPC``, ``EACCES``, ...) is raised again with
    ``path`` as its file name.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "a.txt"
    >>> with atomic_path(target) as tmp:
    ...     _ = tmp.write_text("done")
    >>> target.read_text(), sorted(p.name for p in target.parent.iterdir())
    ('done', ['a.txt'])
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno is not None and err.filename in (None, str(tmp)):
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (parents created) through :func:`atomic_path`."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


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
