"""The ``explain`` job: CCI maps (and baselines) for images and texts, and its report.

:func:`run_explain` computes; :func:`write_explain_report` writes ``explain.png`` (image,
CCI overlay, clusters, and with ``baselines`` Grad-CAM and rollout overlays),
``explain.json`` (drops, weights, similarities per image) and ``report.md``. The command
``concept-grounding explain`` parses and validates its arguments, then calls both.

>>> from concept_grounding.cci.explain_job import ExplainConfig, check_text_count
>>> ExplainConfig(num=2, size=32, clusters=3).num_images
2
>>> check_text_count(2, 3)
Traceback (most recent call last):
...
ValueError: 2 texts for 3 images; give one per image or one for all
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..fileio import markdown_table, write_report
from ..settings import setting
from ..validators import positive_int, world_clip_side

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["ExplainConfig", "run_explain", "write_explain_report", "check_text_count"]

METHODS = ("fast", "hook")
#: the baselines ``baselines=True`` draws beside CCI (every one of :data:`~.baselines.BASELINES` but the random floor)
BASELINE_NAMES = ("gradcam", "grad-eclip", "maskclip", "rollout")


def _list_or_none(values: Sequence[str]) -> list[str] | None:
    """``--texts`` given without texts means the default (``None``)."""
    return list(values) or None


def check_text_count(n_texts: int, n_images: int) -> None:
    """Raise ``ValueError`` unless there is one text per image or one text for all."""
    if n_texts not in (1, n_images):
        raise ValueError(f"{n_texts} texts for {n_images} images; give one per image or one for all")


@dataclass(frozen=True)
class ExplainConfig:
    """What to explain and how.

    Args:
        images: ``(H_i, W_i, 3) uint8`` images of any sizes; ``None`` renders ``num`` world birds.
        texts: one text per image or one for all; ``None`` (world images only) uses each bird's class prompt.
        num: world birds rendered when ``images`` is ``None``.
        size: world image side and tiny-model input size in pixels (a multiple of 8, >= 32).
        model: a resolved CLIP name or folder (see :func:`concept_grounding.hub.resolve_clip`),
            ``"random-clip[:seed]"`` (random weights, on purpose); ``None`` or ``"world-clip"``: the shipped
            world CLIP (:mod:`concept_grounding.cci.loading`).
        pretrained: the weights tag of an open_clip ``model`` (refused without one; ``"random"`` asks for
            random weights).
        clusters: K of the k-means.
        seed: world and k-means seed.
        method: ``"fast"`` (token deletion) or ``"hook"`` (masked attention).
        baselines: also compute the baselines (:data:`BASELINE_NAMES`: Grad-CAM, Grad-ECLIP, MaskCLIP, rollout).
    """

    images: Sequence[np.ndarray] | None = None
    texts: Sequence[str] | None = setting(
        None,
        "one text per image, or one for all (default: each world bird's class prompt)",
        nargs="*",
        convert=_list_or_none,
    )
    num: int = setting(4, "world samples when --images is not given", parse=positive_int)
    size: int = setting(64, "world image side / tiny model input size (a multiple of 8, >= 32)", parse=world_clip_side)
    model: str | None = setting(
        None,
        "world-clip (the shipped world CLIP, the default), random-clip[:seed] (random "
        "weights, on purpose), a WorldCLIP folder, an open_clip name or a transformers "
        "id/path",
    )
    clusters: int = setting(7, "K of the k-means", parse=positive_int)
    seed: int = setting(0, "seed of the world samples, the k-means and the tiny model", parse=int)
    method: str = setting(
        "fast", "fast: cut a cluster by deleting its tokens; hook: by masking its attention", choices=METHODS
    )
    baselines: bool = setting(
        False, "also draw the baselines Grad-CAM, Grad-ECLIP, MaskCLIP and attention rollout", action="store_true"
    )
    pretrained: str | None = setting(
        None,
        "open_clip weights tag for an architecture --model (e.g. openai), a weights "
        "file, or 'random' for random weights on purpose (an architecture without it "
        "is refused)",
    )

    def __post_init__(self) -> None:
        if self.images is not None and not self.texts:
            raise ValueError("texts: give one text per image (or one for all) with images")
        if self.num < 1 or self.clusters < 1:
            raise ValueError(f"num and clusters must be >= 1, got num={self.num}, clusters={self.clusters}")
        if self.size < 32 or self.size % 8:
            raise ValueError(f"size must be a multiple of 8 that is >= 32, got {self.size}")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.texts:
            check_text_count(len(self.texts), self.num_images)

    @property
    def num_images(self) -> int:
        """How many images the job explains."""
        return len(self.images) if self.images is not None else self.num


@dataclass
class ExplainResult:
    """What :func:`run_explain` computed, per image ``i``.

    Attributes:
        config: the job's configuration.
        model: the model's description.
        images: ``(H_i, W_i, 3) uint8`` inputs.
        texts: the text of each image (length 1 or ``len(images)``).
        maps: one ``(H_i, W_i)`` CCI map per image, at that image's resolution.
        labels: ``(N, gh, gw)`` cluster index per patch.
        baselines: ``{title: [(H_i, W_i) map per image]}`` (empty without ``config.baselines``).
        random_weights: the model's weights are random (asked for with ``random-clip``).
        records: per image ``text``, ``similarity``, ``drops`` (K), ``weights`` (K), ``normalizer``,
            and ``foreground_share`` in [0, 1] for world birds.
    """

    config: ExplainConfig
    model: str
    images: list[np.ndarray]
    texts: list[str]
    maps: list[np.ndarray]
    labels: np.ndarray
    baselines: dict[str, list[np.ndarray]] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    random_weights: bool = False

    def text(self, i: int) -> str:
        """The text explained for image ``i``."""
        return self.texts[i if len(self.texts) > 1 else 0]

    def save(self, out: str | Path) -> Path:
        """Write the report under ``out`` (:func:`write_explain_report`); returns ``report.md``'s path."""
        return write_explain_report(self, out)


def _world_inputs(config: ExplainConfig) -> tuple[list[np.ndarray], list[str], list[np.ndarray]]:
    """``num`` world birds: images, texts (given, or class prompts) and foreground masks."""
    from concept_grounding.models.clip import class_caption
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=config.size, seed=config.seed))
    samples = [world.sample(i) for i in range(config.num)]
    texts = list(config.texts) if config.texts else [class_caption(world.class_names[s.label]) for s in samples]
    return [s.image for s in samples], texts, [s.mask for s in samples]


def maps_at_image_sizes(maps: torch.Tensor, images: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``(N, h, w)`` maps at the model's resolution -> one ``(H_i, W_i)`` float array per image, each
    resized bilinearly to its own image's size (photos of any size and aspect)."""
    import torch.nn.functional as F

    return [
        F.interpolate(
            m[None, None].float(), size=tuple(np.asarray(im).shape[:2]), mode="bilinear", align_corners=False
        )[0, 0].numpy()
        for m, im in zip(maps, images)
    ]


def run_explain(config: ExplainConfig) -> ExplainResult:
    """CCI (and baselines) for the configured images and texts; nothing is written.

    Steps: (1) inputs and model; (2) CCI and baselines, maps resized to the image;
    (3) per-image numbers (similarity, drops, weights, foreground share of world birds).
    """
    import torch

    from concept_grounding.cci.diagnosis import foreground_share
    from concept_grounding.cci.explainers import build_explainer
    from concept_grounding.cci.loading import load_explainable_clip

    # 1. inputs and model
    if config.images is not None:
        images, texts, masks = list(config.images), list(config.texts or ()), None
    else:
        images, texts, masks = _world_inputs(config)
    clip = load_explainable_clip(config.model, image_size=config.size, pretrained=config.pretrained)
    cci = build_explainer("cci", clip.model, clusters=config.clusters, seed=config.seed, method=config.method)
    px = clip.pixels(images)
    text_embeds = clip.encode_text(texts)

    # 2. CCI (and baselines), each map at its own image's size
    out = cci(px, text_embeds)
    maps = maps_at_image_sizes(out.maps, images)
    explainers = [build_explainer(name, clip.model) for name in BASELINE_NAMES if config.baselines]
    extra = {e.title: maps_at_image_sizes(e(px, text_embeds).maps, images) for e in explainers}
    labels = out.labels.view(len(images), *cci.backend.grid_size).numpy()

    # 3. numbers
    result = ExplainResult(
        config, clip.description, images, texts, maps, labels, extra, random_weights=clip.random_weights
    )
    for i in range(len(images)):
        rec = {
            "text": result.text(i),
            "similarity": float(out.similarity[i]),
            "drops": out.drops[i].tolist(),
            "weights": out.weights[i].tolist(),
            "normalizer": int(out.normalizer[i]),
        }
        if masks is not None:
            rec["foreground_share"] = float(
                foreground_share(torch.from_numpy(maps[i][None]), torch.from_numpy(np.asarray(masks[i])[None]))
            )
        result.records.append(rec)
    return result


def report_markdown(result: ExplainResult) -> str:
    """The Markdown report: settings, the figure, one table row per image."""
    c = result.config
    rows = [
        [
            i,
            rec["text"],
            f"{rec['similarity']:.3f}",
            f"{max(rec['drops']):.4f}",
            f"{rec['foreground_share']:.2f}" if "foreground_share" in rec else "-",
        ]
        for i, rec in enumerate(result.records)
    ]
    title = "# CCI explanations" + (
        " of a RANDOM-WEIGHT model: mechanics only, the maps mean nothing" if result.random_weights else ""
    )
    note = (
        "\n\nThe world CLIP knows only the bird world: on other photos its maps show how CCI works, not what "
        "a trained CLIP sees."
        if result.config.images is not None and result.model.startswith("shipped world")
        else ""
    )
    return (
        f"{title}\n\nModel: {result.model}. K = {c.clusters}, seed {c.seed}, "
        f"method {c.method}.{note}\n\n![explanations](explain.png)\n\n"
        + markdown_table(["#", "text", "s", "largest drop", "FG share"], rows)
        + "\n"
    )


def write_explain_report(result: ExplainResult, out: str | Path) -> Path:
    """Write ``explain.png``, ``explain.json`` and ``report.md`` under ``out``; returns the report's path
    (:meth:`ExplainResult.save`)."""
    from concept_grounding.cci.plots import overlay, save_panel_grid

    out = Path(out)
    rows = []
    for i, img in enumerate(result.images):
        row = [(result.text(i)[:28], img), ("CCI", overlay(img, result.maps[i])), ("clusters", result.labels[i])]
        row += [(name, overlay(img, m[i])) for name, m in result.baselines.items()]
        rows.append(row)
    out.mkdir(parents=True, exist_ok=True)
    save_panel_grid(rows, out / "explain.png", title=f"CCI, K={result.config.clusters}: {result.model}")
    _, report = write_report(
        out,
        {"model": result.model, "images": result.records},
        report_markdown(result),
        results_name="explain.json",
        nan_as_null=False,
    )
    return report
