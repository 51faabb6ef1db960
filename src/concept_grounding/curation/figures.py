"""SUB Figs. 6 and 9 from the curation's tables (PNG; matplotlib imported inside).

* :func:`agreement_figure` -- Fig. 6: per attribute, CUB's image-level vs class-level
  agreement beside SUB's human score.
* :func:`faithfulness_figure` -- Fig. 9: histogram over reference birds of the share of
  study-1 Q2 answers "no" (the image still represents the reference bird).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..plotting import count_axis
from ..vocabulary import attribute_phrase

__all__ = ["agreement_figure", "faithfulness_figure"]


def _new_figure(width: float, height: float):
    """A matplotlib Figure on an Agg canvas (no pyplot, no global backend change)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: str | Path | None) -> Path | bytes:
    """Write the PNG to ``path`` (returned), or return its bytes when ``path`` is None."""
    import io

    fig.tight_layout()
    if path is None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return Path(path)


def agreement_figure(
    attributes: Sequence[str],
    human_scores: Sequence[float],
    cub_agreement: Sequence[float],
    path: str | Path | None = None,
) -> Path | bytes:
    """Fig. 6: two bars per attribute, in [0, 1]."""
    n = len(attributes)
    fig = _new_figure(max(6.0, 0.35 * n + 2), 4.0)
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(n)
    ax.bar(x - 0.2, np.asarray(cub_agreement, float), 0.4, label="CUB: image-level = class-level")
    ax.bar(x + 0.2, np.asarray(human_scores, float), 0.4, label="SUB: human score")
    ax.set_xticks(x, [attribute_phrase(a) for a in attributes], rotation=60, ha="right", fontsize=7)
    ax.set_ylim(0, 1.25)
    ax.set_ylabel("share / score")
    ax.legend(fontsize=7, loc="upper center", ncol=2)
    ax.set_title("Label agreement (CUB) vs human score (SUB), per attribute", fontsize=9)
    return _save(fig, path)


def faithfulness_figure(shares: Sequence[float], path: str | Path | None = None) -> Path | bytes:
    """Fig. 9: histogram of the per-reference-bird share of Q2 answers "no"."""
    fig = _new_figure(5.0, 3.2)
    ax = fig.add_subplot(1, 1, 1)
    ax.hist(np.asarray(shares, float), bins=np.linspace(0, 1, 11), edgecolor="black")
    ax.set_xlabel('share of "no" to "does the bird deviate from the reference?"')
    ax.set_ylabel("reference birds")
    count_axis(ax)
    ax.set_title("Faithfulness to the reference bird", fontsize=9)
    return _save(fig, path)
