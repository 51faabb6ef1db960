"""The world Flux's training data: the renders (stage 1 of :mod:`.train`) and each step's captions.

:func:`render_training_set` draws ``per_class`` held-out-free renders per species and, with
``compositions``, composition renders (1-3 birds in a varied scene and facing) with their truth;
:func:`batch_captions` captions a drawn batch (:mod:`.captions`), naming what a composition
render (mirrored or not) shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..world.composition import composition_config
from .captions import compose_caption, held_out_matrix, is_held_out_free, make_caption
from .components import FluxTrainConfig
from .training_utils import render_fields, training_world

__all__ = ["COUNT_PROBABILITIES", "composition_counts", "render_training_set", "batch_captions"]


def _held_out_free_indices(world: Any, per_class: int, skip: int = 0) -> list[int]:
    """Per class, the sample indices ``c + k * C`` (``k = 0, 1, ...``) of the first ``skip +
    per_class`` held-out-free renders, without the first ``skip`` of them; sorted."""
    held = held_out_matrix(world)
    C = world.num_classes
    chosen: list[int] = []
    for c in range(C):
        k, got = 0, 0
        while got < skip + per_class:
            i = c + k * C
            if is_held_out_free(world.labels(i), c, held):
                if got >= skip:
                    chosen.append(i)
                got += 1
            k += 1
    return sorted(chosen)


#: The facing a mirror image shows.
_MIRRORED = {"left": "right", "right": "left"}
#: Probabilities of 1, 2 and 3 birds in a composition render.
COUNT_PROBABILITIES = (0.4, 0.3, 0.3)


def composition_counts(seed: int, indices: list[int]) -> np.ndarray:
    """(N,) bird counts of the composition renders ``indices`` (:data:`COUNT_PROBABILITIES`),
    a function of ``(seed, index)``."""
    return np.asarray(
        [int(np.random.default_rng([seed, i, 202]).choice(3, p=COUNT_PROBABILITIES)) + 1 for i in indices], np.int64
    )


def render_training_set(cfg: FluxTrainConfig, progress: bool = True, workers: int = 1) -> dict[str, np.ndarray]:
    """``images`` (N, H, W, 3) uint8, ``labels`` (N,) int, ``attributes`` (N, 312) uint8,
    ``indices`` (N,) world sample indices: ``per_class`` held-out-free renders per class,
    rendered by ``workers`` processes (the same arrays for any count).

    With ``cfg.compositions > 0``, ``round(per_class * compositions)`` further held-out-free
    samples per class follow, drawn as compositions (:meth:`BirdWorld.composition`) in the
    varied scene and pose of the same world, with 1-3 birds (:func:`composition_counts`);
    ``composed`` (N,) bool marks them, ``count`` (N,), ``scene`` (N,) str and ``facing`` (N,) str
    give their truth (1 and the training world's own scene and facing for the others)."""
    world = training_world(cfg)
    chosen = _held_out_free_indices(world, cfg.per_class)
    out = render_fields(world.config, chosen, ("image", "label", "attributes"), workers, "render", progress)
    data = {
        "images": out["image"],
        "labels": out["label"].astype(np.int64),
        "attributes": out["attributes"].astype(np.uint8),
        "indices": np.asarray(chosen, np.int64),
    }
    n_comp = round(cfg.per_class * cfg.compositions)
    if n_comp == 0:
        return data
    plain = "plain" if world.config.scene == "plain" else ""
    facing = "right" if world.config.pose == "canonical" else ""
    base = {
        "composed": np.zeros(len(chosen), bool),
        "count": np.ones(len(chosen), np.int64),
        "scene": np.asarray([plain] * len(chosen), "<U8"),
        "facing": np.asarray([facing] * len(chosen), "<U8"),
    }
    if not plain or not facing:  # a varied training world: read its scenes and facings back
        rendered = render_fields(
            world.config, chosen, ("scene", "facing"), workers, "truth", progress, counts=[1] * len(chosen)
        )
        base["scene"], base["facing"] = rendered["scene"].astype("<U8"), rendered["facing"].astype("<U8")
    extra = _held_out_free_indices(world, n_comp, skip=cfg.per_class)
    counts = composition_counts(world.config.seed, extra)
    comp = render_fields(
        composition_config(world.config),
        extra,
        ("image", "label", "attributes", "scene", "facing"),
        workers,
        "compositions",
        progress,
        counts=counts.tolist(),
    )
    return {
        "images": np.concatenate([data["images"], comp["image"]]),
        "labels": np.concatenate([data["labels"], comp["label"].astype(np.int64)]),
        "attributes": np.concatenate([data["attributes"], comp["attributes"].astype(np.uint8)]),
        "indices": np.concatenate([data["indices"], np.asarray(extra, np.int64)]),
        "composed": np.concatenate([base["composed"], np.ones(len(extra), bool)]),
        "count": np.concatenate([base["count"], counts]),
        "scene": np.concatenate([base["scene"], comp["scene"].astype("<U8")]),
        "facing": np.concatenate([base["facing"], comp["facing"].astype("<U8")]),
    }


def batch_captions(
    data: dict[str, np.ndarray],
    indices: list[int],
    flipped: list[bool],
    world: Any,
    rng: np.random.Generator,
    cfg: FluxTrainConfig,
) -> list[str]:
    """One training caption per drawn image ``indices[j]`` (mirrored where ``flipped[j]``):
    :func:`make_caption` (``""`` with ``cfg.caption_dropout``), and for a composition render
    :func:`compose_caption` with its count, scene and the facing the (mirrored) image shows."""
    prompts = [
        ""
        if rng.random() < cfg.caption_dropout
        else make_caption(data["attributes"][i], int(data["labels"][i]), world, rng, cfg.guide_captions)
        for i in indices
    ]
    composed = data.get("composed")
    if composed is None:
        return prompts
    for j, i in enumerate(indices):
        if composed[i]:
            facing = _MIRRORED[str(data["facing"][i])] if flipped[j] else str(data["facing"][i])
            prompts[j] = compose_caption(prompts[j], int(data["count"][i]), str(data["scene"][i]), facing, rng)
    return prompts
