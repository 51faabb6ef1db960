"""The CCI paper's faithfulness tables, one table across many CLIPs: ``concept-grounding cci-bench``.

Table 1 (:func:`classification_table`): zero-shot classification on an image folder, Del@1/@5 and
Ins@1/@5 of the top-1 / top-5 accuracy as pixels are deleted or inserted in each map's order. Table 2
(:func:`retrieval_table`): image-text retrieval on a COCO Karpathy split, Del/Ins TR@k and IR@k.
Rows are models (:func:`~.table_models.load_table_models`, :data:`~.table_models.PRESETS`) x methods
(:data:`METHODS`: CCI and every baseline); a tower CCI cannot mask is a refused row, with the reason.
Batches are averaged weighted by their size; Table 2 embeds the whole split at each fraction. Manual:
docs/guide/cci.md; the curves: docs/cci.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..fileio import markdown_table, write_report
from .explainers import EXPLAINERS, TITLES
from .layouts import CaptionedImages, ImageFolder

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from ..models.clip import ClipHandle

__all__ = [
    "METHODS",
    "TableRow",
    "classification_table",
    "retrieval_table",
    "write_cci_tables",
]

#: explanation methods in table order: CCI, then :data:`~.baselines.BASELINES` (:data:`~.explainers.EXPLAINERS`).
METHODS = EXPLAINERS

CLASSIFICATION_COLUMNS = ("Del@1", "Del@5", "Ins@1", "Ins@5")
RETRIEVAL_COLUMNS = ("Del-IR@5", "Del-TR@5", "Ins-IR@5", "Ins-TR@5", "Del-IR@1", "Del-TR@1", "Ins-IR@1", "Ins-TR@1")


@dataclass
class TableRow:
    """One (model, method) row: ``scores`` column -> AUC in [0, 1]; ``refused`` the reason a
    model or method could not run (then ``scores`` is empty); ``accuracy`` the clean top-1
    zero-shot accuracy (Table 1) or TR@1 (Table 2) of the model."""

    model: str
    method: str
    scores: dict[str, float] = field(default_factory=dict)
    refused: str = ""
    accuracy: float = float("nan")
    seconds: float = 0.0


# --------------------------------------------------------------------------- methods
def table_explainers(
    handle: ClipHandle, methods: Sequence[str], clusters: int, seed: int, batch_size: int
) -> tuple[dict[str, Any], str]:
    """The :mod:`~.explainers` of ``methods`` for ``handle``, or ``({}, reason)`` when its tower
    cannot be explained (the model's rows are then refused with that reason)."""
    from .explainers import build_explainer

    try:
        return {
            m: build_explainer(m, handle.model, clusters=clusters, seed=seed, batch_size=batch_size) for m in methods
        }, ""
    except ValueError as err:
        return {}, str(err)


# --------------------------------------------------------------------------- Table 1
def classification_table(
    models: Sequence[tuple[str, ClipHandle]],
    data: ImageFolder,
    *,
    methods: Sequence[str] = METHODS,
    steps: int = 10,
    clusters: int = 7,
    seed: int = 0,
    batch_size: int = 32,
    replacement: Any = None,
    progress: bool = True,
) -> list[TableRow]:
    """CCI Table 1 on ``data`` for every model x method (module docstring).

    Per chunk of ``batch_size`` images: the class prompts' text embeddings are encoded once
    per model; the clean and fully replaced images are scored once and shared by every
    method (:func:`~.faithfulness.curve_endpoints`); each method's interior perturbations of
    all fractions are stacked and scored ``batch_size`` images per forward, by
    :func:`~.fast.image_embeds` (the model's embedding with a CLS-only last block).
    ``batch_size=1`` is the per-image loop: one image, one forward per perturbed image.
    """
    import time

    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    from ..models.clip import class_caption
    from .backends import get_backend
    from .classifier import is_classifier
    from .faithfulness import classification_curves, curve_endpoints
    from .fast import image_embeds

    _check_methods(methods)
    rows: list[TableRow] = []
    n = len(data.paths)
    prompts = [class_caption(name) for name in data.class_names]
    for name, handle in models:
        if is_classifier(handle):
            rows += classifier_table_rows(
                name,
                handle,
                data,
                methods=methods,
                steps=steps,
                seed=seed,
                batch_size=batch_size,
                replacement=replacement,
                progress=progress,
            )
            continue
        explainers, reason = table_explainers(handle, methods, clusters, seed, batch_size)
        if reason:
            rows += [TableRow(name, m, refused=reason) for m in methods]
            continue
        texts = handle.encode_text(prompts)  # (C, E) raw
        classes = F.normalize(texts.float(), dim=-1)
        be = get_backend(handle.model)
        ops = be.blocks()

        def score_fn(x: torch.Tensor) -> torch.Tensor:
            # called only inside this model's iteration (curve_endpoints, classification_curves)
            return F.normalize(image_embeds(be, x, ops).float(), dim=-1) @ classes.to(x.device).T  # noqa: B023

        sums = {m: dict.fromkeys(CLASSIFICATION_COLUMNS, 0.0) for m in methods}
        times = dict.fromkeys(methods, 0.0)
        correct = 0
        for start in tqdm(range(0, n, batch_size), desc=f"Table 1 {name}", disable=not progress, leave=False):
            idx = list(range(start, min(start + batch_size, n)))
            px = handle.pixels(data.images(idx))
            labels = torch.as_tensor(data.labels[idx], dtype=torch.long)
            ends = curve_endpoints(score_fn, px, replacement)
            correct += int((ends.clean_scores.argmax(1).cpu() == labels).sum())
            for m, explainer in explainers.items():
                t0 = time.perf_counter()
                maps = explainer(px, texts[labels].to(px.device)).maps
                aucs = classification_curves(
                    score_fn, px, maps.to(px.device), labels, steps=steps, endpoints=ends, forward_batch=batch_size
                ).aucs
                times[m] += time.perf_counter() - t0
                for c in CLASSIFICATION_COLUMNS:
                    sums[m][c] += aucs[c] * len(idx)
        rows += [
            TableRow(name, m, {c: v / n for c, v in sums[m].items()}, accuracy=correct / n, seconds=times[m])
            for m in methods
        ]
    return rows


# --------------------------------------------------------------------------- Table 2
def retrieval_table(
    models: Sequence[tuple[str, ClipHandle]],
    data: CaptionedImages,
    *,
    methods: Sequence[str] = METHODS,
    steps: int = 10,
    clusters: int = 7,
    seed: int = 0,
    batch_size: int = 32,
    replacement: Any = None,
    progress: bool = True,
) -> list[TableRow]:
    """CCI Table 2 on ``data`` for every model x method (module docstring)."""
    import time

    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    from .backends import get_backend
    from .classifier import is_classifier
    from .faithfulness import retrieval_curves

    _check_methods(methods)
    rows: list[TableRow] = []
    n = len(data.paths)
    for name, handle in tqdm(models, desc="Table 2", disable=not progress, leave=False):
        if is_classifier(handle):
            rows += [
                TableRow(name, m, refused="a classifier has no text tower: image-text retrieval needs a CLIP")
                for m in methods
            ]
            continue
        explainers, reason = table_explainers(handle, methods, clusters, seed, batch_size)
        if reason:
            rows += [TableRow(name, m, refused=reason) for m in methods]
            continue
        be = get_backend(handle.model)
        texts = handle.encode_text(data.captions)
        px = torch.cat([handle.pixels(data.images(range(s, min(s + batch_size, n)))) for s in range(0, n, batch_size)])

        def embed(x: torch.Tensor) -> torch.Tensor:
            # called only inside this model's iteration (the clean scores and retrieval_curves)
            return torch.cat([be.encode_image(x[s : s + batch_size]) for s in range(0, len(x), batch_size)])  # noqa: B023

        with torch.no_grad():
            sim = F.normalize(embed(px).float(), dim=-1) @ F.normalize(texts.float(), dim=-1).to(px.device).T
        clean = float((sim.argmax(1).cpu() == torch.arange(n)).float().mean())
        for m, explainer in explainers.items():
            t0 = time.perf_counter()
            maps = torch.cat(
                [
                    explainer(px[s : s + batch_size], texts[s : s + batch_size].to(px.device)).maps
                    for s in range(0, n, batch_size)
                ]
            )
            aucs = retrieval_curves(embed, texts, px, maps.to(px.device), steps=steps, replacement=replacement).aucs
            rows.append(
                TableRow(
                    name, m, {c: aucs[c] for c in RETRIEVAL_COLUMNS}, accuracy=clean, seconds=time.perf_counter() - t0
                )
            )
    return rows


def classifier_table_rows(
    name: str,
    classifier: Any,
    data: ImageFolder,
    *,
    methods: Sequence[str] = METHODS,
    steps: int = 10,
    seed: int = 0,
    batch_size: int = 32,
    replacement: Any = None,
    progress: bool = True,
) -> list[TableRow]:
    """Table 1's rows of a CNN classifier (:mod:`.classifier`): its Grad-CAM and random rows scored
    by the class logits of the folder's classes (labels its ImageNet classes), the methods it
    cannot take refused with their reason; all rows refused when a class is no ImageNet class.
    Each chunk's maps come from one batched call; ``batch_size=1`` is the per-image loop."""
    import time

    import torch
    from tqdm.auto import tqdm

    from .classifier import CLASSIFIER_METHODS, CLASSIFIER_REFUSALS, class_score_fn, classifier_maps, folder_classes
    from .faithfulness import classification_curves, curve_endpoints

    classes, reason = folder_classes(data)
    if reason:
        return [TableRow(name, m, refused=reason) for m in methods]
    runnable = [m for m in methods if m in CLASSIFIER_METHODS]
    score_fn = class_score_fn(classifier, classes)
    targets = torch.as_tensor(classes, dtype=torch.long)
    n = len(data.paths)
    sums = {m: dict.fromkeys(CLASSIFICATION_COLUMNS, 0.0) for m in runnable}
    times = dict.fromkeys(runnable, 0.0)
    correct = 0
    for start in tqdm(
        range(0, n, batch_size), desc=f"Table 1 {name}", disable=not progress or not runnable, leave=False
    ):
        if not runnable:
            break
        idx = list(range(start, min(start + batch_size, n)))
        px = classifier.pixels(data.images(idx))
        labels = torch.as_tensor(data.labels[idx], dtype=torch.long)
        ends = curve_endpoints(score_fn, px, replacement)
        correct += int((ends.clean_scores.argmax(1).cpu() == labels).sum())
        for m in runnable:
            t0 = time.perf_counter()
            maps = classifier_maps(m, classifier, px, targets[labels], seed=seed)
            aucs = classification_curves(
                score_fn, px, maps, labels, steps=steps, endpoints=ends, forward_batch=batch_size
            ).aucs
            times[m] += time.perf_counter() - t0
            for c in CLASSIFICATION_COLUMNS:
                sums[m][c] += aucs[c] * len(idx)
    return [
        TableRow(name, m, {c: v / n for c, v in sums[m].items()}, accuracy=correct / n, seconds=times[m])
        if m in runnable
        else TableRow(name, m, refused=CLASSIFIER_REFUSALS[m])
        for m in methods
    ]


def _check_methods(methods: Sequence[str]) -> None:
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise UsageError(f"unknown method(s) {unknown}; choose from {list(METHODS)}", argument="--methods")


# --------------------------------------------------------------------------- report
def write_cci_tables(
    rows: Sequence[TableRow], out: str | Path, task: str, *, header: str = "", random_models: Sequence[str] = ()
) -> Path:
    """``results.json`` (every row) and ``report.md`` (the table) under ``out``; returns the report. The
    title says first which of the models (``random_models``) have random weights."""

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    columns = CLASSIFICATION_COLUMNS if task == "classification" else RETRIEVAL_COLUMNS
    results = {
        "task": task,
        "rows": [
            {
                "model": r.model,
                "method": r.method,
                "scores": r.scores,
                "refused": r.refused,
                "clean": None if r.refused else r.accuracy,
                "seconds": r.seconds,
            }
            for r in rows
        ],
    }
    clean = "top-1 (clean)" if task == "classification" else "TR@1 (clean)"
    cells = [
        [
            f"{r.model} / {TITLES[r.method]}",
            *(
                [f"refused: {r.refused}"] + [""] * (len(columns) + 1)
                if r.refused
                else [f"{100 * r.scores[c]:.1f}" for c in columns] + [f"{100 * r.accuracy:.1f}", f"{r.seconds:.1f}"]
            ),
        ]
        for r in rows
    ]
    table = markdown_table(["model / method", *columns, clean, "seconds"], cells)
    title = (
        "Table 1: zero-shot classification, deletion / insertion AUC (%)"
        if task == "classification"
        else "Table 2: image-text retrieval, deletion / insertion AUC of Recall@k (%)"
    )
    if random_models:
        title += f" - RANDOM WEIGHTS: {', '.join(random_models)} (mechanics only, their rows mean nothing)"
    text = "\n".join(
        [
            f"# CCI {title}",
            "",
            header,
            "",
            table,
            "",
            "Del: lower is more faithful; Ins: higher. Every number: [results.json](results.json).",
            "",
        ]
    )
    _, report = write_report(out, results, text, nan_as_null=False)
    return report
