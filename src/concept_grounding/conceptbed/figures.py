"""ConceptBed's figures: the Fig. 4 contact sheet and the Fig. 5 sensitivity plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["contact_sheet", "sensitivity_plot"]


def contact_sheet(rows: Sequence[tuple[str, np.ndarray]], path: Path, per_row: int = 8) -> Path:
    """One row per ``(title, (n, H, W, 3) images)``: the first ``per_row`` images, titled (Fig. 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        max(len(rows), 1), 1, figsize=(per_row * 0.9, 1.0 * max(len(rows), 1) + 0.3), squeeze=False
    )
    for ax, (title, images) in zip(axes[:, 0], rows):
        strip = np.concatenate(list(images[:per_row]), axis=1)
        ax.imshow(strip)
        ax.set_title(title, fontsize=7, loc="left")
        ax.axis("off")
    for ax in axes[len(rows) :, 0]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def sensitivity_plot(sensitivity: dict[str, list[float]], path: Path) -> Path:
    """CCD against the noise added to real images, one line per task (Fig. 5)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for task, values in sensitivity.items():
        if task != "noise":
            ax.plot(sensitivity["noise"], values, marker="o", label=task)
    ax.set_xlabel("Gaussian noise on real images (std, grey levels)")
    ax.set_ylabel("CCD")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
