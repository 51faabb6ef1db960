"""Checks of a CUB folder beyond its text files: images readable, part centres on their
images (clipped onto them when slightly off), optional per-image folders complete. Errors
are :class:`~concept_grounding.loaders.errors.CUBFormatError` naming the file (and line);
repairs a real copy needs are counted in one
:class:`~concept_grounding.loaders.errors.DatasetWarning` each."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import numpy as np

from ._text import show_path
from .cub_files import CUBTables
from .errors import CUBFormatError, warn_repaired

__all__ = []


def check_images_readable(tables: CUBTables, progress: bool) -> np.ndarray:
    """Every image exists and PIL can read its header; errors name the file. Returns (N, 2) ``(width, height)``."""
    from PIL import Image, UnidentifiedImageError
    from tqdm.auto import tqdm

    missing = [n for n in tables.file_names if not (tables.root / "images" / n).is_file()]
    if missing:
        raise CUBFormatError(
            f"{len(missing)} image file(s) listed in images.txt are missing, e.g. {missing[:5]}",
            file=tables.root / "images",
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


#: how far past its image's border a visible part centre may lie and still be clipped onto it, as a
#: fraction of the image's width (for x) or height (for y); a centre farther out is an error.
PART_MARGIN = 0.5


def check_part_bounds(tables: CUBTables, part_lines: np.ndarray, label: str, sizes: np.ndarray | None) -> None:
    """Put every visible part centre on its image, ``0 <= x <= width`` and ``0 <= y <= height``.

    Real CUB's ``part_locs.txt`` has visible centres a few pixels past the border (a click
    just outside the photo). They are clipped onto the border in ``tables.part_xy`` (the
    part stays visible), with one :class:`~.errors.DatasetWarning` that counts them. A
    centre more than :data:`PART_MARGIN` of the image's side outside it is no slip of the
    hand and raises :class:`CUBFormatError` naming its line (NaN and inf are refused when
    the file is read). Without image sizes (``sizes=None``, ``check_images=False``) only
    negative coordinates can be seen: they are clipped to 0 and counted the same way.
    Invisible parts keep their values (real CUB writes them as ``0 0``).
    """
    xy = tables.part_xy
    high = sizes[:, None, :] if sizes is not None else np.full((1, 1, 2), np.inf)
    far = ((xy < -PART_MARGIN * high) | (xy > (1 + PART_MARGIN) * high)).any(-1) & tables.part_visible
    if far.any():
        i, k = np.argwhere(far)[np.argmin(part_lines[far])]
        raise CUBFormatError(
            f"visible part {k + 1} of image id {int(tables.image_ids[i])} at ({xy[i, k, 0]:g}, {xy[i, k, 1]:g}) lies"
            f" more than {PART_MARGIN:g} x its side outside its image ({int(sizes[i, 0])} x {int(sizes[i, 1])} px,"
            f" {tables.file_names[i]})",
            file=label,
            line=int(part_lines[i, k]),
        )
    off = ((xy < 0) | (xy > high)).any(-1) & tables.part_visible
    if off.any():
        np.clip(xy, 0, high, out=xy, where=off[..., None])
        warn_repaired(
            label, part_lines[off].tolist(), "visible part centre(s) past their image's border clipped onto it"
        )


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
            f"folder present but {len(missing)} image(s) have no file in it, e.g. {missing[:5]}; complete it, or"
            " move it away to load without it",
            file=base,
        )
    return [str(p) for p in paths]
