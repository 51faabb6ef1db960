"""File writing shared by the loaders (and anything else that writes dataset files).

* :func:`atomic_path`: a temporary path beside the target to write to; ``os.replace`` puts
  it in place when the block succeeds (a reader never sees half a file), and it is removed
  when the block fails in any way (full disk, permission, interrupt): no temporary file
  survives, and an ``OSError`` names the target, not the temporary file.
* :func:`atomic_write_bytes` / :func:`atomic_write_lines`: bytes or text lines through it.
* :func:`encoded_image_bytes`: the bytes of a ``datasets.Image(decode=False)`` value in a
  given format (unchanged when already in it).
* :func:`markdown_table`: the one Markdown table renderer of the package (every report,
  card and Space table); :func:`write_json`: JSON through :func:`atomic_path`;
  :func:`write_report`: the one report writer (``results.json`` + ``report.md``, or a job's
  own names for them), used by every command and job that writes a report folder.
"""

from __future__ import annotations

import io
import json
import math
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "write_parquet",
    "atomic_write_bytes",
    "atomic_write_lines",
    "encoded_image_bytes",
    "FORMAT_OF_SUFFIX",
    "markdown_table",
    "jsonable",
    "write_json",
    "write_report",
]

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


def write_parquet(dataset: Any, path: str | os.PathLike[str]) -> Path:
    """Write a ``datasets.Dataset`` to ``path`` as Parquet, replaced atomically (:func:`atomic_path`),
    and return the path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        dataset.to_parquet(str(tmp))
    return path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (parents created) through :func:`atomic_path`."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_lines(path: Path, lines: list[str]) -> None:
    """``lines`` joined by ``\\n`` with a final newline, UTF-8, written atomically."""
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))


def encoded_image_bytes(raw: Mapping[str, Any] | None, target_format: str) -> bytes | None:
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
        out: Image.Image = im.convert("RGB") if target_format == "JPEG" and im.mode not in ("RGB", "L") else im
        buf = io.BytesIO()
        out.save(buf, format=target_format, **({"quality": 95} if target_format == "JPEG" else {}))
        return buf.getvalue()


# ---------------------------------------------------------------------------- reports
#: the separator cell of each column alignment of :func:`markdown_table`
_ALIGN = {"l": "---", "r": "---:"}


def markdown_table(
    header: Sequence[object], rows: Iterable[Sequence[object]], *, align: str | None = None, spaced: bool = False
) -> str:
    """A GitHub-flavoured Markdown table: the one table renderer of the package.

    Cells are written with ``str``; a row shorter than ``header`` is closed with empty cells
    (``| |``). ``align``: one letter per column, ``l`` (``---``) or ``r`` (``---:``);
    ``spaced``: the separator row as ``| --- | --- |`` instead of ``|---|---|``.

    >>> print(markdown_table(["model", "s+"], [["CBM", 50.0], ["CEM"]], align="lr"))
    | model | s+ |
    |---|---:|
    | CBM | 50.0 |
    | CEM | |
    >>> print(markdown_table(["a", "b"], [[1, "x"]], spaced=True))
    | a | b |
    | --- | --- |
    | 1 | x |
    """
    seps = [_ALIGN[a] for a in (align or "l" * len(header))]
    if len(seps) != len(header):
        raise ValueError(f"align has {len(seps)} letters for {len(header)} columns")
    lines = [
        "| " + " | ".join(str(h) for h in header) + " |",
        "| " + " | ".join(seps) + " |" if spaced else "|" + "|".join(seps) + "|",
    ]
    for row in rows:
        cells = [str(c) for c in row]
        lines.append("| " + " | ".join(cells) + " |" + " |" * (len(header) - len(cells)))
    return "\n".join(lines)


def jsonable(value: Any) -> Any:
    """``value`` with numpy arrays / scalars as lists / numbers, NaN as ``None``, paths as strings
    and mapping keys as strings (what :func:`write_json` writes).

    >>> jsonable({1: (float("nan"), Path("a"))})
    {'1': [None, 'a']}
    """
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if type(value).__name__ == "ndarray" and type(value).__module__ == "numpy":
        return jsonable(value.tolist())
    if type(value).__module__ == "numpy" and hasattr(value, "item"):  # a numpy scalar, as it was
        return value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(
    path: str | os.PathLike[str], payload: Any, *, nan_as_null: bool = True, default: Callable[[Any], Any] | None = None
) -> Path:
    """Write ``payload`` as JSON indented by 2, without a final newline, atomically; returns the path.

    ``nan_as_null``: through :func:`jsonable` first (numpy made plain, NaN written ``null``);
    ``False`` writes ``payload`` as :func:`json.dumps` does (NaN as ``NaN``; the CCI, filter,
    curation and world files have always been written so, and keep their bytes). ``default``:
    :func:`json.dumps`' fallback for other objects.
    """
    path = Path(path)
    data = jsonable(payload) if nan_as_null else payload
    atomic_write_bytes(path, json.dumps(data, indent=2, default=default).encode())
    return path


def write_report(
    out_dir: str | os.PathLike[str],
    results: Any,
    markdown: str,
    *,
    results_name: str = "results.json",
    report_name: str = "report.md",
    nan_as_null: bool = True,
    default: Callable[[Any], Any] | None = None,
) -> tuple[Path, Path]:
    """The one report writer: ``results`` as JSON (:func:`write_json`) to ``out_dir/results_name``,
    then ``markdown`` (UTF-8, as given) to ``out_dir/report_name``, each atomically (``out_dir``
    created); returns both paths.

    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> [p.name for p in write_report(out, {"s_plus": float("nan")}, "# Report\\n")]
    ['results.json', 'report.md']
    >>> (out / "results.json").read_text(), (out / "report.md").read_text()
    ('{\\n  "s_plus": null\\n}', '# Report\\n')
    """
    out_dir = Path(out_dir)
    json_path = write_json(out_dir / results_name, results, nan_as_null=nan_as_null, default=default)
    md_path = out_dir / report_name
    atomic_write_bytes(md_path, markdown.encode("utf-8"))
    return json_path, md_path
