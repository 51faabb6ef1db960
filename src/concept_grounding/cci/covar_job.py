"""The ``covar`` job: build COVAR on the world, evaluate a CLIP, diagnose errors; and its report.

Steps of :func:`run_covar`: (1) render ``objects`` world birds (image, mask, label) and
build their COVAR variants (``backgrounds`` procedural backgrounds, or one generated
background per ``inpaint_prompts`` with ``inpaint_model``, x identity + 11 transforms);
(2) zero-shot classify every variant with class prompts; (3) explain the predicted class
with CCI and split the errors into BG-Er / Fine-Er / FG-Er (judge: the world's class
attribute vectors, or the prompts' text embeddings); (4) on the untransformed birds, the
known-truth checks for CCI and the baselines: share of importance inside the bird mask
and the pointing game against the visible parts, plus Deletion/Insertion AUCs.

:meth:`CovarResult.save` (:func:`write_covar_report`) writes ``accuracy_bg_er.png``,
``shares.png``, ``overlays.png``, ``covar.json``, ``report.md`` (and ``dataset/`` with
``save_dataset``). The command ``concept-grounding covar`` runs it as its :class:`~concept_grounding.jobs.Job`;
its settings are :class:`~.covar_config.CovarConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import markdown_table, write_report
from .covar_config import CovarConfig

__all__ = ["CovarResult", "run_covar", "write_covar_report"]

#: COVAR variants per (object, background): identity + 11 structural transforms
VARIANTS = 12


@dataclass
class CovarResult:
    """What :func:`run_covar` computed.

    Attributes:
        config: the job's configuration.
        model: the CLIP's description.
        dataset: the COVAR ``datasets.Dataset`` (``objects x num_backgrounds x 12`` rows).
        shares: per transform and ``"all"``: accuracy, errors, BG-Er, Fine-Er, FG-Er shares.
        truth: per method (CCI and baselines): foreground share, pointing game, Deletion/Insertion AUCs.
        fg_share_mean: mean foreground share of the CCI maps over the dataset.
        num_backgrounds: backgrounds per bird actually used.
        overlays: panel rows (image, CCI of the predicted class, mask) for background 0, up to 12 images.
        mask_agreement: computed vs the folder's masks (mean IoU, pixel agreement), when both exist.
        random_weights: the CLIP's weights are random (``random-clip``); the report's title says so.
    """

    config: CovarConfig
    model: str
    dataset: Any
    shares: dict[str, dict[str, float]]
    truth: dict[str, dict[str, float]]
    fg_share_mean: float
    num_backgrounds: int
    overlays: list[list[tuple[str, np.ndarray]]] = field(default_factory=list)
    mask_agreement: dict[str, float] = field(default_factory=dict)
    random_weights: bool = False

    @property
    def per_transform(self) -> dict[str, dict[str, float]]:
        """``shares`` without the ``"all"`` row."""
        return {k: v for k, v in self.shares.items() if k != "all"}

    def summary(self) -> dict[str, Any]:
        """The JSON summary written as ``covar.json``."""
        return {
            "model": self.model,
            "rows": len(self.dataset),
            "per_transform": self.shares,
            "truth": self.truth,
            "fg_share_mean": self.fg_share_mean,
            "mask_agreement": self.mask_agreement,
        }

    def save(self, out: str | Path) -> Path:
        """Write the report under ``out`` (:func:`write_covar_report`); returns ``report.md``'s path."""
        return write_covar_report(self, out)


def _backgrounds(config: CovarConfig, sample) -> list | None:
    """Generated backgrounds (``inpaint_model``), or None for the procedural ones."""
    if config.inpaint_model is None:
        return None
    from concept_grounding.cci.covar import inpaint_backgrounds

    return inpaint_backgrounds(
        sample.image,
        sample.mask,
        list(config.inpaint_prompts),
        config.inpaint_model,
        seed=config.seed,
        num_inference_steps=config.inpaint_steps,
        height=config.inpaint_size,
        width=config.inpaint_size,
    )


def truth_checks(cci, clip, samples, class_embeds, steps: int) -> dict[str, dict[str, float]]:
    """Foreground share, pointing game (radius 0.1 x width) and Deletion/Insertion AUCs (blur
    replacement, ``steps`` steps) per method on the world birds ``samples``.

    Args:
        cci: a :class:`~concept_grounding.cci.ConceptClusterImportance` on ``clip.model``.
        clip: the explainable CLIP (``model``, ``pixels``).
        samples: world birds (``image``, ``mask``, ``label``, ``part_xy``, ``part_visible``), or
            folder objects without parts (``part_xy`` None: no pointing game).
        class_embeds: ``(C, E)`` class prompt embeddings.
    """
    import torch
    import torch.nn.functional as F

    from concept_grounding.cci.baselines import BASELINES
    from concept_grounding.cci.diagnosis import foreground_share, pointing_game
    from concept_grounding.cci.explainers import build_explainer
    from concept_grounding.cci.faithfulness import Replacement, classification_curves

    px = clip.pixels([s.image for s in samples])
    labels = torch.tensor([s.label for s in samples])
    text = class_embeds[labels]
    h, w = samples[0].image.shape[:2]
    fg = torch.from_numpy(np.stack([s.mask for s in samples]))
    has_parts = getattr(samples[0], "part_xy", None) is not None
    if has_parts:
        xy = torch.from_numpy(np.stack([s.part_xy for s in samples])).float()
        vis = torch.from_numpy(np.stack([s.part_visible for s in samples]))
    t = F.normalize(class_embeds.float(), dim=-1)

    def score(x):
        return F.normalize(cci.backend.encode_image(x).float(), dim=-1) @ t.T

    explainers = {"CCI": cci, **{name: build_explainer(name, clip.model) for name in BASELINES}}
    methods = {key: e(px, text).maps for key, e in explainers.items()}
    result = {}
    for name, maps in methods.items():
        at_image = F.interpolate(maps[:, None].float(), size=(h, w), mode="bilinear", align_corners=False)[:, 0]
        aucs = classification_curves(score, px, maps, labels, steps=steps, replacement=Replacement("blur")).aucs
        result[name] = {"foreground_share": float(foreground_share(at_image, fg).mean())}
        if has_parts:
            result[name]["pointing_game"] = float(pointing_game(at_image, xy, vis, radius=0.1 * w).float().mean())
        result[name].update(aucs)
    return result


def _overlay_rows(cci, clip, ds, ev, class_embeds, n_backgrounds: int) -> list[list[tuple[str, np.ndarray]]]:
    """(transform | CCI of the predicted class | mask) for the variants of background 0, at most 12."""
    import torch

    from concept_grounding.cci.plots import overlay

    rows = []
    picks = [i for i in range(len(ds)) if i % (VARIANTS * n_backgrounds) < VARIANTS][:12]  # background 0
    for i in picks:
        img = np.asarray(ds[i]["image"])
        emb = cci.embed(clip.pixels([img]))
        out = cci.explain_embeddings(emb, class_embeds[ev.preds[i : i + 1]])
        heat = torch.nn.functional.interpolate(
            out.maps[:, None], size=img.shape[:2], mode="bilinear", align_corners=False
        )[0, 0].numpy()
        rows.append(
            [(ev.transforms[i], img), (ev.categories[i], overlay(img, heat)), ("mask", np.asarray(ds[i]["mask"]))]
        )
    return rows


def run_covar(config: CovarConfig) -> CovarResult:
    """Build COVAR on the world, classify, explain and diagnose, and run the truth checks; nothing is written."""
    from concept_grounding.cci import ConceptClusterImportance
    from concept_grounding.cci.covar import build_covar, evaluate_covar
    from concept_grounding.cci.diagnosis import AttributeJudge, TextEmbeddingJudge
    from concept_grounding.cci.loading import load_explainable_clip
    from concept_grounding.models.clip import class_caption
    from concept_grounding.world import BirdWorld, WorldConfig

    from ..hub import IMAGENET_CLASSIFIERS
    from .covar_folder import folder_objects

    # 1. objects and variants
    mask_agreement: dict[str, float] = {}
    if config.images is not None:
        segmenter = None
        if config.detector is not None:
            from .segment import GroundedSegmenter

            segmenter = GroundedSegmenter.from_pretrained(
                config.detector, config.segmenter, threshold=config.detector_threshold, cache_dir=config.mask_cache
            )
        samples, class_names, mask_agreement = folder_objects(
            config.images, config.class_names_file, config.objects, config.size, segmenter
        )
    else:
        world = BirdWorld(WorldConfig(image_size=config.size, seed=config.seed))
        samples, class_names = [world.sample(i) for i in range(config.objects)], list(world.class_names)
    backgrounds = _backgrounds(config, samples[0])
    n_backgrounds = len(backgrounds) if backgrounds is not None else config.backgrounds
    ds = build_covar(
        ((s.image, s.mask, s.label) for s in samples),
        num_backgrounds=n_backgrounds,
        class_names=class_names,
        seed=config.seed,
        backgrounds=backgrounds,
    )

    if config.model in IMAGENET_CLASSIFIERS:  # a CNN: class logits and Grad-CAM (.covar_classifier)
        from .covar_classifier import covar_with_classifier

        c = covar_with_classifier(
            config.model,
            samples,
            class_names,
            ds,
            per_object=VARIANTS * n_backgrounds,
            threshold=config.threshold,
            judge_threshold=config.judge_threshold,
            steps=config.steps,
            seed=config.seed,
        )
        return CovarResult(
            config, c.description, ds, c.shares, c.truth, c.fg_share_mean, n_backgrounds, c.overlays, mask_agreement
        )

    # 2. model, prompts, judge
    clip = load_explainable_clip(config.model, image_size=config.size, pretrained=config.pretrained)
    cci = ConceptClusterImportance(clip.model, num_clusters=config.clusters, seed=config.seed)
    class_embeds = clip.encode_text([class_caption(n) for n in class_names])
    if config.judge == "attributes":
        judge = AttributeJudge(world.class_attributes, threshold=config.judge_threshold)
    else:
        judge = TextEmbeddingJudge(class_embeds, threshold=config.judge_threshold)

    # 3. classify, explain, diagnose (COVAR images are fed through the model's own pixel pipe)
    ev = evaluate_covar(
        cci,
        ds,
        class_embeds,
        judge=judge,
        threshold=config.threshold,
        pixels=lambda ims: clip.pixels([np.asarray(im.convert("RGB")) for im in ims]),
    )

    # 4. truth checks on the untransformed birds
    truth = truth_checks(cci, clip, samples, class_embeds, config.steps)

    # 5. overlays for the figure
    overlays = _overlay_rows(cci, clip, ds, ev, class_embeds, n_backgrounds)
    return CovarResult(
        config,
        clip.description,
        ds,
        ev.shares,
        truth,
        float(ev.fg_share.mean()),
        n_backgrounds,
        overlays,
        mask_agreement,
        clip.random_weights,
    )


def report_markdown(result: CovarResult) -> str:
    """The Markdown report: settings, the per-transform table, the truth table, the figures."""
    c, ev_all = result.config, result.shares["all"]
    kind = "generated" if c.inpaint_model is not None else "procedural"
    source = f"the image folder {c.images}" if c.images else "the bird world"
    shares = markdown_table(
        ["transform", "accuracy", "errors", "BG-Er", "Fine-Er", "FG-Er"],
        [
            [
                name,
                f"{v['accuracy']:.3f}",
                int(v["errors"]),
                f"{v['BG-Er']:.3f}",
                f"{v['Fine-Er']:.3f}",
                f"{v['FG-Er']:.3f}",
            ]
            for name, v in [*result.per_transform.items(), ("all", ev_all)]
        ],
    )
    warning = " with a RANDOM-WEIGHT model (mechanics only, the numbers mean nothing)" if result.random_weights else ""
    lines = [
        f"# COVAR on {source}{warning}\n\n"
        f"Model: {result.model}. {len(result.dataset) // (VARIANTS * result.num_backgrounds)} objects x "
        f"{result.num_backgrounds} {kind} backgrounds x {VARIANTS} variants"
        f" = {len(result.dataset)} images; K = {c.clusters}; "
        f"judge: {c.judge}.\n",
        shares,
    ]
    if result.mask_agreement:
        a = result.mask_agreement
        lines.append(
            f"\nComputed masks against the folder's masks on {a['images']} objects: mean IoU "
            f"{a['mask_iou']:.3f}, pixel agreement {a['pixel_agreement']:.3f}.\n"
        )
    keys = list(next(iter(result.truth.values())))
    lines += [
        "\n## Known truth on the untransformed birds\n",
        markdown_table(["method", *keys], [[m, *(f"{v[k]:.3f}" for k in keys)] for m, v in result.truth.items()]),
    ]
    lines += ["\n![accuracy and BG-Er](accuracy_bg_er.png)\n", "![shares](shares.png)\n", "![overlays](overlays.png)\n"]
    return "\n".join(lines)


def write_covar_report(result: CovarResult, out: str | Path) -> Path:
    """Write the figures, ``covar.json`` and ``report.md`` under ``out`` (and ``dataset/`` with the
    config's ``save_dataset``, via ``save_to_disk``); returns the report's path (:meth:`CovarResult.save`)."""
    from concept_grounding.cci.plots import save_bar_chart, save_panel_grid

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if result.config.save_dataset:
        result.dataset.save_to_disk(str(out / "dataset"))
    per_t = result.per_transform
    save_bar_chart(
        {
            "accuracy": {k: v["accuracy"] for k, v in per_t.items()},
            "BG-Er share": {k: v["BG-Er"] for k, v in per_t.items()},
        },
        out / "accuracy_bg_er.png",
        f"COVAR per transform ({result.model})",
        "fraction",
    )
    save_bar_chart(
        {c: {k: v[c] for k, v in per_t.items()} for c in ("BG-Er", "Fine-Er", "FG-Er")},
        out / "shares.png",
        "error sources per transform (share of errors)",
        "share",
    )
    rows = result.overlays
    save_panel_grid(
        [[cell for row in rows[j : j + 3] for cell in row] for j in range(0, len(rows), 3)],
        out / "overlays.png",
        title="COVAR variants: image, CCI of the predicted class, mask",
    )
    _, report = write_report(
        out, result.summary(), report_markdown(result), results_name="covar.json", nan_as_null=False
    )
    return report
