"""One image being drawn: the pose's pixel <-> canonical map, front-to-back compositing, the part map.

:class:`Canvas` is what :mod:`.render` paints a bird's layers on (and :mod:`.composition` several
birds, each on its own canvas over one background).
"""

from __future__ import annotations

import numpy as np

from .config import Pose

__all__ = ["Canvas", "pixels_per_unit"]


def pixels_per_unit(pose: Pose, image_size: int) -> float:
    """Pixels per canonical unit: the nominal bird (tail tip to needle tip, about 4.4
    units) spans about 90 % of the image at ``scale = 1``."""
    return pose.scale * image_size / 4.7  # (config.pose_for's canonical centring uses the same)


class Canvas:
    """One image being drawn: pixel->canonical coordinates, colour, part map."""

    def __init__(self, pose: Pose, size: int, grain: np.ndarray):
        self.size, self.pose, self.grain = size, pose, grain
        self.s = pixels_per_unit(pose, size)
        self.m = 1.0 if pose.facing == "right" else -1.0
        th = np.deg2rad(pose.angle)
        self.cos, self.sin = float(np.cos(th)), float(np.sin(th))
        self.accum = np.zeros((size, size, 3), np.float32)
        self.trans = np.ones((size, size, 1), np.float32)
        self.pmap = np.zeros((size, size), np.uint8)

    def to_pixels(self, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Canonical -> pixel coordinates (x right, y down; pixel centres at integers)."""
        px, py = self.m * u * self.s, v * self.s
        x = self.pose.center[0] + px * self.cos + py * self.sin
        y = self.pose.center[1] - px * self.sin + py * self.cos
        return x, y

    def window(self, box: tuple[float, float, float, float]):
        """Pixel window covering a canonical box, and its canonical coordinates."""
        u0, v0, u1, v1 = box
        xs, ys = self.to_pixels(np.array([u0, u1, u0, u1]), np.array([v0, v0, v1, v1]))
        x0, x1 = max(int(np.floor(xs.min())) - 2, 0), min(int(np.ceil(xs.max())) + 3, self.size)
        y0, y1 = max(int(np.floor(ys.min())) - 2, 0), min(int(np.ceil(ys.max())) + 3, self.size)
        if x0 >= x1 or y0 >= y1:
            return None
        dx = np.arange(x0, x1, dtype=np.float32)[None, :] - np.float32(self.pose.center[0])
        dy = np.arange(y0, y1, dtype=np.float32)[:, None] - np.float32(self.pose.center[1])
        u = self.m * (dx * self.cos - dy * self.sin) / self.s
        v = (dx * self.sin + dy * self.cos) / self.s
        return (slice(y0, y1), slice(x0, x1)), u, v

    def paint(self, win, dist: np.ndarray, colour: np.ndarray, part: np.ndarray | int) -> None:
        """Composite a layer *under* everything drawn so far (front-to-back order).

        ``dist`` is the canonical SDF, ``colour`` (h, w, 3), ``part`` the part id(s). The
        layer is opaque inside its outline; outside, a 1-px antialiasing ramp is kept
        only next to pixels where the same part is actually visible, so a colour never
        tints a pixel more than one pixel away from its own visible part.
        """
        sl = win[0]
        dpx = dist * self.s
        covered = dpx <= 0.0
        pm = self.pmap[sl]
        visible = covered & (pm == 0)
        ramp = np.clip(1.0 - dpx, 0.0, 1.0)
        if isinstance(part, np.ndarray):
            gate = np.zeros(dpx.shape, np.float32)
            for pid in np.unique(part[visible]):
                same = part == pid
                gate += same * _grow(visible & same)
        else:
            gate = _grow(visible)
        alpha = np.where(covered, np.float32(1.0), ramp * gate)[..., None]
        # darker rim inside the outline, and feather grain
        rim = 1.0 - 0.28 * np.clip(1.0 + dpx / 2.2, 0.0, 1.0)
        colour = colour * rim[..., None] + self.grain[sl][..., None] * 5.0
        trans = self.trans[sl]
        self.accum[sl] += trans * alpha * colour
        trans *= 1.0 - alpha
        pm[visible] = part[visible] if isinstance(part, np.ndarray) else part

    def finish(self, background: np.ndarray) -> np.ndarray:
        """The composite over ``background`` (H, W, 3) float."""
        return self.accum + self.trans * background


def _grow(mask: np.ndarray) -> np.ndarray:
    """3x3 binary dilation of a bool array (as float32)."""
    g = mask.copy()
    g[1:] |= mask[:-1]
    g[:-1] |= mask[1:]
    h = g.copy()
    h[:, 1:] |= g[:, :-1]
    h[:, :-1] |= g[:, 1:]
    return h.astype(np.float32)
