"""Concepts tab: a post-hoc CBM's top concepts for an image, with CoAM maps, checked.

The model is ``<artifacts>/posthoc_cbm`` when present, else a post-hoc CBM built in a
few seconds on the bird world (:func:`concept_grounding.models.backbone.train_backbone`
then :func:`concept_grounding.models.posthoc.train_posthoc_cbm`, CBM-112 concepts).
Concepts are ranked by local importance ``theta_jk * u_j`` for the predicted class ``k``
(:func:`concept_grounding.metrics.concept_existence.local_importance`). On a world bird
each top concept is checked against the truth: it **exists** when the image's label is
1, and it is **located** when its part's centre lies in the top ``alpha M1 M2 / 12``
pixels of its CoAM (:func:`concept_grounding.metrics.concept_location`, alpha = 3).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..bench.artifacts import POSTHOC_MODEL
from .common import attribute_label, class_label, get_world, overlay_heatmap, stopper, to_batch, world_concept_tensors
from .inputs import whole_number
from .resources import ResourceStore
from .shipped import ASSETS, shipped_folder, write_shipped
from .tab_explain import input_image

__all__ = ["ALPHA", "build_posthoc", "concepts", "posthoc_recipe", "ship_posthoc", "train_posthoc_cbm"]

#: Range of "Top concepts" a visitor may ask for (the slider's).
TOP = (1, 10)
#: CLM region scale used for "located".
ALPHA = 3
#: The default build's post-hoc CBM, trained once and shipped (:func:`ship_posthoc`, record in ``space_build.json``).
SHIPPED_POSTHOC = ASSETS / "space_posthoc_cbm"


def build_posthoc(store: ResourceStore) -> tuple[Any, str]:
    """``((PostHocCBM in eval mode, input side in px), where it came from)``: the artifacts
    folder's, else the one shipped for this store's :func:`posthoc_recipe`
    (:data:`SHIPPED_POSTHOC`), else :func:`train_posthoc_cbm`."""
    from ..models.posthoc import PostHocCBM

    folder = store.find_artifact("posthoc_cbm", POSTHOC_MODEL)
    if folder is not None:
        model = PostHocCBM.from_pretrained(str(folder))
        return (model.eval(), store.artifact_image_size()), f"loaded from {folder}"
    build = store.build
    if shipped_folder(SHIPPED_POSTHOC, posthoc_recipe(store)) is not None:
        model = PostHocCBM.from_pretrained(str(SHIPPED_POSTHOC))
        return (model.eval(), build.posthoc_size), f"post-hoc CBM shipped with the package ({_note(store)})"
    return train_posthoc_cbm(store)


def posthoc_recipe(store: ResourceStore) -> dict[str, Any]:
    """What the quick post-hoc CBM build depends on: the store's build sizes for it and its seed."""
    build = store.build
    return {
        "model": "post-hoc CBM",
        "per_class": build.posthoc_per_class,
        "size": build.posthoc_size,
        "epochs": build.posthoc_epochs,
        "cavs": build.posthoc_cavs,
        "seed": build.seed,
    }


def _note(store: ResourceStore) -> str:
    build = store.build
    return (
        f"CBM-112 CAVs on a CNN trained on {build.posthoc_per_class} world birds per class, {build.posthoc_size} px, "
        f"seed {build.seed}"
    )


def train_posthoc_cbm(store: ResourceStore) -> tuple[Any, str]:
    """The quick build: a CNN backbone then CBM-112 CAVs (:func:`~concept_grounding.bench.models.train_posthoc`)
    on ``store.build``'s world birds (10-15 s at the default sizes on 2 CPU cores)."""
    from ..bench.models import train_posthoc
    from ..vocabulary import load_vocabulary

    build = store.build
    size = build.posthoc_size
    tensors = world_concept_tensors(get_world(store), build.posthoc_per_class, list(load_vocabulary().cbm_112), size)
    model = train_posthoc(
        tensors, tensors, build.posthoc_training(), n_pos=build.posthoc_cavs, n_neg=build.posthoc_cavs
    )
    return (model.eval(), size), f"post-hoc CBM ({_note(store)}, quick build)"


def ship_posthoc(folder: str | Path | None = None, seed: int = 0) -> Path:
    """Train the default build's post-hoc CBM (seed ``seed``) and save it with its recipe into
    ``folder`` (default :data:`SHIPPED_POSTHOC`): how ``assets/space_posthoc_cbm`` was made."""
    import warnings

    from ..models.backbone import drop_init_weights
    from .builds import SpaceBuild

    store = ResourceStore(None, seed=seed, build=SpaceBuild())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CBM-112 concepts with no world positive get a zero CAV (said in the card)
        (model, _), _ = train_posthoc_cbm(store)
    target = Path(folder) if folder is not None else SHIPPED_POSTHOC
    return write_shipped(drop_init_weights(model), target, posthoc_recipe(store))


def concepts(
    store: ResourceStore,
    path: str | None,
    world_index: int,
    top: int = 5,
    gate: Any = None,
    cancelled: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Top concepts of the image with CoAM overlays; ground-truth checks on world birds.
    An upload is held to ``gate``'s pixel limit (:class:`~concept_grounding.web.limits.Gate`, default limits).
    ``cancelled`` is asked before each stage (the model, its forward pass, the CoAMs, the
    checks, every overlay); once it answers true the call stops with :class:`~.common.Cancelled`.

    Returns:
        dict with ``image`` (as used), ``gallery`` (``(overlay, caption)`` per concept),
        ``table`` (rows ``[rank, concept, importance, u, exists, located]``; the last two
        ``None`` for uploads), ``summary`` (Markdown) and ``predicted_class``.
    """
    top = whole_number(top, "Top concepts", *TOP)
    stop = stopper(cancelled)
    image, sample = input_image(store, path, world_index, gate)
    stop("the model")
    model, size = store.get("posthoc_cbm", build_posthoc)
    import torch

    from ..metrics.concept_existence import local_importance, rank_concepts

    px = to_batch([image], size)
    stop("the forward pass")
    with torch.no_grad():
        out = model(px)
        stop("the concept activation maps")
        maps = model.concept_activation_maps(px, upsample=False).numpy()
    stop("the ranking")
    theta = model.theta.numpy()
    u = out.concept_scores.numpy()
    predicted = out.class_logits.argmax(1).numpy()
    importance = local_importance(theta, u, predicted)
    ranked = rank_concepts(importance, top)[0]
    names = list(model.concept_names or [f"concept {j}" for j in range(u.shape[1])])
    exists = located = None
    if sample is not None:
        stop("the ground-truth checks")
        from ..metrics.concept_location import concept_location
        from ..vocabulary import load_vocabulary

        vocab = load_vocabulary()
        exists = [bool(sample.attributes[vocab.attribute_index(names[j])]) for j in ranked]
        clm = concept_location(
            maps,
            sample.part_xy[None],
            sample.part_visible[None],
            top_concepts=ranked[None],
            concept_names=names,
            image_size=tuple(sample.image.shape[:2]),
            alphas=(ALPHA,),
            top_l=(top,),
        )
        located = [bool(clm["hits"][0, r, 0]) if clm["evaluated"][0, r] else None for r in range(top)]
    gallery, table = [], []
    for r, j in enumerate(ranked):
        stop(f"the map of concept {r + 1}")
        gallery.append((overlay_heatmap(image, maps[0, j]), f"{r + 1}. {attribute_label(names[j])}"))
        table.append(
            [
                r + 1,
                names[j],
                round(float(importance[0, j]), 4),
                round(float(u[0, j]), 4),
                None if exists is None else ("yes" if exists[r] else "no"),
                None
                if located is None
                else ("n/a (no visible part)" if located[r] is None else ("yes" if located[r] else "no")),
            ]
        )
    world = get_world(store)
    label = (
        class_label(world.class_names[int(predicted[0])])
        if int(predicted[0]) < world.num_classes
        else str(int(predicted[0]))
    )
    summary = f"Predicted class: **{label}**."
    if sample is not None:
        n_exist = sum(exists)
        evaluated = [x for x in located if x is not None]
        summary += (
            f" True class: **{class_label(world.class_names[sample.label])}**. Of the top {top} concepts, "
            f"**{n_exist} exist** in the image and **{sum(evaluated)} of {len(evaluated)}** with a visible "
            f"part are **located** (CLM, alpha = {ALPHA})."
        )
    else:
        summary += " (Uploaded image: no ground truth, so existence and location are not checked.)"
    return {"image": image, "gallery": gallery, "table": table, "summary": summary, "predicted_class": label}
