"""Line readers for CUB's whitespace-separated text files, with errors that name the line."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .errors import CUBFormatError, DatasetFormatError

__all__ = ["read_rows", "utf8_errors_named", "parse_number", "index_images", "index_pairs", "show_path"]


def show_path(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` when it lies inside it (for short, stable messages)."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def read_rows(
    path: Path, label: str, *, columns: int, maxsplit: int | None = None, allow_more: bool = False
) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line_number, fields)`` for every non-blank line of a text file.

    Fields are split on any run of whitespace (so doubled spaces, tabs and ``\\r\\n`` are
    harmless). ``maxsplit`` keeps the tail of a line as one field (part names contain
    spaces). A line with fewer than ``columns`` fields, or more when ``allow_more`` is
    false, raises :class:`CUBFormatError` naming ``label`` and the line.
    """
    with utf8_errors_named(path, label), open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            fields = line.split(None, maxsplit) if maxsplit is not None else line.split()
            if not fields:
                continue
            if len(fields) < columns or (len(fields) > columns and not allow_more):
                raise CUBFormatError(
                    f"expected {columns} columns, found {len(fields)}: {line.strip()!r}", file=label, line=number
                )
            yield number, fields


@contextmanager
def utf8_errors_named(path: Path, label: str, error: type[DatasetFormatError] = CUBFormatError) -> Iterator[None]:
    """Turn a ``UnicodeDecodeError`` while reading ``path`` into ``error`` (a :class:`CUBFormatError`)
    with the file and the line of the first bad byte (found by re-reading the bytes, on error only)."""
    try:
        yield
    except UnicodeDecodeError:
        data = Path(path).read_bytes()
        try:
            data.decode("utf-8")
            start = 0
        except UnicodeDecodeError as err:
            start = err.start
        raise error(
            f"not UTF-8 text (byte 0x{data[start]:02x} at offset {start}); save the file as UTF-8",
            file=label,
            line=data[:start].count(b"\n") + 1,
        ) from None


def parse_number(token: str, kind: Callable[[str], int | float], label: str, line: int, what: str) -> int | float:
    """``kind(token)`` or a :class:`CUBFormatError` naming the column ``what``; floats must be finite."""
    try:
        value = kind(token)
    except ValueError:
        raise CUBFormatError(f"{what} must be {kind.__name__}, found {token!r}", file=label, line=line) from None
    if kind is float and not math.isfinite(value):
        raise CUBFormatError(f"{what} must be a finite number, found {token!r}", file=label, line=line)
    return value


def _lookup_rows(ids: np.ndarray, lines: np.ndarray, id_to_row: np.ndarray, label: str, source: str) -> np.ndarray:
    """Map 1-based image ids to 0-based row numbers; an unknown id names its line."""
    ok = (ids >= 1) & (ids < len(id_to_row))
    rows = np.full(len(ids), -1, dtype=np.int64)
    rows[ok] = id_to_row[ids[ok]]
    bad = np.flatnonzero(rows < 0)
    if bad.size:
        i = bad[0]
        raise CUBFormatError(f"image id {int(ids[i])} is not listed in {source}", file=label, line=int(lines[i]))
    return rows


def index_images(
    ids: np.ndarray, lines: np.ndarray, id_to_row: np.ndarray, n_images: int, label: str, source: str = "images.txt"
) -> np.ndarray:
    """Rows of a one-line-per-image table; every image exactly once.

    Returns ``rows`` (len(ids),) with ``rows[k]`` the 0-based image row of line ``k``.
    Unknown ids, duplicates and missing images raise :class:`CUBFormatError`.
    """
    rows = _lookup_rows(ids, lines, id_to_row, label, source)
    seen = np.full(n_images, -1, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    dup = np.flatnonzero(np.diff(rows[order]) == 0)
    if dup.size:
        k = order[dup[0] + 1]
        raise CUBFormatError(f"image id {int(ids[k])} appears twice", file=label, line=int(lines[k]))
    seen[rows] = 1
    missing = np.flatnonzero(seen < 0)
    if missing.size:
        inverse = np.flatnonzero(id_to_row >= 0)[np.argsort(id_to_row[id_to_row >= 0])]
        shown = [int(inverse[m]) for m in missing[:5]]
        raise CUBFormatError(
            f"{missing.size} image(s) of {source} have no line here, e.g. image ids {shown}", file=label
        )
    return rows


def index_pairs(
    ids: np.ndarray,
    items: np.ndarray,
    lines: np.ndarray,
    id_to_row: np.ndarray,
    n_images: int,
    n_items: int,
    label: str,
    item_name: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows and 0-based item columns of a one-line-per-(image, item) table.

    ``items`` are 1-based ids (attribute or part). Every pair must occur exactly once:
    unknown ids, out-of-range items and duplicates name their line; missing pairs are
    listed.
    """
    rows = _lookup_rows(ids, lines, id_to_row, label, "images.txt")
    bad = np.flatnonzero((items < 1) | (items > n_items))
    if bad.size:
        i = bad[0]
        raise CUBFormatError(f"{item_name} id {int(items[i])} is outside 1..{n_items}", file=label, line=int(lines[i]))
    cols = items - 1
    flat = rows * n_items + cols
    order = np.argsort(flat, kind="stable")
    dup = np.flatnonzero(np.diff(flat[order]) == 0)
    if dup.size:
        k = order[dup[0] + 1]
        raise CUBFormatError(
            f"image id {int(ids[k])}, {item_name} id {int(items[k])} appears twice", file=label, line=int(lines[k])
        )
    if flat.size != n_images * n_items:
        seen = np.zeros(n_images * n_items, dtype=bool)
        seen[flat] = True
        missing = np.flatnonzero(~seen)
        inverse = np.flatnonzero(id_to_row >= 0)[np.argsort(id_to_row[id_to_row >= 0])]
        shown = [(int(inverse[m // n_items]), int(m % n_items) + 1) for m in missing[:5]]
        raise CUBFormatError(
            f"{missing.size} (image id, {item_name} id) pair(s) have no line, e.g. {shown}", file=label
        )
    return rows, cols
