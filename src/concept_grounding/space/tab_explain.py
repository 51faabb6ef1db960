"""Explain tab: Concept Cluster Importance (CCI) of an image for a few texts.

Every model here is a :class:`concept_grounding.models.clip.ClipHandle` (the one CLIP
handle: the model CCI explains, its tokenizer, and its preprocessing with the pixel
normalisation). The default is ``<artifacts>/world_clip`` when present, else the world CLIP
trained by :func:`concept_grounding.models.train_world_clip` (a quick build, said so in the
status line). A named model (an open_clip name, a
transformers id or a local folder, loaded by
:func:`concept_grounding.cci.loading.load_explainable_clip`) replaces it when given, if the
operator offered it at launch (``--clip-model``, :mod:`.policy`); named models share the
store's LRU cache of visitor-chosen models. CCI itself is
:class:`concept_grounding.cci.ConceptClusterImportance`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..bench.artifacts import WORLD_CLIP_MODEL
from ..cci.baselines import BASELINES as _BASELINE_FUNCTIONS
from ..cci.baselines import baseline_caption
from ..cci.explain_job import ExplainConfig
from ..settings import default
from ..web.limits import Gate
from .common import Cancelled, get_world, label_overlay, overlay_heatmap, stopper
from .inputs import UserInputError, load_image, parse_texts, to_rgb, whole_number
from .resources import ResourceStore
from .shipped import ASSETS, shipped_folder, write_shipped

if TYPE_CHECKING:  # pragma: no cover
    from ..models.clip import ClipHandle

__all__ = [
    "BASELINES",
    "CLUSTERS",
    "DEFAULT_CLUSTERS",
    "Cancelled",
    "build_clip",
    "clip_recipe",
    "ship_clip",
    "train_clip",
    "get_model",
    "model_choices",
    "input_image",
    "explain",
    "WORLD_ONLY",
]


#: Baseline explanations offered beside CCI: the names of :data:`concept_grounding.cci.baselines.BASELINES`.
BASELINES: tuple[str, ...] = tuple(_BASELINE_FUNCTIONS)
#: Range of the cluster count K a visitor may pick (the slider's), and the largest world bird #.
CLUSTERS = (2, 12)
#: where the slider starts: `explain --clusters`'s default
DEFAULT_CLUSTERS = default(ExplainConfig, "clusters")
MAX_WORLD_INDEX = 99_999
#: World birds per class and epochs of the quick world-CLIP build.
CLIP_TRAIN_PER_CLASS = 4
CLIP_EPOCHS = 4
#: The default Space's world CLIP, trained once and shipped (:func:`ship_clip`, record in its ``space_build.json``).
SHIPPED_CLIP = ASSETS / "space_world_clip"


def build_named_clip(name: str):
    """A :meth:`ResourceStore.get` builder for a named CLIP (offline: a local folder or a
    model already in the Hugging Face cache), loaded as ``concept-grounding explain --model`` loads it."""

    def builder(store: ResourceStore) -> tuple[ClipHandle, str]:
        from ..cci.loading import load_explainable_clip

        # a name that cannot be loaded raises the command line's own error (ModelUnavailableError,
        # ValueError): the Space's boundary shows the line `concept-grounding explain --model` prints
        clip = load_explainable_clip(name, image_size=store.image_size)
        return clip, clip.description

    return builder


def build_clip(store: ResourceStore) -> tuple[ClipHandle, str]:
    """The Explain tab's model and where it came from: ``<artifacts>/world_clip``, else the
    world CLIP shipped with the package for this store's :func:`clip_recipe`
    (:data:`SHIPPED_CLIP`, loaded in well under a second), else :func:`train_clip`."""
    from ..models.clip import load_clip

    folder = store.find_artifact("world_clip", WORLD_CLIP_MODEL)
    if folder is not None:
        return load_clip(folder, backend="world"), f"world CLIP loaded from {folder}"
    if shipped_folder(SHIPPED_CLIP, clip_recipe(store)) is not None:
        return load_clip(SHIPPED_CLIP, backend="world"), f"world CLIP shipped with the package ({_clip_note(store)})"
    return train_clip(store)


def clip_recipe(store: ResourceStore) -> dict[str, Any]:
    """What the quick world-CLIP build depends on: input side, seed, birds per class, epochs."""
    return {
        "model": "world CLIP",
        "image_size": store.image_size,
        "seed": store.seed,
        "train_per_class": CLIP_TRAIN_PER_CLASS,
        "epochs": CLIP_EPOCHS,
    }


def _clip_note(store: ResourceStore) -> str:
    return (
        f"trained on {CLIP_TRAIN_PER_CLASS} world birds per class, {store.image_size} px, {CLIP_EPOCHS} epochs, "
        f"seed {store.seed}"
    )


def train_clip(store: ResourceStore) -> tuple[ClipHandle, str]:
    """The world CLIP trained by :func:`concept_grounding.models.train_world_clip` on the store's
    world (10-30 s on 2 CPU cores): the quick build, said so in the status line."""
    from ..models.clip import train_world_clip, world_clip_handle

    world = get_world(store)
    data = world.to_dataset_dict(train_per_class=CLIP_TRAIN_PER_CLASS, test_per_class=1)
    model, _ = train_world_clip(
        data["train"], image_size=store.image_size, epochs=CLIP_EPOCHS, seed=store.seed, progress=False
    )
    note = f"world CLIP {_clip_note(store)} (quick build)"
    return world_clip_handle(model, note), note


def ship_clip(folder: str | Path | None = None, seed: int = 0) -> Path:
    """Train the default Space's world CLIP (seed ``seed``) and save it with its recipe into
    ``folder`` (default :data:`SHIPPED_CLIP`): how ``assets/space_world_clip`` was made."""
    store = ResourceStore(None, seed=seed)
    handle, _ = train_clip(store)
    return write_shipped(handle.model, Path(folder) if folder is not None else SHIPPED_CLIP, clip_recipe(store))


def model_choices(store: ResourceStore) -> list[tuple[str, str]]:
    """The CLIP dropdown as ``(label, value)``: the default (value ``""``), then the
    models the store's policy offers."""
    return [("world CLIP (default)", "")] + [(name, name) for name in store.policy.offered("clip")]


def get_model(store: ResourceStore, model_name: str = "") -> ClipHandle:
    """The default CLIP for an empty ``model_name``, else the named one if the store's
    policy allows it (built on first use, kept in the LRU cache).

    Raises:
        UserInputError: the model is not offered by this Space, or cannot be loaded.
    """
    if not (model_name or "").strip():
        return store.get("world_clip", build_clip)
    name = store.policy.check("clip", model_name)
    return store.get(f"clip:{name}", build_named_clip(name), evictable=True)


def input_image(
    store: ResourceStore, path: str | None, world_index: int, gate: Gate | None = None
) -> tuple[np.ndarray, Any]:
    """The uploaded image (sanitised, within ``gate``'s pixel limit), or world bird
    ``world_index`` with its sample."""
    world_index = whole_number(world_index, "World bird #", 0, MAX_WORLD_INDEX)
    if path:
        return load_image(path, check_pixels=(gate if gate is not None else Gate()).check_pixels), None
    sample = get_world(store).sample(world_index)
    return to_rgb(sample.image), sample


#: Said when the default CLIP explains an uploaded image: it knows nothing but the bird world.
WORLD_ONLY = (
    "The default CLIP knows only the procedurally drawn bird world: on any other picture (a photo, "
    "a cat) its clusters and similarity drops describe what a bird-world model makes of it, not what "
    "a real CLIP sees. The operator can offer real CLIPs (--clip-model)."
)


def explain(
    store: ResourceStore,
    path: str | None,
    world_index: int,
    text: str,
    *,
    clusters: int = DEFAULT_CLUSTERS,
    baselines: list[str] | tuple[str, ...] = (),
    model_name: str = "",
    gate: Gate | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """CCI cluster map and one importance overlay per text (plus the chosen baselines), on
    the default model or the named CLIP ``model_name``.

    ``baselines`` are taken once each (repeats dropped) and refused beyond ``gate``'s
    ``max_list_items`` (:class:`~concept_grounding.web.limits.Gate`, default limits). ``cancelled`` is asked
    before each stage (the model, CCI, the texts, the drops, every overlay and baseline);
    once it answers true the call stops with :class:`~.common.Cancelled` (the Space asks
    whether the visitor is still there).

    Returns:
        dict with ``image`` (the input as used, ``(H, W, 3)`` uint8), ``cluster_map``,
        ``gallery`` (list of ``(overlay, caption)``), ``table`` (rows ``[text, cluster,
        weight w_k, drop Δs_k]``), ``similarity`` (one cosine per text) and ``notes``
        (:data:`WORLD_ONLY` when the default world CLIP explains an uploaded image; every
        offered baseline is computed, through the one explainer protocol,
        :func:`concept_grounding.cci.explainers.build_explainer`).
    """
    gate = gate if gate is not None else Gate()
    stop = stopper(cancelled)
    texts = parse_texts(text)
    clusters = whole_number(clusters, "Clusters K", *CLUSTERS)
    if baselines is not None and not isinstance(baselines, (list, tuple)):
        raise UserInputError("Baselines must be a list of names.")
    baselines = gate.check_items("Baselines", baselines)
    unknown = sorted({str(b) for b in baselines} - set(BASELINES))
    if unknown:
        raise UserInputError(f"Baselines: unknown {unknown[:3]}; choose from {list(BASELINES)}.")
    image, _ = input_image(store, path, world_index, gate)
    stop("loading the model")
    model = get_model(store, model_name)
    stop("CCI")
    import torch

    from ..cci.explainers import build_explainer
    from ..cci.importance import ClusterEmbeddings

    try:
        cci = build_explainer("cci", model.model, clusters=clusters, seed=store.seed, tokenizer=model.tokenizer)
    except ValueError as err:
        raise UserInputError(str(err)) from None
    px = model.pixels([image])
    with torch.inference_mode():
        emb = cci.embed(px)
        stop("the texts")
        text_embeds = model.encode_text(texts)
    t = len(texts)
    repeated = ClusterEmbeddings(
        image_embeds=emb.image_embeds.expand(t, -1),
        masked_embeds=emb.masked_embeds.expand(t, -1, -1),
        labels=emb.labels.expand(t, -1),
        grid_size=emb.grid_size,
        image_size=emb.image_size,
    )
    stop("the similarity drops")
    out = cci.explain_embeddings(repeated, text_embeds)
    gh, gw = emb.grid_size
    cluster_map = label_overlay(image, emb.labels[0].reshape(gh, gw).numpy())
    gallery = []
    for i in range(t):
        stop(f"the overlay of text {i + 1}")
        gallery.append(
            (overlay_heatmap(image, out.maps[i].numpy()), f"CCI: {texts[i]} (cos {float(out.similarity[i]):.3f})")
        )
    for name in baselines:
        stop(f"the {name} baseline")
        heat = build_explainer(name, model.model)(px, text_embeds[:1]).maps[0]
        gallery.append((overlay_heatmap(image, heat), baseline_caption(name, texts[0])))
    table = [
        [texts[i], k, round(float(out.weights[i, k]), 4), round(float(out.drops[i, k]), 5)]
        for i in range(t)
        for k in range(out.weights.shape[1])
    ]
    notes = [WORLD_ONLY] if path and not (model_name or "").strip() else []
    return {
        "image": image,
        "cluster_map": cluster_map,
        "gallery": gallery,
        "table": table,
        "similarity": [float(s) for s in out.similarity],
        "notes": notes,
    }
