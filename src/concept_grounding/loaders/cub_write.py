"""Write rows in :func:`~concept_grounding.schema.cub_features` as a ``CUB_200_2011`` folder
(the inverse of :func:`~concept_grounding.loaders.cub.load_cub`), every file atomically."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import numpy as np

from ..fileio import FORMAT_OF_SUFFIX, atomic_write_bytes, atomic_write_lines, encoded_image_bytes
from ..vocabulary import load_vocabulary
from .cub_files import CERTAINTY_NAMES, EXTRA_FOLDERS

if TYPE_CHECKING:
    import datasets

__all__ = ["write_cub"]


def float32_text(value: float) -> str:
    """Shortest text that reads back to the same float32.

    >>> float32_text(0.1), float32_text(2.0)
    ('0.1', '2')
    """
    return np.format_float_positional(np.float32(value), unique=True, trim="-")


def write_cub(dataset_dict: datasets.DatasetDict, root: str | Path, *, progress: bool = True) -> Path:
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
    if vocab.num_attributes != A or vocab.num_parts != P:
        raise ValueError(f"rows must have {vocab.num_attributes} attributes and {vocab.num_parts} parts")

    files: dict[str, list[str]] = {
        "images.txt": [f"{ids[i]} {names[i]}" for i in order],
        "image_class_labels.txt": [f"{ids[i]} {labels[i] + 1}" for i in order],
        "train_test_split.txt": [f"{ids[i]} {int(is_train[i])}" for i in order],
        "classes.txt": [f"{k + 1} {name}" for k, name in enumerate(class_names)],
        "attributes/attributes.txt": [f"{j + 1} {name}" for j, name in enumerate(vocab.attributes)],
        "attributes/certainties.txt": [f"{k + 1} {name}" for k, name in enumerate(CERTAINTY_NAMES)],
        "parts/parts.txt": [f"{k + 1} {name}" for k, name in enumerate(vocab.parts)],
        "bounding_boxes.txt": [f"{ids[i]} " + " ".join(float32_text(v) for v in bbox[i]) for i in order],
    }
    files["parts/part_locs.txt"] = [
        f"{ids[i]} {k + 1} {float32_text(part_xy[i, k, 0])} {float32_text(part_xy[i, k, 1])} {int(part_visible[i, k])}"
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
    files["attributes/class_attribute_labels_continuous.txt"] = [" ".join(f"{v:.10g}" for v in row) for row in percent]

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
                atomic_write_bytes(root / EXTRA_FOLDERS[col] / rel, data)
    for rel, lines in files.items():
        atomic_write_lines(root / rel, lines)
    return root
