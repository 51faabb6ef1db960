"""CUB-200-2011 in its official folder layout: read it (``load_cub``; ``write_cub`` in :mod:`.cub_write`).

The files and their columns are listed in :mod:`.cub_files` (their parsers);
:mod:`.cub_checks` checks images and part centres; :mod:`.cub_write` writes a folder.

Its choices (where ``attributes.txt`` may lie, irregular lines, coordinates, what a messy copy has
repaired or refused, optional masks, class-level labels): docs/bench.md, "Reading CUB-200-2011".

Bad input raises :class:`~concept_grounding.loaders.errors.CUBFormatError` with ``file``
and ``line``; nothing partial is returned.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..vocabulary import Vocabulary, load_vocabulary
from ._text import index_images, index_pairs, show_path
from .cub_checks import check_images_readable, check_part_bounds, extra_files
from .cub_files import (
    EXTRA_FOLDERS,
    CUBTables,
    check_against_vocab,
    clip_boxes,
    dense_names,
    find_files,
    read_attribute_labels,
    read_continuous,
    read_image_table,
    read_images,
    read_names,
    read_part_locs,
    resolve_root,
)
from .errors import CUBFormatError, warn_repaired
from .labels import class_level_labels

if TYPE_CHECKING:
    import datasets

__all__ = ["read_cub_tables", "load_cub"]

logger = logging.getLogger(__name__)


def read_cub_tables(
    root: str | Path, *, vocab: Vocabulary | None = None, check_images: bool = True, progress: bool = False
) -> CUBTables:
    """Read and cross-check every CUB text file of ``root`` into a :class:`CUBTables`.

    ``root`` is the ``CUB_200_2011`` folder (or its parent). ``check_images`` opens each
    image's header so an unreadable file fails here, by name, rather than mid-training.
    """
    vocab = vocab or load_vocabulary()
    root = resolve_root(root)
    paths = find_files(root)
    label = {key: show_path(p, root) for key, p in paths.items()}

    image_ids, file_names, id_to_row = read_images(paths["images"], label["images"])
    n = len(image_ids)

    classes = read_names(paths["classes"], label["classes"], "class")
    class_names = dense_names(classes, label["classes"], "class")
    check_against_vocab(
        read_names(paths["attribute_names"], label["attribute_names"], "attribute"),
        vocab.attributes,
        label["attribute_names"],
        "attribute",
    )
    check_against_vocab(
        read_names(paths["parts"], label["parts"], "part", maxsplit=1), vocab.parts, label["parts"], "part"
    )
    A, P, C = vocab.num_attributes, vocab.num_parts, len(class_names)

    ids, lines, cls = read_image_table(paths["class_labels"], label["class_labels"], 2, ("class_id",), int)
    rows = index_images(ids, lines, id_to_row, n, label["class_labels"])
    bad = np.flatnonzero((cls < 1) | (cls > C))
    if bad.size:
        raise CUBFormatError(
            f"class id {int(cls[bad[0]])} is not in classes.txt (1..{C})",
            file=label["class_labels"],
            line=int(lines[bad[0]]),
        )
    labels = np.zeros(n, dtype=np.int64)
    labels[rows] = cls.astype(np.int64) - 1

    ids, lines, flag = read_image_table(paths["split"], label["split"], 2, ("is_training_image",), int)
    rows = index_images(ids, lines, id_to_row, n, label["split"])
    bad = np.flatnonzero(~np.isin(flag, (0, 1)))
    if bad.size:
        raise CUBFormatError(
            f"is_training_image must be 0 or 1, found {int(flag[bad[0]])}", file=label["split"], line=int(lines[bad[0]])
        )
    is_train = np.zeros(n, dtype=bool)
    is_train[rows] = flag == 1

    ids, lines, *box = read_image_table(paths["bboxes"], label["bboxes"], 5, ("x", "y", "width", "height"), float)
    rows = index_images(ids, lines, id_to_row, n, label["bboxes"])
    bbox = np.zeros((n, 4), dtype=np.float32)
    bbox[rows] = clip_boxes(np.stack(box, axis=1), lines, label["bboxes"])

    lbl = label["part_locs"]
    loc_ids, loc_parts, loc_x, loc_y, loc_vis, loc_lines = read_part_locs(paths["part_locs"], lbl)
    r, c = index_pairs(loc_ids, loc_parts, loc_lines, id_to_row, n, P, lbl, "part")
    part_xy = np.zeros((n, P, 2), dtype=np.float32)
    part_xy[r, c, 0] = loc_x
    part_xy[r, c, 1] = loc_y
    part_visible = np.zeros((n, P), dtype=bool)
    part_visible[r, c] = np.asarray(loc_vis) == 1
    part_lines = np.zeros((n, P), dtype=np.int64)
    part_lines[r, c] = loc_lines

    table, irregular = read_attribute_labels(paths["attribute_labels"], label["attribute_labels"])
    r, c = index_pairs(table[:, 0], table[:, 1], table[:, 4], id_to_row, n, A, label["attribute_labels"], "attribute")
    attributes = np.zeros((n, A), dtype=np.uint8)
    certainty = np.zeros((n, A), dtype=np.uint8)
    attributes[r, c] = table[:, 2]
    certainty[r, c] = table[:, 3]
    if irregular:
        warn_repaired(label["attribute_labels"], irregular, "line(s) with extra fields (the first four used)")

    continuous = read_continuous(paths["class_continuous"], label["class_continuous"], C, A)
    tables = CUBTables(
        root=root, image_ids=image_ids, file_names=file_names, labels=labels, class_names=class_names,
        is_train=is_train, attributes=attributes, certainty=certainty, class_attributes_continuous=continuous,
        part_xy=part_xy, part_visible=part_visible, bbox=bbox, irregular_lines=irregular,
        mask_files=extra_files(root, EXTRA_FOLDERS["mask"], file_names),
        part_map_files=extra_files(root, EXTRA_FOLDERS["part_map"], file_names),
    )  # fmt: skip
    sizes = check_images_readable(tables, progress) if check_images else None
    check_part_bounds(tables, part_lines, lbl, sizes)
    return tables


def cub_class_attributes(tables: CUBTables, min_class_count: int | None = 10) -> tuple[np.ndarray, np.ndarray]:
    """(C, A) uint8 CBM class labels voted over the training split, with non-kept attributes
    zeroed, and the (A,) keep mask. See :mod:`concept_grounding.loaders.labels`."""
    C = len(tables.class_names)
    voters = tables.is_train
    if not voters.any():
        warnings.warn("no training images: class-level labels are voted over all images", stacklevel=3)
        voters = np.ones_like(voters)
    if min_class_count is not None and min_class_count > C:
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
) -> datasets.DatasetDict:
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
    logger.info(
        "CUB %s: %d images, %d attributes kept by the class-level rule", tables.root, len(tables.image_ids), keep.sum()
    )
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
