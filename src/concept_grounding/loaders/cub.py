"""CUB-200-2011 in its official folder layout: read it (``load_cub``), write it (``write_cub``).

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

Choices this module makes, so that they are written down once:

* ``attributes.txt`` ships beside the ``CUB_200_2011`` folder in the official tarball and
  inside ``attributes/`` in some copies; we look in ``<root>/attributes/attributes.txt``,
  ``<root>/attributes.txt`` and ``<root>/../attributes.txt``, in that order. Its names must
  equal the vocabulary's 312 attributes in order (our Features have fixed length).
* Irregular lines of ``image_attribute_labels.txt``: the real file has a handful of lines
  with more than five fields (a stray extra value). As in the CBM reference code
  (``line.strip().split()[:4]``), the first four fields are authoritative
  (image_id attribute_id is_present certainty_id) and the rest is ignored; the line
  numbers are kept in :attr:`CUBTables.irregular_lines` and logged. Fewer than five
  fields is an error. Runs of spaces, tabs and ``\\r\\n`` are accepted everywhere.
* Coordinates: the README gives part centres and boxes "in pixels" without an origin
  convention; we take them as they are, as 0-based pixel coordinates ``(x, y)`` of the
  image, which is how the CBM, ProtoPNet and Aysel et al. code use them. Parts that are
  not visible are stored as ``0 0 0`` in real CUB and come back as ``(0, 0)`` with
  ``part_visible = False``. Every coordinate must be a finite number; a visible part
  must lie on its image (``0 <= x <= width``, ``0 <= y <= height``, checked against the
  image header when ``check_images``); boxes need ``x, y, width, height >= 0`` (their
  extent is not checked against the image). Text files must be UTF-8.
* Optional extras, read when present: ``segmentations/<class>/<stem>.png`` (the CUB-200
  segmentation release; our ``mask`` column) and ``part_maps/<class>/<stem>.png`` (our
  own per-pixel part ids, ``part_map``). If such a folder exists every image must have
  its file. Real CUB without them gives ``mask = part_map = None``.
* Class-level labels: :func:`~concept_grounding.loaders.labels.class_level_labels` over
  the training split, then attributes kept on fewer than ``min_class_count`` classes
  are set to 0 in ``class_attributes`` (on real CUB, ``min_class_count=10`` keeps
  Koh et al.'s 112). Koh et al. vote over their training subset after holding out 20 %
  for validation; we vote over CUB's whole training split.

Bad input raises :class:`~concept_grounding.loaders.errors.CUBFormatError` with ``file``
and ``line``; nothing partial is returned.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import numpy as np

from ..fileio import FORMAT_OF_SUFFIX, atomic_write_bytes, atomic_write_lines, encoded_image_bytes
from ..vocabulary import Vocabulary, load_vocabulary
from ._text import index_images, index_pairs, parse_number, read_rows, show_path, utf8_errors_named
from .errors import CUBFormatError
from .labels import class_level_labels

if TYPE_CHECKING:
    import datasets

__all__ = ["CUBTables", "read_cub_tables", "load_cub", "write_cub", "CUB_FILES", "CERTAINTY_NAMES"]

logger = logging.getLogger(__name__)

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
_ATTRIBUTE_NAME_FILES = ("attributes/attributes.txt", "attributes.txt", "../attributes.txt")
#: ``attributes/certainties.txt`` of the official release
CERTAINTY_NAMES: tuple[str, ...] = ("not visible", "guessing", "probably", "definitely")
_EXTRA_FOLDERS = {"mask": "segmentations", "part_map": "part_maps"}


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


# --------------------------------------------------------------------------- reading
def _resolve_root(root: str | Path) -> Path:
    root = Path(root).expanduser()
    if not root.is_dir():
        raise CUBFormatError("no such folder", file=root)
    if not (root / "images.txt").exists() and (root / "CUB_200_2011" / "images.txt").exists():
        return root / "CUB_200_2011"
    return root


def _find_files(root: Path) -> dict[str, Path]:
    paths = {key: root / rel for key, rel in CUB_FILES.items()}
    missing = [CUB_FILES[k] for k, p in paths.items() if not p.is_file()]
    names = [root / rel for rel in _ATTRIBUTE_NAME_FILES]
    found = [p for p in names if p.is_file()]
    if not found:
        missing.append(" or ".join(_ATTRIBUTE_NAME_FILES))
    if missing:
        raise CUBFormatError(f"missing file(s): {', '.join(missing)}", file=root)
    paths["attribute_names"] = found[0]
    return paths


def _read_images(path: Path, label: str) -> tuple[np.ndarray, list[str], np.ndarray]:
    ids, names, seen = [], [], {}
    for line, (tok_id, name) in read_rows(path, label, columns=2):
        i = parse_number(tok_id, int, label, line, "image_id")
        if i < 1:
            raise CUBFormatError(f"image_id must be >= 1, found {i}", file=label, line=line)
        if i in seen:
            raise CUBFormatError(f"image id {i} appears twice (first on line {seen[i]})", file=label, line=line)
        parts = PurePosixPath(name).parts
        if PurePosixPath(name).is_absolute() or ".." in parts:
            raise CUBFormatError(f"file name must be a relative path inside images/, found {name!r}", file=label, line=line)
        seen[i] = line
        ids.append(i)
        names.append(name)
    if not ids:
        raise CUBFormatError("no images listed", file=label)
    image_ids = np.asarray(ids, dtype=np.int64)
    id_to_row = np.full(image_ids.max() + 1, -1, dtype=np.int64)
    id_to_row[image_ids] = np.arange(len(ids))
    return image_ids, names, id_to_row


def _read_names(path: Path, label: str, what: str, *, maxsplit: int | None = None) -> dict[int, tuple[int, str]]:
    """``id -> (line, name)`` of an ``<id> <name>`` file; duplicate ids name their line."""
    out: dict[int, tuple[int, str]] = {}
    for line, fields in read_rows(path, label, columns=2, maxsplit=maxsplit):
        i = parse_number(fields[0], int, label, line, f"{what}_id")
        if i in out:
            raise CUBFormatError(f"{what} id {i} appears twice (first on line {out[i][0]})", file=label, line=line)
        out[i] = (line, fields[1].strip())
    return out


def _check_ids_dense(table: dict[int, tuple[int, str]], label: str, what: str) -> list[str]:
    n = len(table)
    for i, (line, _) in table.items():
        if not 1 <= i <= n:
            raise CUBFormatError(f"{what} ids must be 1..{n} without gaps, found {i}", file=label, line=line)
    return [table[i][1] for i in range(1, n + 1)]


def _check_against_vocab(table: dict[int, tuple[int, str]], expected: tuple[str, ...], label: str, what: str) -> None:
    names = _check_ids_dense(table, label, what)
    if len(names) != len(expected):
        raise CUBFormatError(f"expected {len(expected)} {what}s (the vocabulary's), found {len(names)}", file=label)
    for i, (name, want) in enumerate(zip(names, expected), start=1):
        if name != want:
            raise CUBFormatError(f"{what} {i} is {name!r}, the vocabulary has {want!r}", file=label, line=table[i][0])


def _read_image_table(path: Path, label: str, columns: int, names: tuple[str, ...], kind) -> tuple[np.ndarray, ...]:
    """Columns of a one-line-per-image table as arrays: (ids, lines, col_1, ..., col_k)."""
    ids, lines, values = [], [], []
    for line, fields in read_rows(path, label, columns=columns):
        ids.append(parse_number(fields[0], int, label, line, "image_id"))
        lines.append(line)
        values.append([parse_number(t, kind, label, line, n) for t, n in zip(fields[1:], names)])
    arr = np.asarray(values, dtype=np.float64).reshape(len(values), columns - 1)
    return (np.asarray(ids, dtype=np.int64), np.asarray(lines, dtype=np.int64), *arr.T)


def _read_attribute_labels(path: Path, label: str) -> tuple[np.ndarray, list[int]]:
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
        raise CUBFormatError(f"is_present must be 0 or 1, found {table[bad[0], 2]}", file=label, line=int(table[bad[0], 4]))
    bad = np.flatnonzero((table[:, 3] < 1) | (table[:, 3] > 4))
    if bad.size:
        raise CUBFormatError(
            f"certainty_id must be 1..4 ({', '.join(CERTAINTY_NAMES)}), found {table[bad[0], 3]}",
            file=label,
            line=int(table[bad[0], 4]),
        )
    return table, irregular


def _read_continuous(path: Path, label: str, n_classes: int, n_attributes: int) -> np.ndarray:
    out = np.zeros((n_classes, n_attributes), dtype=np.float32)
    count = 0
    for line, fields in read_rows(path, label, columns=n_attributes):
        if count >= n_classes:
            raise CUBFormatError(f"expected {n_classes} lines (one per class), found more", file=label, line=line)
        values = [parse_number(t, float, label, line, "percentage") for t in fields]
        if min(values) < 0 or max(values) > 100:
            raise CUBFormatError("percentages must lie in 0..100", file=label, line=line)
        out[count] = values
        count += 1
    if count != n_classes:
        raise CUBFormatError(f"expected {n_classes} lines (one per class in classes.txt), found {count}", file=label)
    return out


def _check_images(tables: CUBTables, progress: bool) -> np.ndarray:
    """Every image exists and PIL can read its header; errors name the file. Returns (N, 2) ``(width, height)``."""
    from PIL import Image, UnidentifiedImageError
    from tqdm.auto import tqdm

    missing = [n for n in tables.file_names if not (tables.root / "images" / n).is_file()]
    if missing:
        raise CUBFormatError(
            f"{len(missing)} image file(s) listed in images.txt are missing, e.g. {missing[:5]}", file=tables.root / "images"
        )
    sizes = np.zeros((len(tables.file_names), 2), dtype=np.float64)
    for i in tqdm(range(len(tables.file_names)), desc="checking CUB images", disable=not progress, leave=False):
        path = tables.image_path(i)
        try:
            with Image.open(path) as im:
                sizes[i] = im.size  # reading the header is the check
        except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as exc:
            raise CUBFormatError(f"unreadable image: {exc}", file=path) from None
    return sizes


def _check_part_bounds(tables: CUBTables, part_lines: np.ndarray, label: str, sizes: np.ndarray | None) -> None:
    """Visible part centres lie on their image: ``0 <= x <= width``, ``0 <= y <= height``
    (only ``>= 0`` when the image sizes are unknown); the first offender names its line."""
    x, y = tables.part_xy[..., 0], tables.part_xy[..., 1]
    bad = (x < 0) | (y < 0)
    if sizes is not None:
        bad |= (x > sizes[:, None, 0]) | (y > sizes[:, None, 1])
    bad &= tables.part_visible
    if bad.any():
        i, k = np.argwhere(bad)[np.argmin(part_lines[bad])]
        size = f"{int(sizes[i, 0])} x {int(sizes[i, 1])} px, " if sizes is not None else ""
        raise CUBFormatError(
            f"visible part {k + 1} of image id {int(tables.image_ids[i])} at ({x[i, k]:g}, {y[i, k]:g}) lies outside"
            f" its image ({size}{tables.file_names[i]})", file=label, line=int(part_lines[i, k]))


def _extra_files(root: Path, folder: str, file_names: list[str]) -> list[str] | None:
    base = root / folder
    if not base.is_dir():
        return None
    paths = [base / PurePosixPath(n).with_suffix(".png") for n in file_names]
    missing = [show_path(p, root) for p in paths if not p.is_file()]
    if missing:
        raise CUBFormatError(
            f"folder present but {len(missing)} image(s) have no file in it, e.g. {missing[:5]}", file=base
        )
    return [str(p) for p in paths]


def read_cub_tables(
    root: str | Path, *, vocab: Vocabulary | None = None, check_images: bool = True, progress: bool = False
) -> CUBTables:
    """Read and cross-check every CUB text file of ``root`` into a :class:`CUBTables`.

    ``root`` is the ``CUB_200_2011`` folder (or its parent). ``check_images`` opens each
    image's header so an unreadable file fails here, by name, rather than mid-training.
    """
    vocab = vocab or load_vocabulary()
    root = _resolve_root(root)
    paths = _find_files(root)
    label = {key: show_path(p, root) for key, p in paths.items()}

    image_ids, file_names, id_to_row = _read_images(paths["images"], label["images"])
    n = len(image_ids)

    classes = _read_names(paths["classes"], label["classes"], "class")
    class_names = _check_ids_dense(classes, label["classes"], "class")
    _check_against_vocab(
        _read_names(paths["attribute_names"], label["attribute_names"], "attribute"),
        vocab.attributes,
        label["attribute_names"],
        "attribute",
    )
    _check_against_vocab(
        _read_names(paths["parts"], label["parts"], "part", maxsplit=1), vocab.parts, label["parts"], "part"
    )
    A, P, C = vocab.num_attributes, vocab.num_parts, len(class_names)

    ids, lines, cls = _read_image_table(paths["class_labels"], label["class_labels"], 2, ("class_id",), int)
    rows = index_images(ids, lines, id_to_row, n, label["class_labels"])
    bad = np.flatnonzero((cls < 1) | (cls > C))
    if bad.size:
        raise CUBFormatError(
            f"class id {int(cls[bad[0]])} is not in classes.txt (1..{C})", file=label["class_labels"], line=int(lines[bad[0]])
        )
    labels = np.zeros(n, dtype=np.int64)
    labels[rows] = cls.astype(np.int64) - 1

    ids, lines, flag = _read_image_table(paths["split"], label["split"], 2, ("is_training_image",), int)
    rows = index_images(ids, lines, id_to_row, n, label["split"])
    bad = np.flatnonzero(~np.isin(flag, (0, 1)))
    if bad.size:
        raise CUBFormatError(
            f"is_training_image must be 0 or 1, found {int(flag[bad[0]])}", file=label["split"], line=int(lines[bad[0]])
        )
    is_train = np.zeros(n, dtype=bool)
    is_train[rows] = flag == 1

    ids, lines, *box = _read_image_table(paths["bboxes"], label["bboxes"], 5, ("x", "y", "width", "height"), float)
    rows = index_images(ids, lines, id_to_row, n, label["bboxes"])
    bad = np.flatnonzero((box[2] < 0) | (box[3] < 0) | (box[0] < 0) | (box[1] < 0))
    if bad.size:
        raise CUBFormatError("x, y, width and height must be >= 0", file=label["bboxes"], line=int(lines[bad[0]]))
    bbox = np.zeros((n, 4), dtype=np.float32)
    bbox[rows] = np.stack(box, axis=1)

    loc_ids, loc_parts, loc_x, loc_y, loc_vis, loc_lines = [], [], [], [], [], []
    lbl = label["part_locs"]
    for line, fields in read_rows(paths["part_locs"], lbl, columns=5):
        loc_ids.append(parse_number(fields[0], int, lbl, line, "image_id"))
        loc_parts.append(parse_number(fields[1], int, lbl, line, "part_id"))
        loc_x.append(parse_number(fields[2], float, lbl, line, "x"))
        loc_y.append(parse_number(fields[3], float, lbl, line, "y"))
        vis = parse_number(fields[4], int, lbl, line, "visible")
        if vis not in (0, 1):
            raise CUBFormatError(f"visible must be 0 or 1, found {vis}", file=lbl, line=line)
        loc_vis.append(vis)
        loc_lines.append(line)
    r, c = index_pairs(
        np.asarray(loc_ids, dtype=np.int64), np.asarray(loc_parts, dtype=np.int64),
        np.asarray(loc_lines, dtype=np.int64), id_to_row, n, P, lbl, "part",
    )  # fmt: skip
    part_xy = np.zeros((n, P, 2), dtype=np.float32)
    part_xy[r, c, 0] = loc_x
    part_xy[r, c, 1] = loc_y
    part_visible = np.zeros((n, P), dtype=bool)
    part_visible[r, c] = np.asarray(loc_vis) == 1
    part_lines = np.zeros((n, P), dtype=np.int64)
    part_lines[r, c] = loc_lines

    table, irregular = _read_attribute_labels(paths["attribute_labels"], label["attribute_labels"])
    r, c = index_pairs(table[:, 0], table[:, 1], table[:, 4], id_to_row, n, A, label["attribute_labels"], "attribute")
    attributes = np.zeros((n, A), dtype=np.uint8)
    certainty = np.zeros((n, A), dtype=np.uint8)
    attributes[r, c] = table[:, 2]
    certainty[r, c] = table[:, 3]
    if irregular:
        logger.warning(
            "%s: %d line(s) with extra fields (first four used), e.g. lines %s",
            label["attribute_labels"], len(irregular), irregular[:5],
        )  # fmt: skip

    continuous = _read_continuous(paths["class_continuous"], label["class_continuous"], C, A)
    tables = CUBTables(
        root=root, image_ids=image_ids, file_names=file_names, labels=labels, class_names=class_names,
        is_train=is_train, attributes=attributes, certainty=certainty, class_attributes_continuous=continuous,
        part_xy=part_xy, part_visible=part_visible, bbox=bbox, irregular_lines=irregular,
        mask_files=_extra_files(root, _EXTRA_FOLDERS["mask"], file_names),
        part_map_files=_extra_files(root, _EXTRA_FOLDERS["part_map"], file_names),
    )  # fmt: skip
    sizes = _check_images(tables, progress) if check_images else None
    _check_part_bounds(tables, part_lines, lbl, sizes)
    return tables


def cub_class_attributes(tables: CUBTables, min_class_count: int | None = 10) -> tuple[np.ndarray, np.ndarray]:
    """(C, A) uint8 CBM class labels voted over the training split, with non-kept attributes
    zeroed, and the (A,) keep mask. See :mod:`concept_grounding.loaders.labels`."""
    C = len(tables.class_names)
    voters = tables.is_train
    if not voters.any():
        warnings.warn("no training images: class-level labels are voted over all images", stacklevel=3)
        voters = np.ones_like(voters)
    if min_class_count is not None and C < min_class_count:
        warnings.warn(
            f"{C} classes < min_class_count={min_class_count}: no attribute can be kept and every class-level "
            "label will be 0; pass min_class_count=None for small worlds",
            stacklevel=3,
        )
    votes, keep = class_level_labels(
        tables.attributes[voters], tables.labels[voters], C,
        certainty=tables.certainty[voters], min_class_count=min_class_count,
    )  # fmt: skip
    return votes * keep[None, :].astype(np.uint8), keep


def load_cub(
    root: str | Path,
    *,
    vocab: Vocabulary | None = None,
    min_class_count: int | None = 10,
    check_images: bool = True,
    progress: bool = True,
) -> "datasets.DatasetDict":
    """Load a CUB_200_2011 folder into ``{"train", "test"}`` with :func:`~concept_grounding.schema.cub_features`.

    Args:
        root: the ``CUB_200_2011`` folder (or the folder holding it).
        vocab: the vocabulary whose 312 attributes / 15 parts the files must match.
        min_class_count: CBM keep rule for class-level labels (10 on real CUB gives the
            112); ``None`` keeps every attribute.
        check_images: open every image header while loading (errors name the file).
        progress: show a progress bar while checking images.

    Returns:
        ``datasets.DatasetDict`` with splits ``"train"`` and ``"test"`` in ``images.txt``
        order. Images (and masks) are referenced by path and decoded lazily.
    """
    import datasets

    from ..schema import cub_features

    vocab = vocab or load_vocabulary()
    tables = read_cub_tables(root, vocab=vocab, check_images=check_images, progress=progress)
    class_attributes, keep = cub_class_attributes(tables, min_class_count)
    logger.info("CUB %s: %d images, %d attributes kept by the class-level rule", tables.root, len(tables.image_ids), keep.sum())
    features = cub_features(tables.class_names, vocab)
    out = {}
    for split, select in (("train", tables.is_train), ("test", ~tables.is_train)):
        ix = np.flatnonzero(select)
        columns = {
            "image_id": tables.image_ids[ix].astype(np.int32),
            "file_name": [tables.file_names[i] for i in ix],
            "image": [str(tables.image_path(i)) for i in ix],
            "label": tables.labels[ix],
            "attributes": tables.attributes[ix],
            "certainty": tables.certainty[ix],
            "class_attributes": class_attributes[tables.labels[ix]],
            "part_xy": tables.part_xy[ix],
            "part_visible": tables.part_visible[ix],
            "bbox": tables.bbox[ix],
            "mask": [tables.mask_files[i] for i in ix] if tables.mask_files else [None] * len(ix),
            "part_map": [tables.part_map_files[i] for i in ix] if tables.part_map_files else [None] * len(ix),
            "is_train": tables.is_train[ix],
        }
        columns = {k: list(v) if isinstance(v, np.ndarray) and v.ndim > 1 else v for k, v in columns.items()}
        out[split] = datasets.Dataset.from_dict(columns, features=features)
    return datasets.DatasetDict(out)


# --------------------------------------------------------------------------- writing
def _fmt(value: float) -> str:
    """Shortest text that reads back to the same float32."""
    return np.format_float_positional(np.float32(value), unique=True, trim="-")


def write_cub(dataset_dict: "datasets.DatasetDict", root: str | Path, *, progress: bool = True) -> Path:
    """Write rows in :func:`~concept_grounding.schema.cub_features` as a CUB_200_2011 folder.

    Every split of ``dataset_dict`` is written; ``is_train`` gives ``train_test_split.txt``.
    Images go to ``images/<file_name>`` (bytes kept as they are when already in the format
    the file extension names, else re-encoded; ``.png`` names are pixel-exact), masks to
    ``segmentations/`` and part maps to ``part_maps/`` (as ``<file_name stem>.png``) when
    they are not ``None``. ``certainty`` fills the certainty column, ``time`` is 0, and
    ``class_attribute_labels_continuous.txt`` holds 100 x the per-class mean of
    ``attributes`` over all images. Every file is written atomically (temp file +
    ``os.replace``). ``load_cub(write_cub(dd, root), min_class_count=None)`` gives back the
    same ids, file names, labels, attributes, certainty, parts, boxes, split and images.

    Returns:
        ``Path(root)``.
    """
    import datasets
    from tqdm.auto import tqdm

    root = Path(root)
    splits = list(dataset_dict.values())
    if not splits:
        raise ValueError("dataset_dict has no split to write")
    features = splits[0].features
    for ds in splits[1:]:
        if ds.features != features:
            raise ValueError("every split of dataset_dict must share the same features")
    class_names: list[str] = features["label"].names
    merged = datasets.concatenate_datasets(splits) if len(splits) > 1 else splits[0]
    raw = merged.cast_column("image", datasets.Image(decode=False))
    for col in ("mask", "part_map"):
        raw = raw.cast_column(col, datasets.Image(decode=False))
    ids = np.asarray(list(raw["image_id"]), dtype=np.int64)
    if len(np.unique(ids)) != len(ids) or (ids < 1).any():
        raise ValueError("image_id must be unique and >= 1 across all splits of dataset_dict")
    order = np.argsort(ids, kind="stable")
    names: list[str] = list(raw["file_name"])
    for name in names:
        p = PurePosixPath(name)
        if p.is_absolute() or ".." in p.parts or p.suffix.lower() not in FORMAT_OF_SUFFIX:
            raise ValueError(f"file_name must be a relative .jpg/.jpeg/.png path, got {name!r}")
    if len(set(names)) != len(names):
        raise ValueError("file_name must be unique across all splits of dataset_dict")
    labels = np.asarray(list(raw["label"]), dtype=np.int64)
    attributes = np.asarray(list(raw["attributes"]), dtype=np.uint8)
    certainty = np.asarray(list(raw["certainty"]), dtype=np.uint8)
    part_xy = np.asarray(list(raw["part_xy"]), dtype=np.float32)
    part_visible = np.asarray(list(raw["part_visible"]), dtype=bool)
    bbox = np.asarray(list(raw["bbox"]), dtype=np.float32)
    is_train = np.asarray(list(raw["is_train"]), dtype=bool)
    A, P, C = attributes.shape[1], part_xy.shape[1], len(class_names)
    if not np.isin(certainty, (1, 2, 3, 4)).all():
        raise ValueError("certainty must hold CUB certainty ids 1..4")
    vocab = load_vocabulary()
    if A != vocab.num_attributes or P != vocab.num_parts:
        raise ValueError(f"rows must have {vocab.num_attributes} attributes and {vocab.num_parts} parts")

    files: dict[str, list[str]] = {
        "images.txt": [f"{ids[i]} {names[i]}" for i in order],
        "image_class_labels.txt": [f"{ids[i]} {labels[i] + 1}" for i in order],
        "train_test_split.txt": [f"{ids[i]} {int(is_train[i])}" for i in order],
        "classes.txt": [f"{k + 1} {name}" for k, name in enumerate(class_names)],
        "attributes/attributes.txt": [f"{j + 1} {name}" for j, name in enumerate(vocab.attributes)],
        "attributes/certainties.txt": [f"{k + 1} {name}" for k, name in enumerate(CERTAINTY_NAMES)],
        "parts/parts.txt": [f"{k + 1} {name}" for k, name in enumerate(vocab.parts)],
        "bounding_boxes.txt": [f"{ids[i]} " + " ".join(_fmt(v) for v in bbox[i]) for i in order],
    }
    files["parts/part_locs.txt"] = [
        f"{ids[i]} {k + 1} {_fmt(part_xy[i, k, 0])} {_fmt(part_xy[i, k, 1])} {int(part_visible[i, k])}"
        for i in order
        for k in range(P)
    ]
    files["attributes/image_attribute_labels.txt"] = [
        f"{ids[i]} {j + 1} {attributes[i, j]} {certainty[i, j]} 0" for i in order for j in range(A)
    ]
    counts = np.bincount(labels, minlength=C).astype(np.float64)
    sums = np.zeros((C, A))
    np.add.at(sums, labels, attributes.astype(np.float64))
    percent = 100.0 * sums / np.maximum(counts, 1)[:, None]
    files["attributes/class_attribute_labels_continuous.txt"] = [
        " ".join(f"{v:.10g}" for v in row) for row in percent
    ]

    images, masks, part_maps = list(raw["image"]), list(raw["mask"]), list(raw["part_map"])
    for col, values in (("mask", masks), ("part_map", part_maps)):
        present = [v is not None and (v.get("bytes") or v.get("path")) for v in values]
        if any(present) and not all(present):
            raise ValueError(f"{col} must be given for every row or for none (CUB's extra folders are all-or-nothing)")
    for i in tqdm(order, desc="writing CUB images", disable=not progress, leave=False):
        name = names[i]
        suffix = PurePosixPath(name).suffix.lower()
        data = encoded_image_bytes(images[i], FORMAT_OF_SUFFIX[suffix])
        if data is None:
            raise ValueError(f"row with image_id {ids[i]} ({name}) has no image")
        atomic_write_bytes(root / "images" / name, data)
        for col, values in (("mask", masks), ("part_map", part_maps)):
            data = encoded_image_bytes(values[i], "PNG")
            if data is not None:
                rel = PurePosixPath(name).with_suffix(".png")
                atomic_write_bytes(root / _EXTRA_FOLDERS[col] / rel, data)
    for rel, lines in files.items():
        atomic_write_lines(root / rel, lines)
    return root
