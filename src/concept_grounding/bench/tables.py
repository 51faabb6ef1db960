"""The computing steps of ``concept-grounding bench``: Table 1, the post-hoc CBM analysis and
Table 2 (SUB's group mode), each from a :class:`~.context.BenchContext`. The steps and their
formulas: docs/bench.md, docs/sub_accuracy.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .artifacts import POSTHOC_MODEL, WORLD_CLIP_MODEL, BenchArtifacts
from .config import MODEL_VARIANTS, BenchConfig
from .context import BenchContext, Split
from .data import BenchData

logger = logging.getLogger(__name__)

__all__ = ["table1", "posthoc_analysis", "table2", "clip_row_name", "group_mode_chance"]


def _backbone(config: BenchConfig) -> str | dict[str, Any]:
    """The concept models' backbone config (:func:`~concept_grounding.models.backbone.build_backbone`)."""
    spec = dict(config.backbone) if isinstance(config.backbone, dict) else {"kind": config.backbone}
    if config.backbone_weights:
        spec["weights"] = config.backbone_weights
    return spec if len(spec) > 1 else spec["kind"]


def _train_variant(name: str, split: Split, columns, vocab, config: BenchConfig, cache: dict):
    """Train one Table 1 model. Independent and per-image variants share nothing; a
    sequential CBM reuses the independent CBM's concept predictor, as Koh et al. do."""
    from .models import train_variant

    tensors = split.tensors(MODEL_VARIANTS[name].labels, columns, vocab)
    return train_variant(
        name,
        tensors,
        config.train,
        concept_loss_weight=config.concept_loss_weight,
        backbone=_backbone(config),
        cache=cache,
    )


def _concept_accuracies(probs: np.ndarray, test: Split, sub_cols: list[int]) -> dict[str, float]:
    from ..metrics import concept_accuracy

    return {
        "concept_accuracy": concept_accuracy(probs, test.class_concepts),
        "concept_accuracy_sub": concept_accuracy(probs, test.class_concepts, columns=sub_cols)
        if sub_cols
        else float("nan"),
        "concept_accuracy_exact": concept_accuracy(probs, test.image_concepts),
    }


def _sub_row(name: str, probs_sub: np.ndarray, data: BenchData, names: list[str], mode: str = "binary", **kw) -> dict:
    from ..metrics import sub_accuracy

    res = sub_accuracy(
        probs_sub,
        data.sub["target_attribute"],
        data.sub["removed_attributes"],
        concept_names=names,
        reference_classes=data.sub["reference_class"],
        mode=mode,
        **kw,
    )
    return {
        "name": name,
        **{k: res[k] for k in ("s_plus", "s_minus", "chance_s_plus", "chance_s_minus", "n_s_plus", "n_s_minus")},
        "breakdown": res["breakdown"],
    }


# ---------------------------------------------------------------------------- step 2
def table1(ctx: BenchContext, seconds: dict[str, float] | None = None) -> tuple[list[dict], dict[str, Any]]:
    """Rows of Table 1 (reference rows, then every trained binary concept model) and the models;
    each model's training and scoring time (s) goes into ``seconds``, not into its row."""
    data, train, test, sub_images = ctx.data, ctx.train, ctx.test, ctx.sub_images
    columns, vocab, config, out = ctx.columns, ctx.vocab, ctx.config, ctx.out
    from ..models import predict
    from ..models.backbone import drop_init_weights

    names = [vocab.attributes[i] for i in columns]
    sub_cols = [j for j, i in enumerate(columns) if i in set(vocab.sub_attribute_indices)]
    ref_idx = np.array([data.class_names.index(c) for c in data.sub["reference_class"]])
    rows: list[dict] = []
    if data.sub_true_attributes is not None:
        oracle = _sub_row(
            "oracle: true concepts", data.sub_true_attributes[:, list(columns)].astype(float), data, names
        )
        rows.append(
            {**oracle, **_concept_accuracies(test.image_concepts.astype(float), test, sub_cols), "reference": True}
        )
    prior = _sub_row(
        "class prior: recites class-level labels",
        data.class_attributes[ref_idx][:, list(columns)].astype(float),
        data,
        names,
    )
    rows.append({**prior, **_concept_accuracies(test.class_concepts.astype(float), test, sub_cols), "reference": True})

    cache: dict = {}
    models: dict[str, Any] = {}
    seconds = {} if seconds is None else seconds
    for name in config.models:
        start = time.perf_counter()
        model = models[name] = _train_variant(name, train, columns, vocab, config, cache)
        drop_init_weights(model).save_pretrained(BenchArtifacts(out).model_dir(name))
        pred_test = predict(model, test.images)
        probs = pred_test.concept_probs.numpy()
        row = _sub_row(name, predict(model, sub_images).concept_probs.numpy(), data, names)
        row.update(_concept_accuracies(probs, test, sub_cols))
        row["class_accuracy"] = float((pred_test.class_logits.argmax(1) == test.labels).float().mean())
        rows.append(row)
        seconds[name] = round(time.perf_counter() - start, 1)
        logger.info("%s: s+ %.3f  s- %.3f  acc %.3f", name, row["s_plus"], row["s_minus"], row["concept_accuracy"])
    return rows, models


# ---------------------------------------------------------------------------- step 3
def posthoc_analysis(ctx: BenchContext) -> dict[str, Any]:
    """Post-hoc CBM (Yuksekgonul et al.) with Aysel et al.'s CGIM, CEM and CLM."""
    data, train, test, sub_images = ctx.data, ctx.train, ctx.test, ctx.sub_images
    columns, vocab, config, out = ctx.columns, ctx.vocab, ctx.config, ctx.out
    import torch

    from ..metrics import concept_existence, concept_global_importance, concept_location
    from ..models import predict
    from ..models.coam import save_coam_gallery
    from .models import train_posthoc

    names = [vocab.attributes[i] for i in columns]
    model = train_posthoc(
        train.tensors("class", columns, vocab),
        train.tensors("image", columns, vocab),
        config.train,
        backbone=_backbone(config),
    )
    model.save_pretrained(BenchArtifacts(out).model_dir(POSTHOC_MODEL))
    pred = predict(model, test.images)
    u = pred.concept_scores.numpy()
    predicted = pred.class_logits.argmax(1).numpy()
    labels = test.labels.numpy()
    theta = model.theta.numpy()
    V = data.class_attributes[:, list(columns)].T.astype(float)
    cgim = concept_global_importance(theta, V, u, predicted, labels)
    existence = concept_existence(theta, u, predicted, test.image_concepts, labels)
    maps = model.concept_activation_maps(test.images, upsample=False).numpy()
    size = config.world.image_size
    part_xy, visible = _parts_at(data.test, size)
    location = concept_location(
        maps,
        part_xy,
        visible,
        theta=theta,
        concept_scores=u,
        predictions=predicted,
        references=labels,
        concept_names=names,
        image_size=(size, size),
    )
    sub_row = _sub_row("post-hoc CBM", predict(model, sub_images).concept_probs.numpy(), data, names)
    sub_row.update(
        _concept_accuracies(
            pred.concept_probs.numpy(),
            test,
            [j for j, i in enumerate(columns) if i in set(vocab.sub_attribute_indices)],
        )
    )
    sub_row["class_accuracy"] = float((predicted == labels).mean())

    # CoAM gallery: each of 6 test images with its top-4 concepts by theta * u.
    k = min(4, len(columns))
    top = existence["top_concepts"][:6, :k]
    full = model.concept_activation_maps(test.images[:6], upsample=True)
    picked = torch.stack([full[i, top[i]] for i in range(len(top))])
    save_coam_gallery(
        [test.images[i] for i in range(len(top))],
        picked,
        BenchArtifacts(out).plot("coam_gallery.png"),
        concept_names=[[names[j].removeprefix("has_") for j in row] for row in top],
        row_titles=[data.class_names[int(labels[i])].split(".", 1)[-1] for i in range(len(top))],
    )
    from ..plotting import cgim_histograms

    cgim_histograms(cgim, BenchArtifacts(out).plot("cgim_histograms.png"), title="post-hoc CBM")
    return {
        "cgim": cgim,
        "existence": existence,
        "location": location,
        "sub_row": sub_row,
        "class_accuracy": sub_row["class_accuracy"],
    }


def _parts_at(split, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Part centres rescaled from each image's own size to ``size x size``."""
    xy = np.asarray(split["part_xy"], np.float32)
    sizes = np.array([im.size for im in split["image"]], np.float32)  # (N, 2) as (W, H)
    return xy * (size / sizes)[:, None, :], np.asarray(split["part_visible"], bool)


# ---------------------------------------------------------------------------- step 4
def _group_columns(groups, vocab) -> list[int]:
    return [i for g in groups for i in vocab.groups[g]]


def _group_scores(clip, dataset, groups, vocab) -> np.ndarray:
    """``(N, M)`` image-text similarities of a :class:`~concept_grounding.models.clip.ClipHandle`
    with SUB's group prompts for the ``M`` attributes of ``groups`` (in :func:`_group_columns`
    order), for every image of ``dataset``, scored as :func:`~concept_grounding.evaluation.evaluate_sub` scores."""
    from ..evaluation.adapters import OpenVocabularyModel
    from ..evaluation.sub import predict_scores

    model = OpenVocabularyModel(clip)
    model.prepare(groups, vocab)
    return predict_scores(model, dataset, batch_size=256, progress=False)[0]


def _group_accuracy(scores: np.ndarray, groups, test: Split, columns, vocab, sub_cols) -> dict[str, float]:
    """Concept accuracy of group-mode predictions (argmax within each group is 'present')."""
    pred = np.zeros((len(scores), vocab.num_attributes), np.float32)
    start = 0
    for group in groups:
        cols = np.array(vocab.groups[group])
        block = scores[:, start : start + len(cols)]
        pred[np.arange(len(scores)), cols[block.argmax(1)]] = 1.0
        start += len(cols)
    return _concept_accuracies(pred[:, list(columns)], test, sub_cols)


def clip_row_name(name: str, pretrained: str | None) -> str:
    """A Table 2 row's name: the model, with its open_clip weights tag when it has one.

    >>> clip_row_name("ViT-B-32", "openai"), clip_row_name("org/siglip", None)
    ('ViT-B-32 (openai)', 'org/siglip')
    """
    return f"{name} ({pretrained})" if pretrained else name


def group_mode_chance(labels: np.ndarray, group_sizes: Sequence[int], none: bool = False) -> float:
    """Random chance of group-mode concept accuracy (SUB App. F, applied to every label).

    A uniform pick among a group's ``|A|`` values (``+ 1`` with a "none" option) predicts
    one value present and the others absent, so a label 1 is right with probability
    ``1 / (|A| + none)`` and a label 0 with ``1 - 1 / (|A| + none)``; the chance is the mean
    over images and columns (what :func:`~concept_grounding.metrics.concept_accuracy` averages).

    Args:
        labels: ``(N, M)`` 0/1 labels of the M columns.
        group_sizes: ``(M,)`` size ``|A|`` of each column's group.

    >>> round(group_mode_chance(np.array([[1, 0, 0, 0]]), [4, 4, 4, 4]), 4)   # (1/4 + 3 * 3/4) / 4
    0.625
    """
    y = np.asarray(labels, dtype=np.float64)
    p = 1.0 / (np.asarray(group_sizes, dtype=np.float64) + (1 if none else 0))
    if y.ndim != 2 or y.shape[1] != p.size:
        raise ValueError(f"labels must be (N, {p.size}), got {y.shape}")
    return float((y * p + (1 - y) * (1 - p)).mean())


def _group_chance(test: Split, columns, vocab, sub_cols) -> dict[str, float]:
    """:func:`group_mode_chance` for each CUB column of Table 2 (no "none" option, as scored)."""
    sizes = np.array([len(vocab.groups[vocab.group_of(i)]) for i in columns])
    return {
        "concept_accuracy": group_mode_chance(test.class_concepts, sizes),
        "concept_accuracy_sub": (
            group_mode_chance(test.class_concepts[:, sub_cols], sizes[sub_cols]) if sub_cols else float("nan")
        ),
        "concept_accuracy_exact": group_mode_chance(test.image_concepts, sizes),
    }


def table2(ctx: BenchContext, clips: Sequence[tuple[str, Any]] = ()) -> list[dict]:
    """Rows of Table 2: the world CLIP (trained here) and every named CLIP-like model of
    ``clips`` (row name, :class:`~concept_grounding.models.clip.ClipHandle`): SUB's s+ / s-
    from :func:`~concept_grounding.evaluation.evaluate_sub`, concept accuracy on the test split
    from the same group-mode scores, and each column's chance (``chance_<column>``)."""
    data, test = ctx.data, ctx.test
    columns, vocab, config, out = ctx.columns, ctx.vocab, ctx.config, ctx.out
    from ..evaluation import evaluate_sub
    from ..models.clip import train_world_clip, world_clip_handle

    sub_cols = [j for j, i in enumerate(columns) if i in set(vocab.sub_attribute_indices)]
    groups = sorted({vocab.group_of(t) for t in data.sub["target_attribute"]} | {vocab.group_of(i) for i in columns})
    models = []
    if data.source == "world":
        world_clip, _ = train_world_clip(
            data.train, image_size=config.world.image_size, epochs=config.clip_epochs, seed=config.world.seed
        )
        world_clip.save_pretrained(BenchArtifacts(out).model_dir(WORLD_CLIP_MODEL))
        models.append(("world CLIP (trained here)", world_clip_handle(world_clip)))
    models += list(clips)
    chance = {f"chance_{k}": v for k, v in _group_chance(test, columns, vocab, sub_cols).items()}
    rows = []
    for name, handle in models:
        res = evaluate_sub(handle, data.sub, batch_size=256, progress=False, vocab=vocab).metric
        rows.append(
            {
                "name": name,
                **{
                    k: res[k]
                    for k in (
                        "s_plus",
                        "s_minus",
                        "chance_s_plus",
                        "chance_s_minus",
                        "n_s_plus",
                        "n_s_minus",
                        "breakdown",
                    )
                },
            }
        )
        rows[-1].update(
            _group_accuracy(_group_scores(handle, data.test, groups, vocab), groups, test, columns, vocab, sub_cols)
        )
        rows[-1].update(chance)
    return rows
