"""Sanitising what a Space visitor sends: images, texts, tables and upload paths.

Every function raises :class:`UserInputError` (a ``ValueError``) with a sentence meant
for the page, never a stack trace; the Gradio layer turns it into ``gr.Error``. Nothing
here imports Gradio, so the tab handlers stay plain functions the tests call directly.

>>> import numpy as np
>>> to_rgb(np.zeros((4, 6), dtype=np.uint8)).shape
(4, 6, 3)
>>> to_rgb(np.full((2000, 1000, 4), 255, dtype=np.uint8)).shape
(512, 256, 3)
>>> parse_texts(" a red bird ;\\n\\n a bird with a black crown ")
['a red bird', 'a bird with a black crown']
>>> whole_number(4.0, "Steps", 1, 50)
4
>>> whole_number(2.5, "Steps", 1, 50)
Traceback (most recent call last):
...
concept_grounding.web.visitor_input.UserInputError: Steps must be a whole number from 1 to 50, got 2.5.
>>> redact_paths("[Errno 21] Is a directory: '/tmp/gradio/ab12/upload'")
"[Errno 21] Is a directory: 'upload'"
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import reprlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..web.visitor_input import UserInputError, redact_paths

__all__ = [
    "MAX_IMAGE_SIDE",
    "MAX_UPLOAD_BYTES",
    "UserInputError",
    "whole_number",
    "redact_paths",
    "to_rgb",
    "load_image",
    "parse_texts",
    "check_upload_path",
    "shown_name",
    "read_table",
]

#: Uploaded images are downscaled so that their longer side is at most this (pixels).
MAX_IMAGE_SIDE = 512
#: Uploads larger than this are refused (bytes): by the server before they are stored
#: (``launch``'s ``max_file_size``), and here before decoding.
MAX_UPLOAD_BYTES = 20 * 1024 * 1024
#: At most this many texts per request (CCI runs one masked forward pass per cluster).
MAX_TEXTS = 8


def whole_number(value: Any, field: str, low: int, high: int) -> int:
    """A visitor's numeric field as an ``int`` in ``[low, high]``.

    Gradio sends numbers as floats, and an API client may send anything: NaN, infinities,
    ``1e308``, ``2.5`` (refused, not truncated), strings, ``None`` all raise
    :class:`UserInputError` with one sentence naming ``field``.
    """
    refused = UserInputError(f"{field} must be a whole number from {low} to {high}, got {reprlib.repr(value)}.")
    if isinstance(value, bool):
        raise refused
    try:
        number = value if isinstance(value, int) else float(value)
    except (TypeError, ValueError, OverflowError):
        raise refused from None
    if isinstance(number, float) and not (math.isfinite(number) and number.is_integer()):
        raise refused
    if not low <= number <= high:
        raise refused
    return int(number)


def to_rgb(image: Any, max_side: int = MAX_IMAGE_SIDE) -> np.ndarray:
    """Any image-like value -> ``(H, W, 3)`` uint8 RGB with ``max(H, W) <= max_side``.

    Accepts a ``PIL.Image`` in any mode (grayscale, palette, RGBA, CMYK, 16-bit) or an
    array ``(H, W)``, ``(H, W, 1)``, ``(H, W, 3)``, ``(H, W, 4)``; floats are read as
    [0, 1] when their maximum is <= 1, else as [0, 255]. Transparent pixels are composed
    onto white. The aspect ratio is kept when downscaling (Lanczos).
    """
    from PIL import Image

    if isinstance(image, Image.Image):
        pil = image
    else:
        arr = np.asarray(image)
        if arr.ndim == 3 and arr.shape[-1] == 1:
            arr = arr[..., 0]
        if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[-1] not in (3, 4)) or arr.size == 0:
            raise UserInputError(f"Expected an image of shape (H, W), (H, W, 3) or (H, W, 4); got {arr.shape}.")
        if arr.dtype != np.uint8:
            arr = arr.astype(np.float64)
            if not np.isfinite(arr).all():
                raise UserInputError("The image contains NaN or infinite values.")
            scale = 255.0 if arr.max(initial=0.0) <= 1.0 else 1.0
            arr = np.clip(np.rint(arr * scale), 0, 255).astype(np.uint8)
        pil = Image.fromarray(arr)
    if pil.mode in ("RGBA", "LA", "PA") or (pil.mode == "P" and "transparency" in pil.info):
        rgba = pil.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        pil = Image.alpha_composite(background, rgba)
    if pil.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        arr = np.asarray(pil, dtype=np.float64)
        span = float(arr.max() - arr.min()) or 1.0
        pil = Image.fromarray(np.uint8(np.rint(255 * (arr - arr.min()) / span)))
    pil = pil.convert("RGB")
    width, height = pil.size
    if width < 1 or height < 1:
        raise UserInputError("The image is empty.")
    if max(width, height) > max_side:
        ratio = max_side / max(width, height)
        size = (max(1, round(width * ratio)), max(1, round(height * ratio)))
        pil = pil.resize(size, Image.Resampling.LANCZOS)
    return np.asarray(pil, dtype=np.uint8).copy()


def load_image(
    path: str | os.PathLike | None,
    max_side: int = MAX_IMAGE_SIDE,
    check_pixels: Callable[[str, int, int], None] | None = None,
) -> np.ndarray:
    """Decode an uploaded file into ``(H, W, 3)`` uint8 RGB (see :func:`to_rgb`).

    Raises :class:`UserInputError` for a missing upload, a file that is not an image
    (PDF, text, a truncated PNG), or a file above :data:`MAX_UPLOAD_BYTES`.
    ``check_pixels("Image", width, height)`` (the Space passes its
    :meth:`~concept_grounding.web.limits.Gate.check_pixels`) sees the size that will be decoded, from the
    header, before a pixel is decoded (a JPEG at the reduced scale it is decoded at).
    """
    from PIL import Image, UnidentifiedImageError

    if path is None or str(path) == "":
        raise UserInputError("Please upload an image first.")
    file = Path(path)
    if not file.is_file():
        raise UserInputError("The upload could not be found; please upload the image again.")
    if file.stat().st_size > MAX_UPLOAD_BYTES:
        raise UserInputError(f"The file is too large (> {MAX_UPLOAD_BYTES // 2**20} MB).")
    try:
        with Image.open(file) as pil:
            if pil.size[0] > max_side or pil.size[1] > max_side:
                pil.draft("RGB", (max_side, max_side))
            if check_pixels is not None:
                check_pixels("Image", *pil.size)
            pil.load()
            return to_rgb(pil, max_side)
    except UserInputError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        reason = str(err).replace(str(file), shown_name(file.name))
        raise UserInputError(
            f"'{shown_name(file.name)}' is not an image we can read (PNG, JPEG, WebP, BMP, GIF or TIFF): {reason}"
        ) from None


def shown_name(name: str, limit: int = 60) -> str:
    """A file name as it may be shown on the page: control and bidirectional formatting
    characters (U+202E and its kin, which make ``gnp.exe`` read as ``exe.png``) become
    ``?``, and a long name is cut to ``limit`` characters.

    >>> shown_name("bird\u202egnp.exe")
    'bird?gnp.exe'
    """
    import unicodedata

    clean = "".join("?" if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c for c in name)
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def parse_texts(text: str | None, max_texts: int = MAX_TEXTS, max_chars: int = 200) -> list[str]:
    """Split a text box into prompts, one per line or ``;``; blanks dropped.

    Raises :class:`UserInputError` when nothing is left, when there are more than
    ``max_texts`` prompts, or when one is longer than ``max_chars`` characters.
    """
    parts = [p.strip() for line in (text or "").splitlines() for p in line.split(";")]
    texts = [p for p in parts if p]
    if not texts:
        raise UserInputError("Please enter at least one text (one per line), e.g. 'a photo of a bird'.")
    if len(texts) > max_texts:
        raise UserInputError(f"At most {max_texts} texts, please (got {len(texts)}).")
    long = [t for t in texts if len(t) > max_chars]
    if long:
        raise UserInputError(f"Texts must be at most {max_chars} characters; '{long[0][:40]}...' is longer.")
    return texts


def check_upload_path(
    path: str | os.PathLike, allowed_roots: tuple[str | os.PathLike, ...] | None = None, field: str = "The upload"
) -> Path:
    """Resolve an uploaded file's path and check it is a file under an allowed folder.

    Gradio stores uploads in its temp folder (``GRADIO_TEMP_DIR``, default
    ``<tmp>/gradio``); a path anywhere else (``/etc/passwd``, ``../..``) is refused, so
    a crafted API call cannot make the app read arbitrary files, and so is a folder
    (a message naming ``field``).
    """
    if allowed_roots is None:
        gradio_tmp = os.environ.get("GRADIO_TEMP_DIR") or str(Path(tempfile.gettempdir()) / "gradio")
        allowed_roots = (gradio_tmp,)
    resolved = Path(path).resolve()
    for root in allowed_roots:
        root_path = Path(root).resolve()
        if resolved == root_path or root_path in resolved.parents:
            if not resolved.is_file():
                raise UserInputError(
                    f"{field}: not an uploaded file (a folder, or gone); please upload the file again."
                )
            return resolved
    raise UserInputError(f"{field}: Only files uploaded through this page can be used.")


def read_table(path: str | os.PathLike, max_rows: int = 200_000) -> dict[str, Any]:
    """Read an uploaded ``.csv`` or ``.json`` file into a dict of columns / values.

    * CSV: a header row, then one row per record; the result maps each column name to a
      list of strings (converted later, per metric).
    * JSON: either an object (returned as is) or a list of records (turned into
      columns; every record must have the same keys).
    """
    file = Path(path)
    if file.stat().st_size > MAX_UPLOAD_BYTES:
        raise UserInputError(f"The file is too large (> {MAX_UPLOAD_BYTES // 2**20} MB).")
    raw = file.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserInputError(f"'{shown_name(file.name)}' is not a UTF-8 text file (CSV or JSON expected).") from None
    suffix = file.suffix.lower()
    if suffix == ".json" or (suffix not in (".csv", ".tsv") and text.lstrip()[:1] in "[{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise UserInputError(f"'{shown_name(file.name)}' is not valid JSON: {err}") from None
        except RecursionError:
            raise UserInputError(f"'{shown_name(file.name)}' nests its JSON too deeply.") from None
        if isinstance(data, list):
            if not data or not all(isinstance(r, dict) for r in data):
                raise UserInputError("A JSON list must hold one object (record) per row.")
            keys = list(data[0])
            if any(list(r) != keys and set(r) != set(keys) for r in data):
                raise UserInputError("Every JSON record must have the same keys.")
            return {k: [r[k] for r in data] for k in keys}
        if isinstance(data, dict):
            return data
        raise UserInputError("JSON must be an object of columns or a list of records.")
    dialect = "excel-tab" if suffix == ".tsv" else "excel"
    reader = csv.reader(io.StringIO(text), dialect=dialect)
    rows = [row for row in reader if any(cell.strip() for cell in row)]
    if len(rows) < 2:
        raise UserInputError(f"'{shown_name(file.name)}' needs a header row and at least one data row.")
    if len(rows) - 1 > max_rows:
        raise UserInputError(f"At most {max_rows} rows, please (got {len(rows) - 1}).")
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header) or not all(header):
        raise UserInputError("The CSV header must name every column once.")
    bad = [i + 2 for i, row in enumerate(rows[1:]) if len(row) != len(header)]
    if bad:
        raise UserInputError(f"CSV row(s) {bad[:5]} do not have {len(header)} cells like the header.")
    return {h: [row[j].strip() for row in rows[1:]] for j, h in enumerate(header)}
