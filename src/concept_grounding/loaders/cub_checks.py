"""Checks of a CUB folder beyond its text files: images readable, part centres on their
images, optional per-image folders complete. Errors are
:class:`~concept_grounding.loaders.errors.CUBFormatError` naming the file (and line)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import numpy as np

from ._text import show_path
from .cub_files import CUBTables
from .errors import CUBFormatError

__all__ = ["check_images_readable", "check_part_bounds", "extra_files"]


def check_images_readable(tables: CUBTables, progress: bool) -> np.ndarray:
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


def check_part_bounds(tables: CUBTables, part_lines: np.ndarray, label: str, sizes: np.ndarray | None) -> None:
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


def extra_files(root: Path, folder: str, file_names: list[str]) -> list[str] | None:
    """Absolute paths of ``<folder>/<stem>.png`` for every image, or ``None`` when the folder is absent
    (a present folder must hold every image's file)."""
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
