"""CUB-200-2011's official text files: where they are and how each one is parsed.

The files and their columns (CUB's README; ids are 1-based in the files and 0-based in
our arrays):

* ``images.txt``: image_id file_name
* ``image_class_labels.txt``: image_id class_id
* ``train_test_split.txt``: image_id is_training_image (1/0)
* ``classes.txt``: class_id class_name
* ``attributes.txt`` (see below): attribute_id attribute_name
* ``attributes/image_attribute_labels.txt``: image_id attribute_id is_present certainty_id time
* ``attributes/class_attribute_labels_continuous.txt``: C lines of A percentages (0-100)
* ``parts/parts.txt``: part_id part_name (names contain spaces)
* ``parts/part_locs.txt``: image_id part_id x y visible
* ``bounding_boxes.txt``: image_id x y width height
* ``images/<file_name>``: the photos

Each reader checks its own file (ids, columns, value ranges) and raises
:class:`~concept_grounding.loaders.errors.CUBFormatError` naming file and line;
:func:`~concept_grounding.loaders.cub.read_cub_tables` cross-checks them into
:class:`CUBTables`. The choices (irregular lines, coordinates, extras) are written down in
:mod:`concept_grounding.loaders.cub`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from ._text import parse_number, read_rows, utf8_errors_named
from .errors import CUBFormatError, warn_repaired

__all__ = ["CUBTables"]

#: required files, relative to the ``CUB_200_2011`` folder (``attributes.txt`` aside)
CUB_FILES: dict[str, str] = {
    "images": "images.txt",
    "class_labels": "image_class_labels.txt",
    "split": "train_test_split.txt",
    "classes": "classes.txt",
    "attribute_labels": "attributes/image_attribute_labels.txt",
    "class_continuous": "attributes/class_attribute_labels_continuous.txt",
    "parts": "parts/parts.txt",
    "part_locs": "parts/part_locs.txt",
    "bboxes": "bounding_boxes.txt",
}
#: where ``attributes.txt`` is looked for, in order (relative to the ``CUB_200_2011`` folder)
ATTRIBUTE_NAME_FILES: tuple[str, ...] = ("attributes/attributes.txt", "attributes.txt", "../attributes.txt")
#: ``attributes/certainties.txt`` of the official release
CERTAINTY_NAMES: tuple[str, ...] = ("not visible", "guessing", "probably", "definitely")
#: optional per-image PNG folders by the column they fill
EXTRA_FOLDERS: dict[str, str] = {"mask": "segmentations", "part_map": "part_maps"}
#: how far (percentage points) a class-level percentage may lie outside 0..100 and be clipped
#: into it (the rounding of a re-saved file); farther is an error.
PERCENT_SLACK = 0.5


@dataclass
class CUBTables:
    """Everything the CUB text files say, as arrays (N images, A attributes, P parts, C classes).

    Attributes:
        root: the ``CUB_200_2011`` folder.
        image_ids: (N,) 1-based ids, in ``images.txt`` order (the row order of every array).
        file_names: N paths relative to ``images/``.
        labels: (N,) 0-based class index (into ``class_names``).
        class_names: C names from ``classes.txt``, ordered by class id.
        is_train: (N,) bool.
        attributes: (N, A) uint8 ``is_present``.
        certainty: (N, A) uint8 certainty id 1-4.
        class_attributes_continuous: (C, A) float32 percentages 0-100.
        part_xy: (N, P, 2) float32 pixel ``(x, y)``.
        part_visible: (N, P) bool.
        bbox: (N, 4) float32 ``(x, y, width, height)`` in pixels.
        irregular_lines: 1-based line numbers of ``image_attribute_labels.txt`` that had
            extra fields (see the module docstring).
        mask_files / part_map_files: N absolute paths, or ``None`` when the folder is absent.
    """

    root: Path
    image_ids: np.ndarray
    file_names: list[str]
    labels: np.ndarray
    class_names: list[str]
    is_train: np.ndarray
    attributes: np.ndarray
    certainty: np.ndarray
    class_attributes_continuous: np.ndarray
    part_xy: np.ndarray
    part_visible: np.ndarray
    bbox: np.ndarray
    irregular_lines: list[int]
    mask_files: list[str] | None = None
    part_map_files: list[str] | None = None

    def image_path(self, i: int) -> Path:
        return self.root / "images" / self.file_names[i]


def resolve_root(root: str | Path) -> Path:
    """The ``CUB_200_2011`` folder: ``root`` itself, or ``root/CUB_200_2011`` when that holds ``images.txt``."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise CUBFormatError("no such folder", file=root)
    if not (root / "images.txt").exists() and (root / "CUB_200_2011" / "images.txt").exists():
        return root / "CUB_200_2011"
    return root


def find_files(root: Path) -> dict[str, Path]:
    """Path of every :data:`CUB_FILES` entry plus ``attribute_names``; one error lists all missing files."""
    from ..errors import option

    if not (root / "images.txt").is_file() and not (root / "classes.txt").is_file():
        raise CUBFormatError(
            f"not a CUB_200_2011 folder ({option('root')}): it has neither images.txt nor "
            "classes.txt; give the folder the CUB_200_2011 archive unpacks to",
            file=root,
        )
    paths = {key: root / rel for key, rel in CUB_FILES.items()}
    missing = [CUB_FILES[k] for k, p in paths.items() if not p.is_file()]
    names = [root / rel for rel in ATTRIBUTE_NAME_FILES]
    found = [p for p in names if p.is_file()]
    if not found:
        missing.append(" or ".join(ATTRIBUTE_NAME_FILES))
    if missing:
        raise CUBFormatError(f"missing file(s): {', '.join(missing)}", file=root)
    paths["attribute_names"] = found[0]
    return paths


def read_images(path: Path, label: str) -> tuple[np.ndarray, list[str], np.ndarray]:
    """``images.txt``: ``(N,)`` ids, N relative file names, and the id -> row index array (-1: no such id)."""
    ids, names, seen = [], [], {}
    for line, (tok_id, name) in read_rows(path, label, columns=2):
        i = parse_number(tok_id, int, label, line, "image_id")
        if i < 1:
            raise CUBFormatError(f"image_id must be >= 1, found {i}", file=label, line=line)
        if i in seen:
            raise CUBFormatError(f"image id {i} appears twice (first on line {seen[i]})", file=label, line=line)
        parts = PurePosixPath(name).parts
        if PurePosixPath(name).is_absolute() or ".." in parts:
            raise CUBFormatError(
                f"file name must be a relative path inside images/, found {name!r}", file=label, line=line
            )
        seen[i] = line
        ids.append(i)
        names.append(name)
    if not ids:
        raise CUBFormatError("no images listed", file=label)
    image_ids = np.asarray(ids, dtype=np.int64)
    id_to_row = np.full(image_ids.max() + 1, -1, dtype=np.int64)
    id_to_row[image_ids] = np.arange(len(ids))
    return image_ids, names, id_to_row


def read_names(path: Path, label: str, what: str, *, maxsplit: int | None = None) -> dict[int, tuple[int, str]]:
    """``id -> (line, name)`` of an ``<id> <name>`` file; duplicate ids name their line."""
    out: dict[int, tuple[int, str]] = {}
    for line, fields in read_rows(path, label, columns=2, maxsplit=maxsplit):
        i = parse_number(fields[0], int, label, line, f"{what}_id")
        if i in out:
            raise CUBFormatError(f"{what} id {i} appears twice (first on line {out[i][0]})", file=label, line=line)
        out[i] = (line, fields[1].strip())
    return out


def dense_names(table: dict[int, tuple[int, str]], label: str, what: str) -> list[str]:
    """The names of a :func:`read_names` table in id order; ids must be exactly ``1..n``."""
    n = len(table)
    for i, (line, _) in table.items():
        if not 1 <= i <= n:
            raise CUBFormatError(f"{what} ids must be 1..{n} without gaps, found {i}", file=label, line=line)
    return [table[i][1] for i in range(1, n + 1)]


def check_against_vocab(table: dict[int, tuple[int, str]], expected: tuple[str, ...], label: str, what: str) -> None:
    """The names of a :func:`read_names` table equal ``expected`` (the vocabulary's), in order."""
    names = dense_names(table, label, what)
    if len(names) != len(expected):
        raise CUBFormatError(f"expected {len(expected)} {what}s (the vocabulary's), found {len(names)}", file=label)
    for i, (name, want) in enumerate(zip(names, expected), start=1):
        if name != want:
            raise CUBFormatError(f"{what} {i} is {name!r}, the vocabulary has {want!r}", file=label, line=table[i][0])


def read_image_table(path: Path, label: str, columns: int, names: tuple[str, ...], kind) -> tuple[np.ndarray, ...]:
    """Columns of a one-line-per-image table as arrays: (ids, lines, col_1, ..., col_k)."""
    ids, lines, values = [], [], []
    for line, fields in read_rows(path, label, columns=columns):
        ids.append(parse_number(fields[0], int, label, line, "image_id"))
        lines.append(line)
        values.append([parse_number(t, kind, label, line, n) for t, n in zip(fields[1:], names)])
    arr = np.asarray(values, dtype=np.float64).reshape(len(values), columns - 1)
    return (np.asarray(ids, dtype=np.int64), np.asarray(lines, dtype=np.int64), *arr.T)


def read_attribute_labels(path: Path, label: str) -> tuple[np.ndarray, list[int]]:
    """(M, 5) int64 array [image_id, attribute_id, is_present, certainty_id, line] and the
    irregular line numbers (more than 5 fields; the first four are used)."""
    rows: list[tuple[int, int, int, int, int]] = []
    irregular: list[int] = []
    with utf8_errors_named(path, label), open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            fields = line.split()
            n = len(fields)
            if n != 5:
                if n == 0:
                    continue
                if n < 5:
                    raise CUBFormatError(
                        f"expected 5 columns (image_id attribute_id is_present certainty_id time), found {n}: "
                        f"{line.strip()!r}",
                        file=label,
                        line=number,
                    )
                irregular.append(number)
            try:
                rows.append((int(fields[0]), int(fields[1]), int(fields[2]), int(fields[3]), number))
            except ValueError:
                for tok, what in zip(fields[:4], ("image_id", "attribute_id", "is_present", "certainty_id")):
                    parse_number(tok, int, label, number, what)
    table = np.asarray(rows, dtype=np.int64).reshape(-1, 5)
    bad = np.flatnonzero(~np.isin(table[:, 2], (0, 1)))
    if bad.size:
        raise CUBFormatError(
            f"is_present must be 0 or 1, found {table[bad[0], 2]}", file=label, line=int(table[bad[0], 4])
        )
    bad = np.flatnonzero((table[:, 3] < 1) | (table[:, 3] > 4))
    if bad.size:
        raise CUBFormatError(
            f"certainty_id must be 1..4 ({', '.join(CERTAINTY_NAMES)}), found {table[bad[0], 3]}",
            file=label,
            line=int(table[bad[0], 4]),
        )
    return table, irregular


def read_part_locs(path: Path, label: str) -> tuple[np.ndarray, ...]:
    """``parts/part_locs.txt``: ``(M,)`` arrays image_id, part_id (int64), x, y (float64),
    visible (int64, 0/1) and line number."""
    loc_ids, loc_parts, loc_x, loc_y, loc_vis, loc_lines = [], [], [], [], [], []
    for line, fields in read_rows(path, label, columns=5):
        loc_ids.append(parse_number(fields[0], int, label, line, "image_id"))
        loc_parts.append(parse_number(fields[1], int, label, line, "part_id"))
        loc_x.append(parse_number(fields[2], float, label, line, "x"))
        loc_y.append(parse_number(fields[3], float, label, line, "y"))
        vis = parse_number(fields[4], int, label, line, "visible")
        if vis not in (0, 1):
            raise CUBFormatError(f"visible must be 0 or 1, found {vis}", file=label, line=line)
        loc_vis.append(vis)
        loc_lines.append(line)
    return (
        np.asarray(loc_ids, dtype=np.int64),
        np.asarray(loc_parts, dtype=np.int64),
        np.asarray(loc_x),
        np.asarray(loc_y),
        np.asarray(loc_vis, dtype=np.int64),
        np.asarray(loc_lines, dtype=np.int64),
    )


def read_continuous(path: Path, label: str, n_classes: int, n_attributes: int) -> np.ndarray:
    """``class_attribute_labels_continuous.txt``: ``(C, A)`` float32 percentages in 0..100, one line per class
    (values within :data:`PERCENT_SLACK` outside are clipped into it, counted in one warning)."""
    out = np.zeros((n_classes, n_attributes), dtype=np.float32)
    count, clipped = 0, []
    for line, fields in read_rows(path, label, columns=n_attributes):
        if count >= n_classes:
            raise CUBFormatError(f"expected {n_classes} lines (one per class), found more", file=label, line=line)
        values = [parse_number(t, float, label, line, "percentage") for t in fields]
        if min(values) < -PERCENT_SLACK or max(values) > 100 + PERCENT_SLACK:
            raise CUBFormatError(
                f"percentages must lie in 0..100, found {min(values):g}..{max(values):g}", file=label, line=line
            )
        if min(values) < 0 or max(values) > 100:
            clipped.append(line)
        out[count] = np.clip(values, 0, 100)
        count += 1
    if count != n_classes:
        raise CUBFormatError(f"expected {n_classes} lines (one per class in classes.txt), found {count}", file=label)
    if clipped:
        warn_repaired(label, clipped, f"line(s) with percentages within {PERCENT_SLACK:g} of 0..100 clipped into it")
    return out


def clip_boxes(boxes: np.ndarray, lines: np.ndarray, label: str) -> np.ndarray:
    """``bounding_boxes.txt`` rows ``(x, y, width, height)`` with a box starting left of or above
    the image cut at its edge (``x, y = 0``, the width and height shortened to keep the far edge),
    counted in one warning; a negative width or height, or a box wholly outside, names its line."""
    x, y, w, h = boxes.T
    bad = np.flatnonzero((w < 0) | (h < 0) | (x + w < 0) | (y + h < 0))
    if bad.size:
        raise CUBFormatError(
            f"width and height must be >= 0 and the box must reach the image, found "
            f"{' '.join(f'{v:g}' for v in boxes[bad[0]])}",
            file=label,
            line=int(lines[bad[0]]),
        )
    cut = (x < 0) | (y < 0)
    if cut.any():
        warn_repaired(label, lines[cut].tolist(), "box(es) starting left of or above the image cut at its edge")
    return np.stack([np.maximum(x, 0), np.maximum(y, 0), w + np.minimum(x, 0), h + np.minimum(y, 0)], axis=1)
