"""Vectorised signed distance functions (SDFs) in the bird's canonical frame.

Every function takes coordinate arrays ``u, v`` (any equal shape, canonical units, ``v``
pointing down) and returns the signed distance to the shape's outline in the same units:
negative inside, positive outside. Polygons and capsules are exact inside; ellipses
are a first-order approximation; just outside every shape the distance is close to
the true one, which is all antialiasing needs.

>>> import numpy as np
>>> u = np.array([0.0, 2.0]); v = np.zeros(2)
>>> np.round(ellipse(u, v, 0.0, 0.0, 1.0, 0.5), 3).tolist()
[-0.5, 1.0]
>>> np.round(convex_polygon(u, v, [(-1, -1), (1, -1), (1, 1), (-1, 1)]), 3).tolist()
[-1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["union"]


def ellipse(u: np.ndarray, v: np.ndarray, cu: float, cv: float, a: float, b: float, angle: float = 0.0) -> np.ndarray:
    """Ellipse with centre (cu, cv), semi-axes a (along ``angle`` radians) and b.

    Uses d = max((r - 1) / |grad r|, (r - 1) min(a, b)) with r = sqrt((x/a)^2 + (y/b)^2):
    the first-order distance, kept finite near the centre.
    """
    du, dv = u - cu, v - cv
    if angle:
        c, s = np.cos(angle), np.sin(angle)
        du, dv = du * c + dv * s, -du * s + dv * c
    xa, yb = du / a, dv / b
    r = np.sqrt(xa * xa + yb * yb) + 1e-9
    grad = np.sqrt((xa / a) ** 2 + (yb / b) ** 2) / r + 1e-9
    return np.maximum((r - 1.0) / grad, (r - 1.0) * min(a, b))


def convex_polygon(u: np.ndarray, v: np.ndarray, points: Sequence[tuple[float, float]]) -> np.ndarray:
    """Convex polygon (vertices in either winding order): the maximum of the distances
    to its edge lines and to its bounding box, so sharp tips do not bleed outward."""
    pts = np.asarray(points, dtype=np.float64)
    area = 0.5 * np.sum(pts[:, 0] * np.roll(pts[:, 1], -1) - np.roll(pts[:, 0], -1) * pts[:, 1])
    sign = 1.0 if area > 0 else -1.0
    d = None
    for (x0, y0), (x1, y1) in zip(pts, np.roll(pts, -1, axis=0)):
        ex, ey = x1 - x0, y1 - y0
        n = np.hypot(ex, ey)
        # outward normal of a counter-clockwise (in u-right, v-down axes: clockwise) polygon
        nx, ny = sign * ey / n, -sign * ex / n
        di = (u - x0) * nx + (v - y0) * ny
        d = di if d is None else np.maximum(d, di)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    box = np.maximum(np.maximum(lo[0] - u, u - hi[0]), np.maximum(lo[1] - v, v - hi[1]))
    return np.maximum(d, box)


def capsule(
    u: np.ndarray, v: np.ndarray, p0: tuple[float, float], p1: tuple[float, float], radius: float
) -> np.ndarray:
    """Segment p0-p1 thickened by ``radius`` (exact distance)."""
    ax, ay = p0
    bx, by = p1
    ex, ey = bx - ax, by - ay
    t = np.clip(((u - ax) * ex + (v - ay) * ey) / max(ex * ex + ey * ey, 1e-12), 0.0, 1.0)
    return np.hypot(u - ax - t * ex, v - ay - t * ey) - radius


def union(*ds: np.ndarray) -> np.ndarray:
    """Union of shapes: the minimum of their distances."""
    out = ds[0]
    for d in ds[1:]:
        out = np.minimum(out, d)
    return out
