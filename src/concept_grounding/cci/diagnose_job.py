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

:func:`diagnose_folder` diagnoses one model; :func:`run_diagnose` runs the job of the command
``concept-grounding diagnose`` (every model of a :class:`DiagnoseConfig`) and
:meth:`DiagnoseResult.save` (:func:`write_diagnose_report`) writes ``diagnose.json`` and
``report.md``.

>>> DiagnoseConfig(images="val", models=("world-clip", "random-clip:1")).models
('world-clip', 'random-clip:1')
>>> DiagnoseConfig(images="val", detector="owlv2")
Traceback (most recent call last):
...
ValueError: detector and segmenter: give both (a grounded segmenter) or neither
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..fileio import markdown_table, write_report
from ..settings import setting
from ..validators import closed_unit_interval, existing_dir, existing_file, int_at_least, positive_int

__all__ = [
    "DiagnoseConfig",
    "DiagnoseResult",
    "ModelDiagnosis",
    "read_subsets",
    "diagnose_folder",
    "run_diagnose",
    "write_diagnose_report",
]

#: CounterAnimals' subset folder names: ours and the release's
SUBSET_NAMES = (("easy", "hard"), ("common", "counter"))


def model_names(names: Iterable[str]) -> tuple[str, ...]:
    """``--models`` as given, an empty name meaning the shipped world CLIP.

    >>> model_names(["", "ViT-B-32:openai"])
    ('world-clip', 'ViT-B-32:openai')
    """
    return tuple(name or "world-clip" for name in names)


@dataclass(frozen=True)
class DiagnoseConfig:
    """What to diagnose and how.

    Args:
        images: an ImageNet-style folder, or CounterAnimals' layout (module docstring).
        class_names: its class names file (``None``: the folder names).
        models: CLIPs as :func:`~.table_models.load_table_models` takes them (open_clip ``arch[:pretrained]``,
            transformers id or folder, WorldCLIP folder, ``world-clip`` (the default), ``random-clip[:seed]``
            (random weights, on purpose), the preset ``paper``).
        detector, segmenter: a grounded segmenter's checkpoints (resolved names or folders), both
            or neither; its masks are computed once per image and cached under ``mask_cache``.
        detector_threshold: the detector's box score threshold in [0, 1].
        size: input side of the random-weight CLIP in pixels (>= 32).
        clusters: K of CCI's k-means.
        threshold: map binarisation, fraction of the maximum, in [0, 1].
        max_images: the first N images per class (``None``: all).
        seed: k-means and tiny-model seed.
        judge_threshold: cosine in [-1, 1] above which two classes are similar (``None``: the
            90th percentile of class pairs).
        batch_size: images per forward pass.
    """

    images: str = setting(
        help="ImageNet-style folder, or CounterAnimals' easy/hard (common/counter) layout",
        parse=existing_dir,
        convert=str,
    )
    class_names: str | None = setting(
        None,
        "class names: one per line in sorted-folder order, or '<folder> <name>' lines",
        parse=existing_file,
        convert=str,
    )
    models: Sequence[str] = setting(
        ("world-clip",),
        "CLIPs (as cci-bench: world-clip, the default; open_clip "
        "arch[:pretrained], transformers id or folder, WorldCLIP folder, "
        "random-clip[:seed] with random weights, the preset 'paper'). "
        "Masks are computed once and reused by every model",
        nargs="+",
        convert=model_names,
    )
    detector: str | None = setting(None, "zero-shot object detector (Hub id or folder) for computed masks")
    segmenter: str | None = setting(None, "SAM checkpoint (Hub id or folder) for computed masks")
    detector_threshold: float = setting(0.1, "box score threshold", parse=closed_unit_interval)
    mask_cache: str | None = setting(None, "computed-mask cache (default: OUT/mask_cache)", parse=Path, convert=str)
    size: int = setting(64, "input size of random-clip", parse=int_at_least(32))
    clusters: int = setting(7, "K of CCI's k-means", parse=positive_int)
    threshold: float = setting(0.5, "map binarisation, fraction of the max", parse=closed_unit_interval)
    max_images: int | None = setting(None, "first N images per class", parse=positive_int)
    seed: int = setting(0, "k-means and tiny-model seed", parse=int)
    judge_threshold: float | None = None
    batch_size: int = 16

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("models: name at least one model")
        if (self.detector is None) != (self.segmenter is None):
            raise ValueError("detector and segmenter: give both (a grounded segmenter) or neither")
        if self.size < 32:
            raise ValueError(f"size must be an integer >= 32, got {self.size}")
        for name in ("clusters", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {getattr(self, name)}")
        if self.max_images is not None and self.max_images < 1:
            raise ValueError(f"max_images must be an integer >= 1, got {self.max_images}")
        for name in ("threshold", "detector_threshold"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")


def read_subsets(root: str | Path, class_names: str | Path | None = None, max_per_class: int | None = None) -> dict:
    """``{subset: ImageFolder}``: CounterAnimals' easy / hard (or common / counter) folders when
    ``root`` holds them, else ``root`` itself as ``all``."""
    from .layouts import read_image_folder

    root = Path(root)
    for names in SUBSET_NAMES:
        if all((root / n).is_dir() for n in names):
            subsets = {n: read_image_folder(root / n, class_names, max_per_class=max_per_class) for n in names}
            if len({tuple(s.class_names) for s in subsets.values()}) != 1:
                raise UsageError(
                    f"{root}: the {' / '.join(names)} folders must hold the same classes", argument="--images"
                )
            return subsets
    return {"all": read_image_folder(root, class_names, max_per_class=max_per_class)}


@dataclass
class ModelDiagnosis:
    """One model's diagnosis (:func:`diagnose_folder`): per subset (and ``all`` over them) accuracy,
    errors and the BG-Er / Fine-Er / FG-Er shares (``shares``); ``computed_shares`` and
    ``agreement`` when masks were both given and computed. Its fields are one entry of
    ``diagnose.json``'s ``models``."""

    model: str
    source: str
    images: int
    shares: dict[str, dict[str, float]]
    computed_shares: dict[str, dict[str, float]] = field(default_factory=dict)
    agreement: dict[str, float] = field(default_factory=dict)
    random_weights: bool = False


def _rows(subsets: dict, segmenter: Any) -> tuple[list[dict], list[dict] | None, list[float]]:
    """Rows (image, mask, label, transform = subset) with the given masks, with the computed
    ones (when both exist), and the masks' IoUs."""
    from PIL import Image

    from ..models.clip import class_caption

    given_rows, computed_rows, ious = [], [], []
    for subset, data in subsets.items():
        if data.masks is None and segmenter is None:
            raise UsageError(
                f"{subset}: no masks/ folder and no segmenter (--detector, --segmenter)", argument="--images"
            )
        for i, path in enumerate(data.paths):
            image = Image.open(path).convert("RGB")
            label = int(data.labels[i])
            computed = (
                None if segmenter is None else segmenter(image, class_caption(data.class_names[label]), source=path)
            )
            given = None
            if data.masks is not None:
                if not data.masks[i].is_file():
                    raise UsageError(f"no mask for {path.name}", argument="--images", file=data.masks[i])
                given = np.asarray(Image.open(data.masks[i]).convert("L")) > 127
            first = given if given is not None else computed
            given_rows.append(
                {
                    "image": image,
                    "mask": Image.fromarray(first.astype(np.uint8) * 255),
                    "label": label,
                    "transform": subset,
                }
            )
            if given is not None and computed is not None:
                computed_rows.append({**given_rows[-1], "mask": Image.fromarray(computed.astype(np.uint8) * 255)})
                union = (given | computed).sum()
                ious.append(float((given & computed).sum() / union) if union else 1.0)
    return given_rows, (computed_rows or None), ious


def diagnose_folder(
    images: str | Path,
    *,
    class_names: str | Path | None = None,
    model: Any = None,
    size: int = 64,
    clusters: int = 7,
    seed: int = 0,
    threshold: float = 0.5,
    judge_threshold: float | None = None,
    segmenter: Any = None,
    max_per_class: int | None = None,
    batch_size: int = 16,
) -> ModelDiagnosis:
    """Classify, explain and diagnose every image of ``images`` with one model (module docstring);
    nothing is written. ``model``: a :class:`~concept_grounding.models.clip.ClipHandle`, a resolved
    name or ``None`` (the shipped world CLIP); ``segmenter``: ``(image, prompt, *, source) -> (H, W) bool``
    mask (a :class:`~.segment.GroundedSegmenter`) or ``None`` (the folder's masks only)."""
    import datasets

    from ..models.clip import class_caption
    from . import ConceptClusterImportance
    from .classifier import classifier_judge, evaluate_classifier_covar, folder_classes, is_classifier
    from .covar import evaluate_covar
    from .diagnosis import TextEmbeddingJudge
    from .loading import load_explainable_clip

    subsets = read_subsets(images, class_names, max_per_class)
    names = next(iter(subsets.values())).class_names
    given_rows, computed_rows, ious = _rows(subsets, segmenter)
    if is_classifier(model):  # a CNN: class logits, Grad-CAM of the predicted class (.classifier)
        classes, reason = folder_classes(next(iter(subsets.values())))
        if reason:
            raise UsageError(reason, argument="--images")
        judge = classifier_judge(model, classes, judge_threshold)
        features = datasets.Features(
            {
                "image": datasets.Image(),
                "mask": datasets.Image(),
                "label": datasets.ClassLabel(names=list(names)),
                "transform": datasets.Value("string"),
            }
        )
        ev = evaluate_classifier_covar(
            model,
            classes,
            datasets.Dataset.from_list(given_rows, features=features),
            judge=judge,
            threshold=threshold,
            batch_size=batch_size,
        )
        return ModelDiagnosis(model.description, str(images), len(given_rows), ev.shares)
    clip = (
        model if hasattr(model, "pixels") else load_explainable_clip(model, image_size=size)
    )  # a ClipHandle or a name
    cci = ConceptClusterImportance(clip.model, num_clusters=clusters, seed=seed)
    class_embeds = clip.encode_text([class_caption(n) for n in names])
    judge = TextEmbeddingJudge(class_embeds, threshold=judge_threshold)
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "mask": datasets.Image(),
            "label": datasets.ClassLabel(names=list(names)),
            "transform": datasets.Value("string"),
        }
    )

    def evaluate(rows):
        return evaluate_covar(
            cci,
            datasets.Dataset.from_list(rows, features=features),
            class_embeds,
            judge=judge,
            threshold=threshold,
            batch_size=batch_size,
            pixels=lambda ims: clip.pixels([np.asarray(im.convert("RGB")) for im in ims]),
        )

    ev = evaluate(given_rows)
    result = ModelDiagnosis(
        clip.description, str(images), len(given_rows), ev.shares, random_weights=clip.random_weights
    )
    if computed_rows is not None:
        ev2 = evaluate(computed_rows)
        same = float(np.mean([a == b for a, b in zip(ev.categories, ev2.categories)]))
        errors = [i for i, c in enumerate(ev.categories) if c != "correct"]
        result.computed_shares = ev2.shares
        result.agreement = {
            "category_agreement": same,
            "mask_iou": float(np.mean(ious)),
            "images": len(ious),
            "error_category_agreement": float(np.mean([ev.categories[i] == ev2.categories[i] for i in errors]))
            if errors
            else float("nan"),
        }
    return result


@dataclass
class DiagnoseResult:
    """What :func:`run_diagnose` computed: the config and one :class:`ModelDiagnosis` per model."""

    config: DiagnoseConfig
    models: list[ModelDiagnosis]

    def save(self, out: str | Path) -> Path:
        """Write the report under ``out`` (:func:`write_diagnose_report`); returns ``report.md``'s path."""
        return write_diagnose_report(self, out)


def run_diagnose(config: DiagnoseConfig) -> DiagnoseResult:
    """Every model of ``config`` diagnosed on its folder (:func:`diagnose_folder`); nothing is written
    but the segmenter's mask cache.

    Steps: (1) load every model (presets expanded) before any work; (2) the grounded segmenter,
    when configured, shared by every model (masks computed once, cached); (3) one diagnosis per model.
    """
    from .table_models import load_table_models

    models = [handle for _, handle in load_table_models(list(config.models), image_size=config.size)]
    segmenter = None
    if config.detector is not None:
        from .segment import GroundedSegmenter

        segmenter = GroundedSegmenter.from_pretrained(
            config.detector, config.segmenter, threshold=config.detector_threshold, cache_dir=config.mask_cache
        )
    return DiagnoseResult(
        config,
        [
            diagnose_folder(
                config.images,
                class_names=config.class_names,
                model=model,
                size=config.size,
                clusters=config.clusters,
                seed=config.seed,
                threshold=config.threshold,
                judge_threshold=config.judge_threshold,
                segmenter=segmenter,
                max_per_class=config.max_images,
                batch_size=config.batch_size,
            )
            for model in models
        ],
    )


def _table(results: list[ModelDiagnosis], computed: bool = False) -> str:
    """One row per model and subset: accuracy, errors and the three error shares."""
    return markdown_table(
        ["model", "subset", "accuracy", "errors", "BG-Er", "Fine-Er", "FG-Er"],
        [
            [
                r.model,
                name,
                f"{v['accuracy']:.3f}",
                int(v["errors"]),
                f"{v['BG-Er']:.3f}",
                f"{v['Fine-Er']:.3f}",
                f"{v['FG-Er']:.3f}",
            ]
            for r in results
            for name, v in (r.computed_shares if computed else r.shares).items()
        ],
    )


def write_diagnose_report(result: DiagnoseResult, out: str | Path) -> Path:
    """``diagnose.json`` (one entry per model) and ``report.md`` (one table) under ``out``; returns the
    report's path (:meth:`DiagnoseResult.save`)."""
    results = result.models
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    first = results[0]
    random = [r.model for r in results if r.random_weights]
    warning = (
        f" - {len(random)} model(s) with RANDOM WEIGHTS (mechanics only, their rows mean nothing)" if random else ""
    )
    lines = [
        f"# Error diagnosis (CCI; Grad-CAM for a CNN classifier) on {first.source}{warning}",
        "",
        f"{first.images} images; shares of errors. Masks: the folder's where it has them.",
        "",
        _table(results),
        "",
    ]
    with_agreement = [r for r in results if r.agreement]
    if with_agreement:
        lines += ["With the segmenter's masks instead:", ""]
        for r in with_agreement:
            a = r.agreement
            lines.append(
                f"- {r.model}: mean IoU with the folder's masks {a['mask_iou']:.3f} on {a['images']} images; "
                f"the diagnosis agrees on {100 * a['category_agreement']:.1f} % of the images "
                f"({100 * a['error_category_agreement']:.1f} % of the errors)."
            )
        lines += ["", _table(with_agreement, computed=True), ""]
    _, report = write_report(
        out,
        {"models": [r.__dict__ for r in results]},
        "\n".join(lines),
        results_name="diagnose.json",
        nan_as_null=False,
    )
    return report
