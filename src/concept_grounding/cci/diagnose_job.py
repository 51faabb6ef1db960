"""The ``diagnose`` job: the CCI paper's error diagnosis on real image folders.

Every image is classified zero-shot with class prompts, the predicted class is explained with
CCI, and each error is split into BG-Er (the map lies on the background), Fine-Er (on the
object, the confused classes are similar) or FG-Er (:func:`~.diagnosis.diagnose`, through
:func:`~.covar.evaluate_covar`). Layouts:

* an ImageNet-style folder (:func:`~.layouts.read_image_folder`): one subset, ``all``;
* CounterAnimals: ``DIR/<subset>/<class folder>/...`` with the subsets ``easy`` / ``hard``
  (or the release's ``common`` / ``counter``), each an image folder; the shares are given
  per subset.

Foreground masks: a folder's ``masks/`` (given), or computed once per image by a
:class:`~.segment.GroundedSegmenter` (cached). With both, the diagnosis runs with each and
the agreement of the two diagnoses is reported (the share of images whose category is the
same, and the masks' mean IoU).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..fileio import write_report

__all__ = ["DiagnoseResult", "read_subsets", "run_diagnose", "write_diagnose_report"]

#: CounterAnimals' subset folder names: ours and the release's
SUBSET_NAMES = (("easy", "hard"), ("common", "counter"))


def read_subsets(root: str | Path, class_names: str | Path | None = None, max_per_class: int | None = None) -> dict:
    """``{subset: ImageFolder}``: CounterAnimals' easy / hard (or common / counter) folders when
    ``root`` holds them, else ``root`` itself as ``all``."""
    from .layouts import read_image_folder

    root = Path(root)
    for names in SUBSET_NAMES:
        if all((root / n).is_dir() for n in names):
            subsets = {n: read_image_folder(root / n, class_names, max_per_class=max_per_class) for n in names}
            if len({tuple(s.class_names) for s in subsets.values()}) != 1:
                raise UsageError(f"{root}: the {' / '.join(names)} folders must hold the same classes",
                                 argument="--images")
            return subsets
    return {"all": read_image_folder(root, class_names, max_per_class=max_per_class)}


@dataclass
class DiagnoseResult:
    """Per subset (and ``all`` over them): accuracy, errors and the BG-Er / Fine-Er / FG-Er
    shares (``shares``); ``computed_shares`` and ``agreement`` when masks were both given and computed."""

    model: str
    source: str
    images: int
    shares: dict[str, dict[str, float]]
    computed_shares: dict[str, dict[str, float]] = field(default_factory=dict)
    agreement: dict[str, float] = field(default_factory=dict)


def _rows(subsets: dict, segmenter: Any) -> tuple[list[dict], list[dict] | None, list[float]]:
    """Rows (image, mask, label, transform = subset) with the given masks, with the computed
    ones (when both exist), and the masks' IoUs."""
    from PIL import Image

    from ..models.clip import class_caption

    given_rows, computed_rows, ious = [], [], []
    for subset, data in subsets.items():
        if data.masks is None and segmenter is None:
            raise UsageError(f"{subset}: no masks/ folder and no segmenter (--detector, --segmenter)",
                             argument="--images")
        for i, path in enumerate(data.paths):
            image = Image.open(path).convert("RGB")
            label = int(data.labels[i])
            computed = None if segmenter is None else \
                segmenter(image, class_caption(data.class_names[label]), source=path)
            given = None
            if data.masks is not None:
                if not data.masks[i].is_file():
                    raise UsageError(f"no mask for {path.name}", argument="--images", file=data.masks[i])
                given = np.asarray(Image.open(data.masks[i]).convert("L")) > 127
            first = given if given is not None else computed
            given_rows.append({"image": image, "mask": Image.fromarray(first.astype(np.uint8) * 255), "label": label,
                               "transform": subset})
            if given is not None and computed is not None:
                computed_rows.append({**given_rows[-1], "mask": Image.fromarray(computed.astype(np.uint8) * 255)})
                union = (given | computed).sum()
                ious.append(float((given & computed).sum() / union) if union else 1.0)
    return given_rows, (computed_rows or None), ious


def run_diagnose(images: str | Path, *, class_names: str | Path | None = None, model: Any = None,
                 size: int = 64, clusters: int = 7, seed: int = 0, threshold: float = 0.5,
                 judge_threshold: float | None = None, segmenter: Any = None,
                 max_per_class: int | None = None, batch_size: int = 16) -> DiagnoseResult:
    """Classify, explain and diagnose every image of ``images`` (module docstring); nothing is written.
    ``model``: a :class:`~concept_grounding.models.clip.ClipHandle`, a resolved name or ``None`` (the tiny CLIP)."""
    import datasets

    from ..models.clip import class_caption
    from . import ConceptClusterImportance
    from .covar import evaluate_covar
    from .diagnosis import TextEmbeddingJudge
    from .loading import load_explainable_clip

    subsets = read_subsets(images, class_names, max_per_class)
    names = next(iter(subsets.values())).class_names
    given_rows, computed_rows, ious = _rows(subsets, segmenter)
    clip = model if hasattr(model, "pixels") else load_explainable_clip(model, image_size=size)  # a ClipHandle or a name
    cci = ConceptClusterImportance(clip.model, num_clusters=clusters, seed=seed)
    class_embeds = clip.encode_text([class_caption(n) for n in names])
    judge = TextEmbeddingJudge(class_embeds, threshold=judge_threshold)
    features = datasets.Features({"image": datasets.Image(), "mask": datasets.Image(),
                                  "label": datasets.ClassLabel(names=list(names)), "transform": datasets.Value("string")})

    def evaluate(rows):
        return evaluate_covar(cci, datasets.Dataset.from_list(rows, features=features), class_embeds, judge=judge,
                              threshold=threshold, batch_size=batch_size,
                              pixels=lambda ims: clip.pixels([np.asarray(im.convert("RGB")) for im in ims]))

    ev = evaluate(given_rows)
    result = DiagnoseResult(clip.description, str(images), len(given_rows), ev.shares)
    if computed_rows is not None:
        ev2 = evaluate(computed_rows)
        same = float(np.mean([a == b for a, b in zip(ev.categories, ev2.categories)]))
        errors = [i for i, c in enumerate(ev.categories) if c != "correct"]
        result.computed_shares = ev2.shares
        result.agreement = {"category_agreement": same, "mask_iou": float(np.mean(ious)), "images": len(ious),
                            "error_category_agreement": float(np.mean([ev.categories[i] == ev2.categories[i]
                                                                       for i in errors])) if errors else float("nan")}
    return result


def _table(results: list[DiagnoseResult], computed: bool = False) -> list[str]:
    lines = ["| model | subset | accuracy | errors | BG-Er | Fine-Er | FG-Er |", "|---|---|---|---|---|---|---|"]
    for r in results:
        for name, v in (r.computed_shares if computed else r.shares).items():
            lines.append(f"| {r.model} | {name} | {v['accuracy']:.3f} | {int(v['errors'])} | {v['BG-Er']:.3f} | "
                         f"{v['Fine-Er']:.3f} | {v['FG-Er']:.3f} |")
    return lines


def write_diagnose_report(results: DiagnoseResult | list[DiagnoseResult], out: str | Path) -> Path:
    """``diagnose.json`` (one entry per model) and ``report.md`` (one table) under ``out``; returns the report."""
    results = [results] if isinstance(results, DiagnoseResult) else list(results)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    first = results[0]
    lines = [f"# Error diagnosis (CCI) on {first.source}", "", f"{first.images} images; shares of errors. Masks: the "
             "folder's where it has them.", "", *_table(results), ""]
    with_agreement = [r for r in results if r.agreement]
    if with_agreement:
        lines += ["With the segmenter's masks instead:", ""]
        for r in with_agreement:
            a = r.agreement
            lines.append(f"- {r.model}: mean IoU with the folder's masks {a['mask_iou']:.3f} on {a['images']} images; "
                         f"the diagnosis agrees on {100 * a['category_agreement']:.1f} % of the images "
                         f"({100 * a['error_category_agreement']:.1f} % of the errors).")
        lines += ["", *_table(with_agreement, computed=True), ""]
    _, report = write_report(out, {"models": [r.__dict__ for r in results]}, "\n".join(lines),
                             results_name="diagnose.json", nan_as_null=False)
    return report
