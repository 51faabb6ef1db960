"""PNG figures for the concept metrics, shared by the CLI and the Gradio Space.

Each helper takes the dict a metric function returns (or its raw arrays), draws with
matplotlib's object-oriented API on an Agg canvas (no pyplot, no global backend change),
and writes a PNG to ``path`` (returning the path) or, with ``path=None``, returns the PNG
bytes. matplotlib is imported inside the functions.

* :func:`cgim_histograms` - CGIM score histograms per class and per concept, types 1-3
  (Aysel et al. Fig. 2).
* :func:`sub_bars` - per-attribute s+ / s- bars with the random-chance marks (SUB Tables 1-2).
* :func:`clm_hit_map` - one concept activation map upsampled to the image, its top region
  Omega and the part centre(s), marked hit or miss (Aysel et al. Sec. 4.4.2).
* :func:`verdict_sheet` - generated images in a grid with a judge's verdict under each,
  green when it holds and red when it fails (SUB Fig. 4: prompting vs TDG vs guide).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["cgim_histograms", "sub_bars", "clm_hit_map", "verdict_sheet", "count_axis"]


def count_axis(ax: Any, axis: str = "y") -> None:
    """Ticks at whole numbers only on a count axis (``"y"`` or ``"x"``): no "0.5 images"."""
    from matplotlib.ticker import MaxNLocator

    getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(integer=True))


def _new_figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: str | Path | None, top: float = 1.0) -> Path | bytes:
    """Lay out (subplots below ``top``, a fraction of the height, leaving room for a
    suptitle) and write the PNG to ``path``, or return its bytes when ``path`` is None."""
    fig.tight_layout(rect=(0.0, 0.0, 1.0, top))
    if path is None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def cgim_histograms(
    result: dict[str, Any], path: str | Path | None = None, *, title: str | None = None
) -> Path | bytes:
    """Histograms of CGIM scores: columns per class / per concept, one row per type.

    Args:
        result: the dict of :func:`concept_grounding.metrics.concept_global_importance`
            (``histogram_edges``, ``histogram_counts`` and the ``concept_type{t}`` means).
        path: PNG file to write; ``None`` returns the PNG bytes.
    """
    if "histogram_counts" not in result or "histogram_edges" not in result:
        raise ValueError("result must be the dict returned by concept_global_importance")
    counts, edges = np.asarray(result["histogram_counts"]), np.asarray(result["histogram_edges"])
    n_types = counts.shape[1]
    fig = _new_figure(8, 2.3 * n_types)
    centres, width = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
    for t in range(n_types):
        for col, (level, label) in enumerate(((1, "class"), (0, "concept"))):
            ax = fig.add_subplot(n_types, 2, 2 * t + col + 1)
            ax.bar(centres, counts[level, t], width=width * 0.9, color="#3b75af" if col else "#c0504d")
            mean = result.get(f"{label}_type{t + 1}", float("nan"))
            ax.set_title(f"CGIM type {t + 1} per {label} (mean {mean:.2f})", fontsize=9)
            ax.set_xlim(-1, 1)
            ax.axvline(0, color="grey", lw=0.5)
            ax.set_xlabel("cosine similarity with V", fontsize=8)
            ax.set_ylabel(f"# {label}es" if label == "class" else f"# {label}s", fontsize=8)
            count_axis(ax)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def sub_bars(
    result: dict[str, Any],
    path: str | Path | None = None,
    *,
    level: str = "attribute",
    max_bars: int = 40,
    title: str | None = None,
) -> Path | bytes:
    """Grouped s+ / s- bars per attribute (or ``level="group"`` / ``"class"``) with chance ticks.

    Args:
        result: the dict of :func:`concept_grounding.metrics.sub_accuracy`.
        level: which breakdown to draw.
        max_bars: draw at most this many entries (those with the most images).
    """
    breakdown = result.get("breakdown", {})
    if level not in breakdown:
        raise ValueError(f"level must be one of {sorted(breakdown)}, got {level!r}")
    b = breakdown[level]
    order = np.argsort(-(np.nan_to_num(b["n_s_plus"]) + np.nan_to_num(b["n_s_minus"])), kind="stable")[:max_bars]
    names = [str(n).split("::")[-1] if level == "attribute" else str(n) for n in np.asarray(b["names"])[order]]
    if level == "attribute":
        names = [
            f"{str(full).split('::')[0].removeprefix('has_')}: {short}"
            for full, short in zip(np.asarray(b["names"])[order], names)
        ]
    x = np.arange(len(order))
    fig = _new_figure(max(6, 0.35 * len(order) + 2), 4.5)
    ax = fig.add_subplot(1, 1, 1)
    for offset, key, colour in ((-0.2, "s_plus", "#3b75af"), (0.2, "s_minus", "#e08a2c")):
        ax.bar(
            x + offset,
            100 * np.nan_to_num(np.asarray(b[key])[order], nan=0.0),
            width=0.4,
            color=colour,
            label=key.replace("_plus", "+").replace("_minus", "-"),
        )
        chance = 100 * np.asarray(b[f"chance_{key}"])[order]
        ax.scatter(
            x + offset, chance, marker="_", s=120, color="black", zorder=3, label="chance" if key == "s_plus" else None
        )
    ax.set_xticks(x)
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    ax.set_ylim(0, 100)
    ax.set_ylabel("accuracy (%)")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(
        title or f"SUB s+ = {100 * result['s_plus']:.1f} %, s- = {100 * result['s_minus']:.1f} % per {level}",
        fontsize=10,
    )
    return _save(fig, path)


def clm_hit_map(
    concept_map: Any,
    part_xy: Any,
    path: str | Path | None = None,
    *,
    image: Any | None = None,
    image_size: tuple[int, int] | None = None,
    alpha: float = 1.0,
    part_visible: Sequence[bool] | None = None,
    title: str | None = None,
) -> Path | bytes:
    """One concept map upsampled to the image, its top region ``Omega`` and the part centre(s).

    Args:
        concept_map: ``(H, W)`` concept activation map.
        part_xy: ``(2,)`` or ``(P, 2)`` part centres ``(x, y)`` in image pixels (all the
            concept's parts, e.g. both eyes).
        image: optional ``(M1, M2, 3)`` image drawn underneath (uint8 or floats in [0, 1]).
        image_size: ``(M1, M2)``; default the image's size, else the map's.
        alpha: region scale; ``Omega`` holds ``floor(alpha * M1 * M2 / 12)`` pixels.
        part_visible: ``(P,)`` visibility; hidden centres are drawn hollow and never hit.
    """
    from .metrics.concept_location import centre_pixels, check_map_and_centres, region_size, top_region

    fmap, xy = check_map_and_centres(concept_map, part_xy)
    vis = np.ones(len(xy), bool) if part_visible is None else np.asarray(part_visible, bool).reshape(-1)
    if len(vis) != len(xy):
        raise ValueError(f"part_visible must have {len(xy)} entries (one per centre), got {len(vis)}")
    img = None if image is None else np.asarray(image)
    size = tuple(image_size) if image_size is not None else (img.shape[:2] if img is not None else fmap.shape)
    up, region = top_region(fmap, size, alpha)
    n = region_size(alpha, size)
    hit = bool((vis & region.ravel()[centre_pixels(xy, size)]).any())

    fig = _new_figure(4.5, 4.5 * size[0] / size[1] + 0.4)
    ax = fig.add_subplot(1, 1, 1)
    if img is not None:
        ax.imshow(img)
    ax.imshow(up, cmap="jet", alpha=0.45 if img is not None else 1.0)
    ax.contour(region.astype(float), levels=[0.5], colors="white", linewidths=1.5)
    for (x, y), v in zip(xy, vis):
        ax.scatter(
            [x],
            [y],
            s=90,
            marker="o",
            facecolors=("lime" if hit else "red") if v else "none",
            edgecolors="black",
            linewidths=1.5,
            zorder=3,
        )
    ax.set_axis_off()
    ax.set_title(title or f"alpha = {alpha:g}: {'HIT' if hit else 'miss'} (|Omega| = {n} px)", fontsize=10)
    return _save(fig, path)


def verdict_sheet(
    images: Sequence[Sequence[Any]],
    captions: Sequence[Sequence[tuple[str, bool]]],
    row_labels: Sequence[str],
    column_labels: Sequence[str],
    path: str | Path | None = None,
    *,
    title: str | None = None,
) -> Path | bytes:
    """Images in a grid with a verdict under each, drawn pixel for pixel (nearest neighbour).

    Args:
        images: ``images[r][c]``, ``R`` rows of ``C`` images (PIL images or uint8 ``(H, W, 3)``).
        captions: ``captions[r][c] = (text, holds)``, e.g. ``("S+ found, species kept", True)``;
            green when ``holds``, red otherwise.
        row_labels: ``R`` labels (e.g. the pairing, ``"Blue Jay + yellow crown color"``).
        column_labels: ``C`` labels (e.g. ``"prompting only"``, ``"TDG reference"``).
        path: PNG file to write; ``None`` returns the PNG bytes.
    """
    rows, cols = len(images), len(column_labels)
    if rows == 0 or len(row_labels) != rows or len(captions) != rows:
        raise ValueError(
            f"images, captions and row_labels need the same number (>= 1) of rows, got "
            f"{rows}, {len(captions)} and {len(row_labels)}"
        )
    if any(len(r) != cols for r in images) or any(len(r) != cols for r in captions):
        raise ValueError(f"every row of images and captions needs {cols} entries (one per column label)")
    height = 1.85 * rows + (0.5 if title else 0.2)
    fig = _new_figure(1.9 * cols + 1.6, height)
    axes = fig.subplots(rows, cols, squeeze=False)
    for r in range(rows):
        for c in range(cols):
            ax = axes[r][c]
            ax.imshow(
                np.asarray(images[r][c].convert("RGB") if hasattr(images[r][c], "convert") else images[r][c]),
                interpolation="nearest",
            )
            ax.set_xticks([])
            ax.set_yticks([])
            text, holds = captions[r][c]
            ax.set_xlabel(text, fontsize=8, color="#1a7f37" if holds else "#cf222e")
            if r == 0:
                ax.set_title(column_labels[c], fontsize=9)
        axes[r][0].set_ylabel(row_labels[r], fontsize=8)
    if title:  # pinned in inches from the top edge, whatever the number of rows
        fig.suptitle(title, fontsize=10, y=1.0 - 0.08 / height, va="top")
    return _save(fig, path, top=1.0 - 0.4 / height if title else 1.0)
