"""The report folder of Aysel et al.'s analysis (:func:`write_aysel_report`): Tables 1-3 and 6-8,
the CGIM histograms (Fig. 2), the CoAM galleries (Figs. 3-4) and Algorithm 2's binary overlays.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

if TYPE_CHECKING:
    from .posthoc_metrics import AyselResult, CavSweep

__all__ = ["RANKING_LABELS", "write_aysel_report", "upsample_for"]


#: Tables 1-2's ranking rows: key of :func:`~concept_grounding.metrics.concept_existence` -> the paper's label.
RANKING_LABELS = {"theta": "theta_jk", "u": "u-hat_ij", "theta_u": "theta_jk x u-hat_ij"}


def _table1(result: AyselResult) -> str:
    from ..fileio import markdown_table
    from .report import score_cells

    rows = [
        {"name": f"{subset} / {RANKING_LABELS[r]}", **{f"l{l}": ex.get(f"existence@{l}{suffix}") for l in (1, 3, 5)}}
        for subset, suffix in (("entire test set", ""), ("correct class set", "_correct"))
        for r, ex in result.existence_by_ranking.items()
    ]
    return markdown_table(
        *score_cells(rows, [(f"l{l}", f"l = {l}") for l in (1, 3, 5)], first=("name", "images / CEM based on"))
    )


def _table2(result: AyselResult) -> str:
    from ..fileio import markdown_table
    from .report import score_cells

    rows = [
        {
            "name": f"{subset}, alpha = {a} / {RANKING_LABELS[r]}",
            **{f"l{l}": loc.get(f"location@{l}_alpha{a}{suffix}") for l in (1, 3, 5)},
        }
        for subset, suffix in (("entire test set", ""), ("correct class set", "_correct"))
        for a in (1, 3, 6)
        for r, loc in result.location_by_ranking.items()
    ]
    return markdown_table(
        *score_cells(rows, [(f"l{l}", f"l = {l}") for l in (1, 3, 5)], first=("name", "images, region / CLM based on"))
    )


def _table3(sweep: CavSweep) -> str:
    from ..fileio import markdown_table
    from .report import percent

    Cs = sorted({row["C"] for row in sweep.rows})
    ns = sorted({row["n"] for row in sweep.rows})
    rows = [[f"{c:g}", *(percent(sweep.accuracy(c, n)) for n in ns)] for c in Cs]
    rows.append(["model w/o bottleneck (linear on f(X))", percent(sweep.no_bottleneck_accuracy)])
    return markdown_table(["lambda (SVM C) \\ N_p = N_n", *ns], rows)


def _cgim_lists(result: AyselResult, class_names: list[str], out: Path) -> tuple[str, str]:
    """Tables 6 (per concept) and 7-8 (per class) as CSV files and Markdown."""
    import csv

    from ..fileio import markdown_table
    from .report import score_cells

    cg = result.cgim
    tables = []
    for level, names, fname in (
        ("concept", result.concept_names, "cgim_per_concept.csv"),
        ("class", class_names, "cgim_per_class.csv"),
    ):
        scores = [np.asarray(cg[f"per_{level}_type{t}"], float) for t in (1, 2, 3)]
        rows = [
            {"name": f"{i + 1}: {name}", **{f"t{t}": float(scores[t - 1][i]) for t in (1, 2, 3)}}
            for i, name in enumerate(names)
        ]
        with (out / fname).open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow([level, "cgim_type1", "cgim_type2", "cgim_type3"])
            writer.writerows([[name, *(f"{sc[i]:.6g}" for sc in scores)] for i, name in enumerate(names)])
        tables.append(
            markdown_table(
                *score_cells(
                    rows,
                    [("t1", "rho type 1"), ("t2", "rho type 2"), ("t3", "rho type 3")],
                    first=("name", level),
                    fractions=False,
                )
            )
        )
    return tables[0], tables[1]


def write_aysel_report(
    result: AyselResult,
    model: nn.Module,
    images: torch.Tensor,
    labels: np.ndarray,
    class_names: list[str],
    out: Path,
    *,
    image_concepts: np.ndarray | None = None,
    coam_threshold: float = 0.5,
    seed: int = 0,
    gallery_images: int = 6,
) -> Path:
    """The report folder of :func:`analyse_posthoc` (every table of Aysel et al. the data allows).

    Fig. 3: ``gallery_images`` test images drawn at random (``seed``), their top-5 concepts
    by theta x u-hat with check / cross marks from ``image_concepts`` ``(N, L)``. Fig. 4:
    correctly classified images, their top-4 concepts and the class-wise map
    (:func:`~concept_grounding.models.coam.class_activation_maps`). Algorithm 2's binary
    branch (:func:`~concept_grounding.models.coam.coam_overlays`) on the Fig. 4 concepts.
    """
    from ..fileio import markdown_table, write_report
    from ..models.coam import class_activation_maps, coam_overlays, save_coam_gallery
    from ..plotting import cgim_histograms
    from .report import percent, score_cells

    out.mkdir(parents=True, exist_ok=True)
    cgim_histograms(result.cgim, out / "cgim_histograms.png", title=type(model).__name__)
    short = lambda j: result.concept_names[j].removeprefix("has_")  # noqa: E731
    title = lambda i: class_names[int(labels[i])].split(".", 1)[-1]  # noqa: E731
    top = np.asarray(result.existence["top_concepts"])
    rng = np.random.default_rng(seed)
    n = len(labels)
    # Fig. 3: random test images, top-5 concepts with existence marks
    fig3 = np.sort(rng.choice(n, min(gallery_images, n), replace=False))
    k3 = min(5, top.shape[1])
    rows3 = top[fig3, :k3]
    maps3 = upsample_for(torch.as_tensor(result.maps[fig3]), images.shape[-1])
    marks3 = None if image_concepts is None else np.asarray(image_concepts)[fig3[:, None], rows3] > 0
    save_coam_gallery(
        [images[i] for i in fig3],
        torch.stack([maps3[r, rows3[r]] for r in range(len(fig3))]),
        out / "coam_gallery.png",
        concept_names=[[short(j) for j in row] for row in rows3],
        row_titles=[title(i) for i in fig3],
        marks=marks3,
    )
    # Fig. 4: correctly classified images, top-4 concepts and the class-wise map
    predicted = np.asarray(result.predictions) if result.predictions is not None else np.asarray(labels)
    correct = np.flatnonzero(predicted == np.asarray(labels))
    fig4 = np.sort(rng.choice(correct, min(gallery_images, len(correct)), replace=False)) if len(correct) else fig3
    k4 = min(4, top.shape[1])
    rows4 = top[fig4, :k4]
    grid = torch.as_tensor(result.maps[fig4])
    maps4 = upsample_for(grid, images.shape[-1])
    class_maps = class_activation_maps(grid, model.theta.cpu(), torch.as_tensor(predicted[fig4]))
    marks4 = None if image_concepts is None else np.asarray(image_concepts)[fig4[:, None], rows4] > 0
    save_coam_gallery(
        [images[i] for i in fig4],
        torch.stack([maps4[r, rows4[r]] for r in range(len(fig4))]),
        out / "coam_class_maps.png",
        concept_names=[[short(j) for j in row] for row in rows4],
        row_titles=[title(i) for i in fig4],
        marks=marks4,
        class_maps=class_maps,
        class_titles=[class_names[int(predicted[i])].split(".", 1)[-1] for i in fig4],
    )
    _binary_sheet(
        [
            coam_overlays(images[i], grid[r, rows4[r]], coloured=False, threshold=coam_threshold)
            for r, i in enumerate(fig4)
        ],
        [[short(j) for j in row] for row in rows4],
        out / "coam_binary.png",
    )
    concept_table, class_table = _cgim_lists(result, class_names, out)
    cg = result.cgim
    lines = [
        f"# Aysel et al. analysis of {type(model).__name__}",
        "",
        f"{n} test images, {len(result.concept_names)} concepts; class accuracy "
        f"{percent(result.class_accuracy)} %. Every number: [results.json](results.json).",
        "",
        "## CGIM (cosine similarity with the class-level truth; Fig. 2)",
        "",
        markdown_table(
            *score_cells(
                [
                    {"name": level, **{f"t{t}": cg.get(f"{level}_type{t}") for t in (1, 2, 3)}}
                    for level in ("concept", "class")
                ],
                [("t1", "type 1 (theta)"), ("t2", "type 2 (U*)"), ("t3", "type 3 (theta * U*)")],
                first=("name", "per"),
                fractions=False,
            )
        ),
        "",
        "![CGIM histograms](cgim_histograms.png)",
        "",
        "## Table 1: concept existence (top-l concepts truly present, %)",
        "",
        _table1(result),
        "",
        "## Table 2: concept location (part centre inside the alpha-scaled top region of the CoAM, %)",
        "",
        _table2(result),
        "",
    ]
    if result.sweep is not None:
        lines += [
            "## Table 3: class accuracy (%) of the post-hoc CBM by SVM regularisation and N_p = N_n",
            "",
            _table3(result.sweep),
            "",
        ]
    else:
        lines += ["## Table 3", "", "Not run (`--sweep` relearns the CAVs of a post-hoc CBM for each setting).", ""]
    lines += [
        "## Fig. 3: random test images, top-5 concepts by theta x u-hat (check: in the image's ground truth)",
        "",
        "![CoAM gallery](coam_gallery.png)",
        "",
        "## Fig. 4: correctly classified images, top-4 concepts and the class-wise map",
        "",
        "![CoAM class maps](coam_class_maps.png)",
        "",
        f"Algorithm 2's binary branch (the image kept where the min-max scaled CoAM >= {coam_threshold:g}):",
        "",
        "![CoAM binary](coam_binary.png)",
        "",
        "## Table 6: CGIM per concept ([csv](cgim_per_concept.csv))",
        "",
        concept_table,
        "",
        "## Tables 7-8: CGIM per class ([csv](cgim_per_class.csv))",
        "",
        class_table,
        "",
    ]
    write_report(out, result.summary(), "\n".join(lines))
    return out


def upsample_for(maps: torch.Tensor, size: int) -> torch.Tensor:
    """Feature-grid CoAMs ``(B, L, h, w)`` upsampled to ``size x size`` (bilinear)."""
    from ..models.coam import upsample_maps

    return upsample_maps(maps.float(), size)


def _binary_sheet(overlays: list[list], titles: list[list[str]], path: Path) -> Path:
    """A PNG grid of Algorithm 2's binary overlays: one row per image, one column per concept."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    rows, cols = len(overlays), max(len(r) for r in overlays)
    fig, axes = plt.subplots(rows, cols, figsize=(2.0 * cols, 2.0 * rows), squeeze=False)
    for i, row in enumerate(overlays):
        for j, picture in enumerate(row):
            axes[i, j].imshow(picture)
            axes[i, j].set_title(titles[i][j], fontsize=6)
    for ax in axes.flat:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
