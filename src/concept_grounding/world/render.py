"""The renderer: base traits + pose + noise seed -> image, masks, part centres.

The bird is modelled in a **canonical frame** (units of about half a body length, ``u``
towards the beak, ``v`` down, body centre at the origin) as layers of signed distance
shapes (:mod:`.shapes`), stacked back to front as

far leg, tail, near leg, body (back / breast / belly), head (nape / crown /
forehead / throat), near wing, beak, near eye

and composited front to back (each layer under the ones already drawn).

Every pixel is mapped to the canonical frame once by the inverse of the pose transform
``x = center + R(angle) @ (m * u * s, v * s)`` (``m = -1`` facing left, ``s`` pixels per
unit), so the part centres are transformed by exactly the same map as the pixels. Each
layer is opaque inside its outline and fades out over one pixel outside it, next to
its visible pixels only (antialiasing); the part map holds the top layer that
contains each pixel. A colour only ever reaches
the pixels of its own regions (and their 1-pixel antialiased rim), and the background,
the noise and the lighting do not depend on the traits: this is what makes the
counterfactuals of :mod:`.counterfactual` exact.

A bird facing right shows its **right** side: its left eye and left wing are hidden
behind the head and body (not drawn, never visible), its left leg shows behind the right.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from . import shapes
from .backgrounds import draw_background
from .canvas import Canvas
from .config import Pose
from .species import ACCENT, COLORS

__all__ = ["Rendering"]

#: CUB part order (``vocab.parts``); the part map stores index + 1.
PART_NAMES: tuple[str, ...] = (
    "back",
    "beak",
    "belly",
    "breast",
    "crown",
    "forehead",
    "left eye",
    "left leg",
    "left wing",
    "nape",
    "right eye",
    "right leg",
    "right wing",
    "tail",
    "throat",
)
_P = {name: i + 1 for i, name in enumerate(PART_NAMES)}

# ---------------------------------------------------------------- canonical geometry
_BODY = (0.0, 0.05, 1.05, 0.58, -0.2)  # centre u, v, semi-axes a, b, angle (rad)
_HEAD = (0.92, -0.62, 0.44)  # centre u, v, radius
_EYE = (_HEAD[0] + 0.3 * _HEAD[2], _HEAD[1] - 0.12 * _HEAD[2], 0.115)
_WING = (-0.28, 0.0, 0.8, 0.3, -0.22)
_WING_TIP = ((-0.55, -0.12), (-0.62, 0.2), (-1.42, 0.34))
_TAIL = ((-0.72, -0.12), (-0.78, 0.26), (-1.82, 0.62), (-1.9, 0.3))
_LEG_NEAR = ((0.18, 0.45), (0.22, 1.08))
_LEG_FAR = ((-0.16, 0.45), (-0.12, 1.06))
_LEG_R, _TOE_R = 0.05, 0.032

#: bill shape -> list of convex polygons / capsules (canonical units); all start inside
#: the head at u = 1.2 and point forwards (+u).
_BILLS: dict[str, list] = {
    "cone": [("poly", ((1.2, -0.8), (1.2, -0.4), (1.76, -0.6)))],
    "all-purpose": [("poly", ((1.2, -0.72), (1.2, -0.5), (1.92, -0.6)))],
    "dagger": [("poly", ((1.2, -0.71), (1.2, -0.51), (2.3, -0.6)))],
    "needle": [("poly", ((1.2, -0.66), (1.2, -0.56), (2.55, -0.6)))],
    "hooked": [
        ("poly", ((1.2, -0.8), (1.2, -0.48), (1.82, -0.66))),
        ("poly", ((1.64, -0.74), (1.9, -0.66), (1.82, -0.46))),
    ],
    "curved_(up_or_down)": [
        ("cap", (1.25, -0.62), (1.65, -0.58), 0.06),
        ("cap", (1.65, -0.58), (1.98, -0.46), 0.045),
        ("cap", (1.98, -0.46), (2.18, -0.26), 0.03),
    ],
    "spatulate": [
        ("poly", ((1.2, -0.7), (1.2, -0.48), (1.84, -0.5), (1.84, -0.68))),
        ("cap", (1.84, -0.59), (1.84, -0.59), 0.1),
    ],
    "hooked_seabird": [
        ("poly", ((1.2, -0.72), (1.2, -0.5), (2.12, -0.55), (2.12, -0.66))),
        ("poly", ((2.0, -0.7), (2.26, -0.62), (2.12, -0.42))),
    ],
}
#: bill shape -> canonical beak centre (midpoint of the visible bill).
_BILL_CENTRES = {
    "cone": (1.52, -0.6),
    "all-purpose": (1.6, -0.6),
    "dagger": (1.78, -0.6),
    "needle": (1.9, -0.6),
    "hooked": (1.58, -0.63),
    "curved_(up_or_down)": (1.72, -0.56),
    "spatulate": (1.62, -0.59),
    "hooked_seabird": (1.74, -0.6),
}

#: canonical part centres for a bird facing right (near = right side).
_CENTRES: dict[str, tuple[float, float]] = {
    "back": (0.05, -0.44),
    "belly": (-0.42, 0.42),
    "breast": (0.62, 0.2),
    "crown": (0.84, -0.95),
    "forehead": (1.22, -0.84),
    "right eye": _EYE[:2],
    "left eye": _EYE[:2],
    "right leg": (0.21, 0.88),
    "left leg": (-0.13, 0.88),
    "right wing": (-0.3, 0.04),
    "left wing": (-0.3, -0.2),
    "nape": (0.55, -0.7),
    "tail": (-1.38, 0.3),
    "throat": (1.1, -0.34),
}

#: canonical bounding boxes (u0, v0, u1, v1) of each layer, for windowed drawing.
_BOXES = {
    "far_leg": (-0.45, 0.35, 0.3, 1.2),
    "tail": (-1.95, -0.2, -0.65, 0.7),
    "near_leg": (-0.1, 0.35, 0.6, 1.2),
    "body": (-1.1, -0.65, 1.1, 0.75),
    "head": (0.45, -1.1, 1.4, -0.14),
    "near_wing": (-1.45, -0.4, 0.55, 0.45),
    "beak": (1.15, -0.85, 2.4, -0.2),
    "eye": (_EYE[0] - 0.15, _EYE[1] - 0.15, _EYE[0] + 0.15, _EYE[1] + 0.15),
}


@dataclass(frozen=True)
class Rendering:
    """Raw output of :func:`render_bird` (see ``BirdSample`` for the meanings)."""

    image: np.ndarray
    mask: np.ndarray
    part_map: np.ndarray
    part_xy: np.ndarray
    part_visible: np.ndarray


def _rgb(name: str) -> np.ndarray:
    return np.asarray(COLORS[name], np.float32)


def _ink(name: str) -> np.ndarray:
    """Pattern ink of a region colour: a dark shade, or a light tint on dark colours."""
    c = _rgb(name)
    lum = 0.3 * c[0] + 0.59 * c[1] + 0.11 * c[2]
    return c * 0.42 if lum > 80 else c * 0.4 + 0.6 * 175.0


def _light(v: np.ndarray) -> np.ndarray:
    """Soft top light on the bird (canonical v), multiplies colours."""
    return np.clip(1.1 - 0.14 * (v + 0.6), 0.82, 1.12)[..., None]


def _pattern_mask(pattern: str, t_along: np.ndarray, t_across: np.ndarray, freq: float) -> np.ndarray:
    """Spots or stripes in a region's own coordinates (bool)."""
    if pattern == "spotted":
        q = t_across * freq
        row = np.floor(q)
        du = np.mod(t_along * freq + 0.5 * row, 1.0) - 0.5
        dv = np.mod(q, 1.0) - 0.5
        return du * du + dv * dv < 0.07
    if pattern == "striped":
        return np.abs(np.mod(t_across * freq, 1.0) - 0.5) < 0.17
    return np.zeros(t_along.shape, bool)


def _region_colour(base: str, pattern: str, ink_mask: np.ndarray, accent_mask: np.ndarray, light) -> np.ndarray:
    """Colour of a patterned region: base, with ink (spots/stripes) and accent (multi)."""
    col = np.broadcast_to(_rgb(base), ink_mask.shape + (3,)).copy()
    if pattern in ("spotted", "striped"):
        col[ink_mask] = _ink(base)
    elif pattern == "multi-colored":
        col[accent_mask] = _rgb(ACCENT[base])
        col[ink_mask] = _ink(base)
    return col * light


def _draw_leg(cv: Canvas, leg, part: int, colour: str, box: str) -> None:
    win = cv.window(_BOXES[box])
    if win is None:
        return
    _, u, v = win
    (a, b) = leg
    foot = b
    d = shapes.union(
        shapes.capsule(u, v, a, b, _LEG_R),
        shapes.capsule(u, v, foot, (foot[0] + 0.22, foot[1] + 0.02), _TOE_R),
        shapes.capsule(u, v, foot, (foot[0] - 0.16, foot[1] + 0.04), _TOE_R),
    )
    col = np.broadcast_to(_rgb(colour), u.shape + (3,)) * _light(v) * 0.95
    cv.paint(win, d, col, part)


def _draw_tail(cv: Canvas, t: Mapping[str, str]) -> None:
    win = cv.window(_BOXES["tail"])
    if win is None:
        return
    _, u, v = win
    d = shapes.convex_polygon(u, v, _TAIL)
    # along the tail axis (towards the tip) and across it
    ax, ay = -0.94, 0.34
    along = (u + 0.75) * ax + (v - 0.07) * ay
    across = -(u + 0.75) * ay + (v - 0.07) * ax
    pat = t["tail_pattern"]
    if pat == "striped":
        ink = _pattern_mask("striped", across, along, 6.0)
    elif pat == "spotted":
        ink = _pattern_mask("spotted", across, along, 7.0)
    else:
        ink = (along > 0.62) & (along < 0.74)
    accent = along > 0.98
    col = _region_colour(t["upper_tail_color"], pat, ink, accent, _light(v))
    cv.paint(win, d, col, _P["tail"])


def _draw_wing(cv: Canvas, t: Mapping[str, str], part: int) -> None:
    geo, tip = _WING, _WING_TIP
    win = cv.window(_BOXES["near_wing"])
    if win is None:
        return
    _, u, v = win
    cu, cvv, a, b, ang = geo
    d = shapes.union(shapes.ellipse(u, v, cu, cvv, a, b, ang), shapes.convex_polygon(u, v, tip))
    c, s = np.cos(ang), np.sin(ang)
    along = (u - cu) * c + (v - cvv) * s  # towards the shoulder (+), tip (-)
    across = -(u - cu) * s + (v - cvv) * c
    pat = t["wing_pattern"]
    if pat == "striped":
        ink = _pattern_mask("striped", along, across, 9.0)
    elif pat == "spotted":
        ink = _pattern_mask("spotted", along, across, 8.0)
    else:  # multi-colored: dark flight feathers
        ink = along < -0.45
    accent = ((along > 0.12) & (along < 0.24)) | ((along > -0.16) & (along < -0.05))
    light = _light(v)
    col = _region_colour(t["wing_color"], pat, ink & (along > -1.0), accent & (along > -0.45), light)
    cv.paint(win, d, col, part)


def _draw_body(cv: Canvas, t: Mapping[str, str]) -> None:
    win = cv.window(_BOXES["body"])
    if win is None:
        return
    _, u, v = win
    d = shapes.ellipse(u, v, *_BODY)
    upper = v < -0.02 - 0.26 * u
    breast = ~upper & (u > -0.05)
    belly = ~upper & ~breast
    part = np.where(upper, _P["back"], np.where(breast, _P["breast"], _P["belly"])).astype(np.uint8)
    col = np.empty(u.shape + (3,), np.float32)
    col[upper] = _rgb(t["back_color"])
    col[belly] = _rgb(t["belly_color"])
    pat = t["breast_pattern"]
    if pat == "striped":  # short vertical streaks
        ink = (np.abs(np.mod(u * 6.0, 1.0) - 0.5) < 0.13) & (np.mod(v * 2.2 + 0.5 * np.floor(u * 6.0), 1.0) < 0.75)
    else:
        ink = _pattern_mask(pat, u, v, 6.5)
    accent = (v + 0.35 * u > 0.08) & (v + 0.35 * u < 0.3)
    col[breast] = _region_colour(t["breast_color"], pat, ink, accent, 1.0)[breast]
    cv.paint(win, d, col * _light(v), part)


def _draw_head(cv: Canvas, t: Mapping[str, str]) -> None:
    win = cv.window(_BOXES["head"])
    if win is None:
        return
    _, u, v = win
    hu, hv, r = _HEAD
    d = shapes.ellipse(u, v, hu, hv, r, r)
    pu, pv = (u - hu) / r, (v - hv) / r
    nape = pu < -0.3
    lower = pv > 0.12
    throat = lower & ~nape
    forehead = ~lower & (pu > 0.55)
    part = np.full(u.shape, _P["crown"], np.uint8)
    part[forehead], part[throat], part[nape] = _P["forehead"], _P["throat"], _P["nape"]
    table = np.zeros((16, 3), np.float32)
    for name, group in (
        ("crown", "crown_color"),
        ("forehead", "forehead_color"),
        ("throat", "throat_color"),
        ("nape", "nape_color"),
    ):
        table[_P[name]] = _rgb(t[group])
    cv.paint(win, d, table[part] * _light(v), part)


def _bill_sdf(u: np.ndarray, v: np.ndarray, shape: str) -> np.ndarray:
    ds = []
    for piece in _BILLS[shape]:
        if piece[0] == "poly":
            ds.append(shapes.convex_polygon(u, v, piece[1]))
        else:
            ds.append(shapes.capsule(u, v, piece[1], piece[2], piece[3]))
    return shapes.union(*ds)


def _draw_beak(cv: Canvas, t: Mapping[str, str]) -> None:
    win = cv.window(_BOXES["beak"])
    if win is None:
        return
    _, u, v = win
    d = _bill_sdf(u, v, t["bill_shape"])
    # darker line between the mandibles
    col = np.broadcast_to(_rgb(t["bill_color"]), u.shape + (3,)).copy()
    gape = np.abs(v + 0.6 - 0.1 * np.maximum(u - 1.6, 0)) < 0.012
    col[gape] *= 0.6
    cv.paint(win, d, col * _light(v), _P["beak"])


def _draw_eye(cv: Canvas, t: Mapping[str, str], part: int) -> None:
    win = cv.window(_BOXES["eye"])
    if win is None:
        return
    _, u, v = win
    eu, ev, er = _EYE
    d = shapes.ellipse(u, v, eu, ev, er, er)
    rr = np.hypot(u - eu, v - ev)
    col = np.broadcast_to(_rgb(t["eye_color"]), u.shape + (3,)).copy()
    col[rr < er * 0.45] = (12, 12, 14)
    col[np.hypot(u - eu - 0.03, v - ev + 0.03) < er * 0.22] = (250, 250, 250)
    cv.paint(win, d, col, part)


def render_bird(traits: Mapping[str, str], pose: Pose, image_size: int, noise_seed: int) -> Rendering:
    """Draw one bird. Deterministic in (traits, pose, image_size, noise_seed)."""
    size = int(image_size)
    rng = np.random.default_rng(noise_seed)
    grain = rng.standard_normal((size, size), dtype=np.float32)
    right = pose.facing == "right"
    near, far = ("right", "left") if right else ("left", "right")

    # 1. background (with a perch or horizon under the feet)
    cv = Canvas(pose, size, grain)
    fx, fy = cv.to_pixels(np.array([0.05]), np.array([1.1]))
    feet = (float(fx[0]), float(fy[0]), np.deg2rad(pose.angle), cv.s)
    background = draw_background(pose.background_name, size, size, rng, grain, feet)

    # 2. the bird, front to back (each layer goes under the ones before it)
    draw_bird(cv, traits)

    # 3. lighting
    image = light(cv.finish(background), pose)

    # 4. part centres and visibility
    xy, visible = part_centres(cv, traits, near, far)
    return Rendering(image=image, mask=cv.pmap > 0, part_map=cv.pmap, part_xy=xy, part_visible=visible)


def draw_bird(cv: Canvas, traits: Mapping[str, str]) -> None:
    """Paint every layer of the bird with ``traits`` on ``cv``, front to back."""
    near, far = ("right", "left") if cv.pose.facing == "right" else ("left", "right")
    _draw_eye(cv, traits, _P[f"{near} eye"])
    _draw_beak(cv, traits)
    _draw_wing(cv, traits, part=_P[f"{near} wing"])
    _draw_head(cv, traits)
    _draw_body(cv, traits)
    _draw_leg(cv, _LEG_NEAR, _P[f"{near} leg"], traits["leg_color"], "near_leg")
    _draw_tail(cv, traits)
    _draw_leg(cv, _LEG_FAR, _P[f"{far} leg"], traits["leg_color"], "far_leg")


def light(composite: np.ndarray, pose: Pose) -> np.ndarray:
    """(H, W, 3) float composite -> uint8 image under the pose's brightness and colour cast."""
    gain = pose.brightness * np.asarray(pose.cast, np.float32)
    return np.clip(composite * gain + 0.5, 0, 255).astype(np.uint8)


def part_centres(cv: Canvas, traits: Mapping[str, str], near: str, far: str):
    """(15, 2) float32 centres and (15,) visibility: a part is visible when its
    own (3x3-dilated) mask contains its centre pixel."""
    canon = dict(_CENTRES)
    canon["beak"] = _BILL_CENTRES[traits["bill_shape"]]
    # canonical centres are given for a right-facing bird (near = right)
    if near == "left":
        for part in ("eye", "leg", "wing"):
            canon[f"left {part}"], canon[f"right {part}"] = _CENTRES[f"right {part}"], _CENTRES[f"left {part}"]
    uv = np.asarray([canon[p] for p in PART_NAMES], np.float64)
    x, y = cv.to_pixels(uv[:, 0], uv[:, 1])
    xy = np.stack([x, y], axis=1).astype(np.float32)
    visible = np.zeros(len(PART_NAMES), bool)
    size = cv.size
    for i in range(len(PART_NAMES)):
        xi, yi = round(float(x[i])), round(float(y[i]))
        if 0 <= xi < size and 0 <= yi < size:
            patch = cv.pmap[max(yi - 1, 0) : yi + 2, max(xi - 1, 0) : xi + 2]
            visible[i] = bool((patch == i + 1).any())
    return xy, visible
