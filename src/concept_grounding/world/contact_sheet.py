"""A contact sheet of the bird world: birds with their part centres, and counterfactual pairs.

Reused by ``concept-grounding world``, the demo and the Gradio Space.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from PIL import Image

    from .sample import BirdSample, Counterfactual

__all__ = ["contact_sheet"]

#: One dot colour per CUB part (same order as ``vocab.parts``).
PART_COLORS: tuple[tuple[int, int, int], ...] = (
    (230, 25, 75),
    (255, 225, 25),
    (60, 180, 75),
    (245, 130, 48),
    (145, 30, 180),
    (70, 240, 240),
    (240, 50, 230),
    (210, 245, 60),
    (250, 190, 212),
    (0, 128, 128),
    (220, 190, 255),
    (170, 110, 40),
    (255, 250, 200),
    (128, 0, 0),
    (170, 255, 195),
)
#: Short labels drawn next to the dots.
PART_ABBREV: tuple[str, ...] = (
    "back",
    "beak",
    "bel",
    "br",
    "cr",
    "fh",
    "lEye",
    "lLeg",
    "lW",
    "nape",
    "rEye",
    "rLeg",
    "rW",
    "tail",
    "thr",
)


def _tile(sample: BirdSample, scale: int, labels: bool, caption: str | None):
    from PIL import Image, ImageDraw

    img = Image.fromarray(sample.image).resize(
        (sample.image.shape[1] * scale, sample.image.shape[0] * scale), Image.Resampling.LANCZOS
    )
    draw = ImageDraw.Draw(img)
    if labels:
        for i in np.flatnonzero(sample.part_visible):
            x, y = (float(c) * scale + scale / 2 - 0.5 for c in sample.part_xy[i])
            r = max(2.0, scale * 1.3)
            draw.ellipse((x - r, y - r, x + r, y + r), fill=PART_COLORS[i], outline=(0, 0, 0))
            draw.text(
                (x + r + 1, y - r - 2), PART_ABBREV[i], fill=PART_COLORS[i], stroke_width=1, stroke_fill=(0, 0, 0)
            )
    if caption:
        draw.rectangle((0, img.height - 14, img.width, img.height), fill=(0, 0, 0))
        draw.text((3, img.height - 13), caption[: img.width // 6], fill=(255, 255, 255))
    return img


def contact_sheet(
    samples: Sequence[BirdSample],
    counterfactuals: Sequence[Counterfactual] = (),
    columns: int = 6,
    scale: int = 2,
    part_labels: bool = True,
    class_names: Sequence[str] | None = None,
) -> Image.Image:
    """Grid of ``samples`` with visible part centres drawn as coloured, labelled dots,
    followed by rows of original | counterfactual pairs captioned with S+.

    Args:
        samples: birds to show (at most a few dozen is sensible).
        counterfactuals: pairs to show after the grid, two tiles each.
        columns: tiles per row (even numbers keep pairs on one row).
        scale: integer upscaling of each image.
        part_labels: draw part centres and their abbreviations.
        class_names: if given, captions each bird with its class name.
    Returns:
        a ``PIL.Image`` (RGB).
    """
    from PIL import Image

    if columns < 1 or scale < 1:
        raise ValueError(f"columns and scale must be >= 1, got columns={columns}, scale={scale}")
    tiles = []
    for s in samples:
        cap = class_names[s.label].split(".", 1)[-1].replace("_", " ") if class_names else None
        tiles.append(_tile(s, scale, part_labels, cap))
    pair_tiles = []
    for cf in counterfactuals:
        pair_tiles.append(_tile(cf.original, scale, False, "original"))
        value = cf.target_attribute.split("::", 1)[1]
        pair_tiles.append(_tile(cf.edited, scale, False, f"+{value} {cf.group.replace('_', ' ')}"))
    if not tiles and not pair_tiles:
        raise ValueError("contact_sheet needs at least one sample or counterfactual")
    w, h = (tiles or pair_tiles)[0].size
    pad = 4
    rows_a = -(-len(tiles) // columns)
    rows_b = -(-len(pair_tiles) // columns)
    gap = 12 if tiles and pair_tiles else 0
    sheet = Image.new("RGB", (columns * (w + pad) + pad, (rows_a + rows_b) * (h + pad) + pad + gap), (255, 255, 255))
    for k, t in enumerate(tiles):
        sheet.paste(t, (pad + (k % columns) * (w + pad), pad + (k // columns) * (h + pad)))
    top = pad + rows_a * (h + pad) + gap
    for k, t in enumerate(pair_tiles):
        sheet.paste(t, (pad + (k % columns) * (w + pad), top + (k // columns) * (h + pad)))
    return sheet
