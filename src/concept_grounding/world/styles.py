"""Four PACS-like rendering styles as deterministic post-processing of world renders.

ConceptBed's domain concepts are PACS' four domains (photo, art painting, cartoon, sketch).
The world Flux never saw any of them (it was trained on plain renders), so each is a new
concept ``V*`` to learn. Every style is a pure function of the image and a seed (numpy and
PIL filters only), so the same render always gives the same stylised pixels:

* ``photo``: the render with fine film grain (``sigma = 6`` grey levels) and a faint
  diagonal paper texture: nearly identity;
* ``art_painting``: a median (brush) filter, smoothed, colours pulled to a warm
  12-colour palette, with a canvas weave;
* ``cartoon``: posterised to 3 levels per channel, dark outlines where edges are strong;
* ``sketch``: grey pencil lines (edge magnitude) on white paper.

>>> import numpy as np
>>> image = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
>>> out = stylise(image, "sketch", seed=1)
>>> out.shape, out.dtype, bool((stylise(image, "sketch", seed=1) == out).all())
((32, 32, 3), dtype('uint8'), True)
>>> stylise(image, "oil")
Traceback (most recent call last):
...
ValueError: style must be one of ('photo', 'art_painting', 'cartoon', 'sketch'), got 'oil'
"""

from __future__ import annotations

import numpy as np

__all__ = ["STYLES", "stylise"]

#: PACS' four domains, in the order of the style oracle's classes.
STYLES: tuple[str, ...] = ("photo", "art_painting", "cartoon", "sketch")

#: the art painting's warm palette (RGB)
_PALETTE = np.array(
    [
        [38, 28, 22],
        [92, 58, 36],
        [150, 96, 52],
        [204, 152, 88],
        [238, 214, 160],
        [250, 240, 214],
        [64, 84, 60],
        [110, 140, 90],
        [70, 96, 140],
        [140, 170, 200],
        [180, 60, 40],
        [220, 120, 60],
    ],
    dtype=np.float32,
)


def _grey(image: np.ndarray) -> np.ndarray:
    """``(H, W, 3)`` uint8 -> ``(H, W)`` float32 luminance in [0, 255]."""
    return image.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)


def _edges(image: np.ndarray) -> np.ndarray:
    """``(H, W)`` Sobel gradient magnitude of the luminance, scaled so its 95th percentile is 1."""
    g = np.pad(_grey(image), 1, mode="edge")
    gx = (g[:-2, 2:] + 2 * g[1:-1, 2:] + g[2:, 2:]) - (g[:-2, :-2] + 2 * g[1:-1, :-2] + g[2:, :-2])
    gy = (g[2:, :-2] + 2 * g[2:, 1:-1] + g[2:, 2:]) - (g[:-2, :-2] + 2 * g[:-2, 1:-1] + g[:-2, 2:])
    mag = np.hypot(gx, gy)
    return mag / max(float(np.percentile(mag, 95)), 1e-6)


def _texture(shape: tuple[int, int], period: int, seed: int) -> np.ndarray:
    """``(H, W)`` float32 in [-1, 1]: a weave of period ``period`` pixels with a random phase."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[: shape[0], : shape[1]].astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, 2)
    return 0.5 * (np.sin(2 * np.pi * (x + y) / period + phase[0]) + np.sin(2 * np.pi * (x - y) / period + phase[1]))


def _photo(image: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = (
        image.astype(np.float32)
        + rng.normal(0.0, 6.0, image.shape)
        + 4.0 * _texture(image.shape[:2], 7, seed)[..., None]
    )
    return out


def _art_painting(image: np.ndarray, seed: int) -> np.ndarray:
    from PIL import Image, ImageFilter

    pil = Image.fromarray(image).filter(ImageFilter.MedianFilter(3)).filter(ImageFilter.SMOOTH_MORE)
    smooth = np.asarray(pil, dtype=np.float32)
    dist = ((smooth[..., None, :] - _PALETTE) ** 2).sum(-1)
    painted = _PALETTE[dist.argmin(-1)]
    mixed = 0.6 * painted + 0.4 * smooth
    return mixed + 14.0 * _texture(image.shape[:2], 3, seed)[..., None]


def _cartoon(image: np.ndarray, seed: int) -> np.ndarray:
    levels = np.round(image.astype(np.float32) / 127.5) * 127.5
    lines = _edges(image) > 0.6
    out = levels.copy()
    out[lines] = 20.0
    return out


def _sketch(image: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pencil = 250.0 - 200.0 * np.clip(_edges(image), 0.0, 1.0) + rng.normal(0.0, 4.0, image.shape[:2])
    return np.repeat(pencil[..., None], 3, axis=-1)


_FILTERS = {"photo": _photo, "art_painting": _art_painting, "cartoon": _cartoon, "sketch": _sketch}


def stylise(image: np.ndarray, style: str, seed: int = 0) -> np.ndarray:
    """``(H, W, 3)`` uint8 render -> the same bird in ``style`` (``(H, W, 3)`` uint8).

    Args:
        image: a world render (any size).
        style: one of :data:`STYLES`.
        seed: the grain / texture phase (the same seed gives the same pixels).
    """
    if style not in _FILTERS:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[-1] != 3 or image.dtype != np.uint8:
        raise ValueError(f"image must be (H, W, 3) uint8, got {image.shape} {image.dtype}")
    return np.clip(np.rint(_FILTERS[style](image, int(seed))), 0, 255).astype(np.uint8)
