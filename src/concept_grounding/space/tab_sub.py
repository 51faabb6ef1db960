"""SUB explorer tab: world substitutions and a concept model's s+ / s- on them.

For a pairing (reference class, S+) the tab draws :data:`PER_PAIRING` held-out birds of
the class, substitutes S+ in each (exact world counterfactuals: S- are the class's
values of the same group, now absent), and reads a concept bottleneck model's concept
probabilities. The tallies are :func:`concept_grounding.metrics.sub_accuracy` (SUB
Sec. 5.5): s+ = share of images with p(S+) > 0.5, s- = share of (image, S-) pairs with
p(S-) <= 0.5.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ..bench.artifacts import model_slug
from .common import attribute_label, class_label, get_world, stopper, to_batch, world_concept_tensors
from .inputs import UserInputError, whole_number
from .resources import ResourceStore
from .shipped import ASSETS, shipped_record

__all__ = [
    "BATCH",
    "PER_PAIRING",
    "QUICK_VARIANT",
    "concept_probabilities",
    "pairing_choices",
    "concept_names",
    "explore",
    "build_concept_model",
]

#: Pairing shown first (a visible change: a black crown on a Cardinal).
DEFAULT_PAIRING = "017.Cardinal|has_crown_color::black"
#: Images per pairing shown and tallied.
PER_PAIRING = 8
#: Images per forward pass of the concept model: the work stops between passes when the visitor leaves.
BATCH = 2
#: The bench variant the quick build trains (per-image concepts, joint, soft bottleneck).
QUICK_VARIANT = "CBM (joint, per-img.)"
#: Artifact folders tried, in order (``concept-grounding bench`` slugs after ours).
ARTIFACT_NAMES = (
    "concept_model",
    *(model_slug(v) for v in (QUICK_VARIANT, "CBM (joint)", "CBM (ind., per-img.)", "CBM (ind.)")),
)
#: The default build's model, trained once and shipped (``ship_concept_model``): the Space
#: loads it in a second instead of training it for minutes; ``space_build.json`` records the
#: :class:`~.builds.SpaceBuild` it was trained with, and only that build loads it.
SHIPPED_MODEL = ASSETS / "space_concept_model"
#: How long the model takes to be ready (shown on the page); the Space prepares it at launch.
FIRST_USE = (
    "shipped with the package for the default build, ready in a second or two; other builds train "
    "it when the Space starts, minutes on a 2-core CPU"
)
#: First world index (in units of the class count) of the explorer's held-out birds.
HELD_OUT_START = 1000


def _vocab() -> Any:
    from ..vocabulary import load_vocabulary

    return load_vocabulary()


def concept_names() -> tuple[str, ...]:
    """The concept model's concepts: every value of every group SUB substitutes (181),
    so that both S+ and the removed S- have a column.

    >>> names = concept_names()
    >>> len(names), "has_crown_color::black" in names
    (181, True)
    """
    vocab = _vocab()
    groups = {vocab.group_of(a) for a in vocab.sub_substitutions.values()}
    return tuple(vocab.attributes[i] for g in sorted(groups) for i in vocab.groups[g])


def pairing_choices() -> list[tuple[str, str]]:
    """Dropdown ``(label, value)`` of the world's pairings; value ``"<class>|<attribute>"``."""
    from ..world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=32))
    return [(f"{class_label(c)} | {attribute_label(a)}", f"{c}|{a}") for c, a in world.default_pairings()]


def build_concept_model(store: ResourceStore) -> tuple[Any, str]:
    """``((CBM, input side in px), source)``: the first of :data:`ARTIFACT_NAMES` found in
    the artifacts folder, else the bench's :data:`QUICK_VARIANT` trained through
    :func:`~concept_grounding.bench.models.train_variant` on ``store.build``'s world birds
    (a few seconds at the default sizes)."""
    from ..models.cbm import ConceptBottleneckModel

    folder = store.find_artifact(*ARTIFACT_NAMES)
    if folder is not None:
        model = ConceptBottleneckModel.from_pretrained(str(folder))
        return (model.eval(), store.artifact_image_size()), f"loaded from {folder}"
    build = store.build
    if shipped_build() == asdict(build):
        model = ConceptBottleneckModel.from_pretrained(str(SHIPPED_MODEL))
        return (model.eval(), build.concept_size), (
            f"joint CBM shipped with the package (the default build at seed "
            f"{build.seed}: {build.concept_per_class} world birds per class, "
            f"{build.concept_size} px, {build.concept_epochs} epochs)"
        )
    return train_concept_model(store)


def train_concept_model(store: ResourceStore) -> tuple[Any, str]:
    """The quick build of :func:`build_concept_model`: :data:`QUICK_VARIANT` trained on
    ``store.build``'s world birds (minutes at the default sizes on 2 CPU cores)."""
    from ..bench.models import train_variant

    build = store.build
    columns = [_vocab().attribute_index(n) for n in concept_names()]
    tensors = world_concept_tensors(get_world(store), build.concept_per_class, columns, build.concept_size)
    model = train_variant(QUICK_VARIANT, tensors, build.concept_training())
    return (model.eval(), build.concept_size), (
        f"joint CBM trained on {len(tensors)} world birds ({build.concept_size} px, {build.concept_epochs} epochs)"
    )


def shipped_build() -> dict[str, Any] | None:
    """The :class:`~.builds.SpaceBuild` (as a dict) the shipped model was trained with, or ``None``."""
    return shipped_record(SHIPPED_MODEL)


def ship_concept_model(folder: str | Path = SHIPPED_MODEL, seed: int = 0) -> Path:
    """Train the default build's model (seed ``seed``) and save it with its build record into
    ``folder``: how ``assets/space_concept_model`` was made (minutes on 2 CPU cores)."""
    import json

    from ..models.backbone import drop_init_weights
    from .builds import SpaceBuild

    store = ResourceStore(None, seed=seed, build=SpaceBuild())
    (model, _), _ = train_concept_model(store)
    folder = Path(folder)
    drop_init_weights(model).save_pretrained(folder)
    (folder / "space_build.json").write_text(json.dumps(asdict(store.build), indent=1) + "\n")
    return folder


def concept_probabilities(
    model: Any, images: list[np.ndarray], size: int, stop: Callable[[str], None] = stopper(None)
) -> np.ndarray:
    """``(N, C)`` concept probabilities of ``N`` ``(H, W, 3)`` uint8 images at ``size`` px, in
    forward passes of :data:`BATCH` images with ``stop(...)`` before each (:func:`~.common.stopper`)."""
    import torch

    parts = []
    for start in range(0, len(images), BATCH):
        stop(f"images {start + 1}-{min(start + BATCH, len(images))} of {len(images)}")
        with torch.no_grad():
            parts.append(model(to_batch(images[start : start + BATCH], size)).concept_probs.numpy())
    return np.concatenate(parts)


def _parse_pairing(value: str) -> tuple[str, str]:
    if not value or "|" not in value:
        raise UserInputError("Pick a pairing (reference class | target attribute).")
    reference_class, attribute = value.split("|", 1)
    return reference_class, attribute


def explore(
    store: ResourceStore, pairing: str, index: int = 0, cancelled: Callable[[], bool] | None = None
) -> dict[str, Any]:
    """One pairing: image ``index`` before/after the substitution and the pairing's tallies.

    ``cancelled`` is asked before each bird is drawn and before each forward pass of
    :data:`BATCH` images; once it answers true the call stops with :class:`~.common.Cancelled`
    (the Space asks whether the visitor is still there).

    Returns:
        dict with ``original`` / ``edited`` ``(H, W, 3)`` uint8, ``table`` (list of rows
        ``[attribute, role, p(original), p(counterfactual), counted as correct]``),
        ``summary`` (Markdown with s+, s- and chance), and ``result`` (the
        :func:`~concept_grounding.metrics.sub_accuracy` dict of the pairing's images).
    """
    reference_class, attribute = _parse_pairing(pairing)
    index = whole_number(index, "Image of the pairing", 0, PER_PAIRING - 1)
    world = get_world(store)
    if reference_class not in world.class_names:
        raise UserInputError(f"{reference_class!r} is not a class of the bird world.")
    label = list(world.class_names).index(reference_class)
    stop = stopper(cancelled)
    pairs = []
    for n, i in enumerate(world.class_indices(label, PER_PAIRING, start=HELD_OUT_START)):
        stop(f"bird {n + 1} of {PER_PAIRING}")
        try:
            pairs.append(world.counterfactual(world.sample(i), attribute))
        except ValueError as err:
            raise UserInputError(f"The world cannot make this substitution: {err}") from None
    stop("the concept model")
    model, size = store.get("concept_model", build_concept_model)
    edited_probs = concept_probabilities(model, [p.edited.image for p in pairs], size, stop)
    original_probs = concept_probabilities(model, [p.original.image for p in pairs], size, stop)
    names = list(getattr(model, "concept_names", None) or concept_names())
    from ..metrics.sub_accuracy import sub_accuracy

    result = sub_accuracy(
        edited_probs,
        [p.target_attribute for p in pairs],
        [list(p.removed_attributes) for p in pairs],
        concept_names=names,
        reference_classes=[reference_class] * len(pairs),
    )
    shown = pairs[index]
    rows = []
    for role, attrs in (("S+", [shown.target_attribute]), ("S-", list(shown.removed_attributes))):
        for a in attrs:
            if a not in names:
                rows.append([a, role, None, None, "model lacks this concept"])
                continue
            j = names.index(a)
            p_orig, p_edit = float(original_probs[index, j]), float(edited_probs[index, j])
            ok = p_edit > 0.5 if role == "S+" else p_edit <= 0.5
            rows.append([a, role, round(p_orig, 3), round(p_edit, 3), "yes" if ok else "no"])

    def fmt(x: float) -> str:
        return "n/a" if x is None or np.isnan(x) else f"{x:.2f}"

    summary = (
        f"**{class_label(reference_class)} with {attribute_label(attribute)}** "
        f"(removed: {', '.join(attribute_label(a) for a in shown.removed_attributes) or 'none'}) over "
        f"{len(pairs)} birds: **s+ = {fmt(result['s_plus'])}** (chance {fmt(result['chance_s_plus'])}), "
        f"**s- = {fmt(result['s_minus'])}** (chance {fmt(result['chance_s_minus'])})."
    )
    return {
        "original": shown.original.image,
        "edited": shown.edited.image,
        "table": rows,
        "summary": summary,
        "result": result,
    }
