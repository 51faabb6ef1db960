"""Overlays and report figures for CCI (matplotlib, Agg backend)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

__all__ = ["overlay"]


def overlay(image: np.ndarray, heat: np.ndarray, alpha: float = 0.5, cmap: str = "jet") -> np.ndarray:
    """Blend a heatmap onto an image: ``(H, W, 3) uint8`` + ``(H, W)`` float -> ``(H, W, 3) uint8``.

    The map is min-max scaled per image (a constant map shows as the colormap's minimum).

    >>> overlay(np.zeros((2, 2, 3), np.uint8), np.array([[0.0, 1.0], [0.5, 0.5]])).shape
    (2, 2, 3)
    """
    import matplotlib

    if image.shape[:2] != heat.shape:
        raise ValueError(f"heat: shape {heat.shape} differs from image {image.shape[:2]}")
    h = heat.astype(np.float64)
    span = h.max() - h.min()
    h = (h - h.min()) / span if span > 0 else np.zeros_like(h)
    colour = matplotlib.colormaps[cmap](h)[..., :3] * 255
    return np.clip((1 - alpha) * image + alpha * colour, 0, 255).astype(np.uint8)


def save_panel_grid(rows: Sequence[Sequence[tuple[str, np.ndarray]]], path: Path, title: str = "") -> None:
    """Save a grid of titled image panels (each row a list of ``(title, (H, W[, 3]) array)``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_rows, n_cols = len(rows), max(len(r) for r in rows)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(2.2 * n_cols, 2.3 * n_rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for i, row in enumerate(rows):
        for j, (name, img) in enumerate(row):
            axes[i, j].imshow(img, cmap="tab10" if img.ndim == 2 else None, interpolation="nearest")
            axes[i, j].set_title(name, fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def save_bar_chart(values: Mapping[str, Mapping[str, float]], path: Path, title: str, ylabel: str) -> None:
    """Grouped bars: ``values[series][category]`` (categories on the x axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = list(values)
    cats = list(dict.fromkeys(c for s in series for c in values[s]))
    x = np.arange(len(cats))
    width = 0.8 / max(len(series), 1)
    fig, ax = plt.subplots(figsize=(max(5, 0.6 * len(cats) + 2), 3.2))
    for i, s in enumerate(series):
        ax.bar(x + i * width, [values[s].get(c, 0.0) for c in cats], width, label=s)
    ax.set_xticks(x + width * (len(series) - 1) / 2, cats, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.set_ylim(0, 1)
    if len(series) > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
