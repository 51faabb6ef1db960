"""Procedural background scenes: sky, foliage, water, ground and reeds, with texture, and a
plain pale backdrop (``WorldConfig(scene="plain")``).

Each scene is a float32 (H, W, 3) image in 0-255 drawn from smooth random fields
(bilinear upsampling of a coarse random grid) plus per-pixel grain. Scenes with a
perch (sky, foliage) draw a branch under the bird's feet.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> img = draw_background("water", 64, 64, rng, np.zeros((64, 64), np.float32), None)
>>> img.shape, img.dtype, bool(0 <= img.min() and img.max() <= 255)
((64, 64, 3), dtype('float32'), True)
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["PLAIN_RGB"]

#: The plain scene's colour: a pale grey-blue no bird part is painted in.
PLAIN_RGB: tuple[int, int, int] = (214, 220, 226)


@lru_cache(maxsize=32)
def _upsample_matrix(n_out: int, n_in: int) -> np.ndarray:
    """(n_out, n_in) linear interpolation matrix from a coarse grid to pixels."""
    pos = np.linspace(0, n_in - 1, n_out)
    lo = np.clip(np.floor(pos).astype(int), 0, n_in - 2)
    w = (pos - lo).astype(np.float32)
    m = np.zeros((n_out, n_in), dtype=np.float32)
    m[np.arange(n_out), lo] = 1 - w
    m[np.arange(n_out), lo + 1] = w
    return m


def smooth_field(rng: np.random.Generator, h: int, w: int, cells: int) -> np.ndarray:
    """(h, w) float32 smooth noise in about [-1, 1] with ``cells`` features per side."""
    g = rng.standard_normal((cells + 1, cells + 1)).astype(np.float32)
    return _upsample_matrix(h, cells + 1) @ g @ _upsample_matrix(w, cells + 1).T


def _mix(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    return a + (b - a) * t[..., None]


def _gradient(h: int, top: tuple, bottom: tuple, w: int) -> np.ndarray:
    t = np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None, None]
    out = np.asarray(top, np.float32) + (np.asarray(bottom, np.float32) - np.asarray(top, np.float32)) * t
    return np.broadcast_to(out, (h, w, 3))


def _sky(h, w, rng):
    img = _gradient(h, (88, 148, 226), (196, 220, 246), w)
    clouds = np.clip(smooth_field(rng, h, w, 4) * 0.9 + smooth_field(rng, h, w, 9) * 0.35 - 0.35, 0, 1)
    return _mix(img, np.full(3, 248, np.float32), clouds)


def _foliage(h, w, rng):
    light = smooth_field(rng, h, w, 5)
    leaves = smooth_field(rng, h, w, 14)
    base = _mix(
        np.full((h, w, 3), (36, 84, 38), np.float32),
        np.full(3, (96, 150, 64), np.float32),
        np.clip(0.5 + 0.45 * light, 0, 1),
    )
    spots = np.clip(leaves * 1.6 - 0.6, 0, 1)
    return _mix(base, np.asarray((150, 190, 90), np.float32), spots * 0.6)


def _water(h, w, rng):
    img = _gradient(h, (70, 130, 160), (30, 80, 120), w)
    yy = np.arange(h, dtype=np.float32)[:, None]
    warp = smooth_field(rng, h, w, 2) * 2.5
    freq = 2 * np.pi / max(4.0, h / 12)
    ripples = np.clip(np.sin(yy * freq + warp) * 1.4 - 0.8, 0, 1) * np.clip(
        0.6 + 0.5 * smooth_field(rng, h, w, 6), 0, 1
    )
    return _mix(img, np.asarray((190, 220, 235), np.float32), ripples * 0.7)


def _ground(h, w, rng, horizon):
    img = _gradient(h, (150, 190, 225), (205, 215, 215), w)
    soil = _mix(
        np.full((h, w, 3), (150, 120, 80), np.float32),
        np.asarray((95, 75, 50), np.float32),
        np.clip(0.5 + 0.5 * smooth_field(rng, h, w, 8), 0, 1),
    )
    yy = np.arange(h, dtype=np.float32)[:, None] - horizon
    t = np.clip(yy + 0.5, 0, 1) * np.ones((1, w), np.float32)
    return _mix(img, soil, t)


def _reeds(h, w, rng):
    img = _gradient(h, (170, 180, 120), (110, 120, 70), w)
    xx = np.arange(w, dtype=np.float32)[None, :]
    warp = smooth_field(rng, h, w, 3) * 3.0
    stalks = np.clip(np.sin(xx * (2 * np.pi / max(5.0, w / 18)) + warp) * 2.0 - 1.2, 0, 1)
    return _mix(img, np.asarray((200, 190, 120), np.float32), stalks * 0.8)


def _perch(img, feet, angle, thickness):
    """A brown branch through ``feet`` (x, y) along direction ``angle`` (radians),
    drawn in the band of rows it can reach."""
    h, w, _ = img.shape
    reach = thickness + 2 + abs(np.tan(angle)) * w
    y0, y1 = max(int(feet[1] - reach), 0), min(int(feet[1] + thickness + reach) + 1, h)
    if y0 >= y1:
        return img
    yy = np.arange(y0, y1, dtype=np.float32)[:, None]
    xx = np.arange(w, dtype=np.float32)[None, :]
    c, s = np.cos(angle), -np.sin(angle)
    dist = (yy - feet[1] - thickness * 0.5) * c - (xx - feet[0]) * s
    a = np.clip(thickness * 0.5 + 0.5 - np.abs(dist), 0, 1)
    shade = np.clip(0.8 + 0.4 * (dist / max(thickness, 1.0)), 0.5, 1.2)
    bark = np.asarray((104, 72, 44), np.float32) * shade[..., None]
    img[y0:y1] = _mix(img[y0:y1], bark, a)
    return img


def draw_background(
    scene: str,
    h: int,
    w: int,
    rng: np.random.Generator,
    grain: np.ndarray,
    feet: tuple[float, float, float, float] | None,
) -> np.ndarray:
    """Draw a scene. ``grain`` is (h, w) unit noise; ``feet`` = (x, y, angle, scale_px)
    of the bird's feet (for the perch and the horizon), or ``None``."""
    if scene == "sky":
        img = _sky(h, w, rng)
    elif scene == "foliage":
        img = _foliage(h, w, rng)
    elif scene == "water":
        img = _water(h, w, rng)
    elif scene == "ground":
        img = _ground(h, w, rng, feet[1] if feet else h * 0.75)
    elif scene == "reeds":
        img = _reeds(h, w, rng)
    elif scene == "plain":
        img = np.broadcast_to(np.asarray(PLAIN_RGB, np.float32), (h, w, 3))
    else:
        raise ValueError(f"unknown background scene {scene!r}")
    if feet is not None and scene in ("sky", "foliage", "reeds"):
        img = _perch(img, feet[:2], feet[2], max(2.0, 0.2 * feet[3]))
    return np.clip(img + grain[..., None] * 4.0, 0, 255)
