"""Configuration of ``concept-grounding bench``, saved beside its results."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from ..models.train_config import DEFAULT_THREADS, TrainConfig
from ..settings import nested, setting
from ..validators import choice_of, existing_dir, nonnegative_float, nonnegative_int, positive_int
from ..world.config import WorldConfig

__all__ = ["BenchConfig", "MODEL_VARIANTS", "check_classes"]


#: ``BenchConfig.concepts`` values
CONCEPT_SETS = ("cbm_112", "rendered", "all")
#: The bench's default world: 64 px, SUB's 33 classes, seed 0, the default label noise.
BENCH_WORLD = WorldConfig(image_size=64)
#: Keys of ``config.json``, in the order of the files written before the world was nested.
SAVED_KEYS: tuple[str, ...] = (
    "image_size",
    "train_per_class",
    "test_per_class",
    "sub_per_pairing",
    "concepts",
    "epochs",
    "concept_loss_weight",
    "models",
    "posthoc",
    "clip",
    "clip_epochs",
    "cub_root",
    "sub",
    "min_class_count",
    "clip_model",
    "seed",
    "backbone",
    "backbone_weights",
    "deviation_rate",
    "classes",
    "threads",
    "clip_pretrained",
)
#: The world's drawing settings, saved only when a config changes them.
_WORLD_DRAWING = ("pose", "zoom", "scene")

#: Fewest world classes a bench run takes: a class predictor needs two, and s+ is measured on
#: attributes a class lacks but another class shows (with one class no S+ is ever a concept).
MIN_CLASSES = 2


def check_classes(classes: Sequence[str] | None, name: str = "classes") -> None:
    """Raise ``ValueError`` naming ``name`` unless ``classes`` is ``None`` (SUB's 33) or names
    at least :data:`MIN_CLASSES` different classes.

    >>> check_classes(["017.Cardinal"])
    Traceback (most recent call last):
    ...
    ValueError: classes: a bench run needs at least 2 different classes (s+ is measured on attributes
    another class shows), got 1: ['017.Cardinal']
    """
    if classes is not None and len(set(classes)) < MIN_CLASSES:
        raise ValueError(
            f"{name}: a bench run needs at least {MIN_CLASSES} different classes (s+ is measured on "
            f"attributes another class shows), got {len(set(classes))}: {list(classes)}"
        )


@dataclass(frozen=True)
class ModelVariant:
    """How one binary concept model of the SUB paper's Table 1 is trained.

    Attributes:
        family: ``"cbm"`` (Koh et al.) or ``"cem"`` (Zarlenga et al.).
        labels: ``"class"`` (class-level CBM majority vote), ``"image"`` (per-image
            concept supervision), or their annotator-certainty weighted soft forms
            ``"class_soft"`` / ``"image_soft"`` (:func:`~.data.certainty_soft_labels`).
        mode: CBM training mode, ``"independent"``, ``"sequential"`` or ``"joint"``
            (``None`` for a CEM).
        bottleneck: ``"soft"`` probabilities or ``"hard"`` 0/1 concepts feed the label predictor.
        per_concept: one grouped-conv concept predictor per concept (the small CNN only).
    """

    family: Literal["cbm", "cem"]
    labels: Literal["class", "image", "class_soft", "image_soft"]
    mode: Literal["independent", "sequential", "joint"] | None = None
    bottleneck: Literal["soft", "hard"] = "soft"
    per_concept: bool = False


#: Binary concept models of the SUB paper's Table 1: name -> how it is trained.
MODEL_VARIANTS: Mapping[str, ModelVariant] = MappingProxyType(
    {
        "CBM (ind.)": ModelVariant("cbm", "class", "independent", "hard"),
        "CBM (seq.)": ModelVariant("cbm", "class", "sequential", "hard"),
        "CBM (joint)": ModelVariant("cbm", "class", "joint", "soft"),
        "CBM (per c.)": ModelVariant("cbm", "class", "independent", "hard", per_concept=True),
        "CEM": ModelVariant("cem", "class"),
        "CBM (ind., per-img.)": ModelVariant("cbm", "image", "independent", "hard"),
        "CBM (joint, per-img.)": ModelVariant("cbm", "image", "joint", "soft"),
        "CBM (ind., soft per-class)": ModelVariant("cbm", "class_soft", "independent", "hard"),
        "CBM (joint, soft per-class)": ModelVariant("cbm", "class_soft", "joint", "soft"),
        "CBM (ind., soft per-img.)": ModelVariant("cbm", "image_soft", "independent", "hard"),
        "CBM (joint, soft per-img.)": ModelVariant("cbm", "image_soft", "joint", "soft"),
    }
)


@dataclass
class BenchConfig:
    """Everything a bench run depends on.

    Attributes:
        world: the bird world's :class:`~concept_grounding.world.WorldConfig`, a nested config (default
            :data:`BENCH_WORLD`): its ``class_names`` are the world's classes (CUB folder names;
            ``None``: SUB's 33) and ``deviation_rate`` its label noise. Two of its settings
            serve the whole run, on real data too: ``image_size`` is the side (px) every model
            sees (the world is rendered at it; real CUB images are resized to it) and ``seed``
            seeds the world and every training run. On real CUB (``cub_root``) the rest of the
            world is unused.
        train_per_class, test_per_class: world images per class and split.
        sub_per_pairing: world counterfactuals per (class, substituted attribute).
        concepts: the concept set, ``"cbm_112"`` (Koh et al.'s 112; on the world, those it
            renders) or ``"rendered"`` (every attribute the world draws) or ``"all"``.
        epochs: image-side training epochs of every concept model.
        concept_loss_weight: ``lambda`` of joint CBMs and CEMs.
        models: keys of :data:`MODEL_VARIANTS` to train.
        posthoc, clip: also run the post-hoc CBM analysis (Aysel et al.) and the
            open-vocabulary evaluation (SUB Table 2).
        cub_root, sub: real data (``load_cub`` / ``load_sub`` sources) instead of the world.
        min_class_count: CBM rule on real data: keep class-level attributes on for at least
            this many classes (``None`` keeps all; use it for small class subsets).
        clip_model: a named open_clip / transformers model (or local path), or several, to
            evaluate in Table 2 beside the small world CLIP (:meth:`named_clips`).
        clip_pretrained: the weights tag of each open_clip ``clip_model`` (one for all, or one
            per model, ``None`` for the others; an architecture without one is refused, never
            scored with random weights; ``"random"`` asks for them).
        backbone: backbone of every concept model and of the post-hoc CBM: ``"cnn"`` (the
            small CNN), or a standard CUB backbone ``"resnet18"``, ``"resnet50"``,
            ``"inception_v3"``, ``"timm:<name>"`` (Koh et al.'s augmentation and 224 / 299 px
            crops inside; give ``world.image_size`` about 8/7 of the crop), or such a config dict
            (``{"kind": "resnet18", "crop_size": 112}``), initialised from
            ``backbone_weights`` (a local file or Hub id) or at random.
        threads: CPU threads of the whole run (torch and BLAS), fixed rather than the
            machine's core count so that the same seed gives the same ``results.json``
            (see :func:`~concept_grounding.models.training.reproducible`).
        out: the run folder the job writes into as it goes (``config.json``, the models, the
            post-hoc CBM's figures), so that an interrupted run keeps its work; the command's
            ``--out``. Not saved in ``config.json`` and not compared (a run's configuration
            does not depend on where it is written).

    ``config.json`` (:meth:`to_dict`) keeps the flat keys of the files written before the world
    was nested: ``image_size``, ``seed``, ``deviation_rate`` and ``classes`` in their old places.
    """

    world: WorldConfig = nested(WorldConfig, default=BENCH_WORLD)
    train_per_class: int = setting(96, "world training images per class", parse=positive_int)
    test_per_class: int = setting(8, "world test images per class", parse=positive_int)
    sub_per_pairing: int = setting(1, "world SUB counterfactuals per (class, attribute) pairing", parse=positive_int)
    concepts: str = setting(
        "cbm_112",
        "the concept set: Koh et al.'s 112 (on the world, those it renders), every "
        "attribute the world renders, or all 312",
        choices=CONCEPT_SETS,
    )
    epochs: int = setting(8, "training epochs of the concept models", parse=positive_int)
    concept_loss_weight: float = setting(
        1.0, "weight of the concept loss in the joint CBM and the CEM", parse=nonnegative_float
    )
    models: tuple[str, ...] = setting(
        tuple(MODEL_VARIANTS),
        f"Table 1 variants (default: all of {list(MODEL_VARIANTS)})",
        parse=choice_of(MODEL_VARIANTS, "model variant"),
        nargs="*",
        metavar="NAME",
        convert=tuple,
    )
    posthoc: bool = setting(True, "skip the post-hoc CBM analysis", flag="--no-posthoc", action="store_false")
    clip: bool = setting(True, "skip Table 2 (open-vocabulary models)", flag="--no-clip", action="store_false")
    clip_epochs: int = setting(10, "training epochs of the world CLIP", parse=positive_int)
    cub_root: str | None = setting(
        None,
        "a CUB_200_2011 folder (load_cub) instead of the world (default: the world)",
        parse=existing_dir,
        convert=str,
    )
    sub: str | None = setting(
        None,
        "SUB source: with --cub-root 'Jessica-bader/SUB' or a local copy; without it a "
        "curated SUB of the bird world's classes (curate's dataset folder), scored after "
        "training on the world (default: the world's own counterfactuals)",
    )
    min_class_count: int | None = setting(
        10, "with --cub-root: keep class-level attributes on for >= this many classes (CBM rule)", parse=nonnegative_int
    )
    clip_model: str | tuple[str, ...] | None = None
    backbone: str | dict = setting(
        "cnn",
        "cnn (small CNN), resnet18, resnet50, inception_v3 or timm:<name> (CUB augmentation inside)",
        manifest_key="",
    )
    backbone_weights: str | None = setting(
        None,
        "initial backbone weights: a local file or Hub id (default: the backbone's own initialisation)",
        manifest_key="",
    )
    threads: int = DEFAULT_THREADS
    clip_pretrained: str | tuple[str | None, ...] | None = None
    out: Path | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        unknown = [m for m in self.models if m not in MODEL_VARIANTS]
        if unknown:
            raise ValueError(f"models: unknown variant(s) {unknown}; known: {list(MODEL_VARIANTS)}")
        kind = self.backbone.get("kind", "cnn") if isinstance(self.backbone, dict) else self.backbone
        if kind not in ("cnn", "vit"):
            from ..models.backbone import backbone_config

            backbone_config(self.backbone)  # ValueError naming an unknown kind (standard kinds build nothing)
            if any(MODEL_VARIANTS[m].per_concept for m in self.models):
                raise ValueError(
                    f"backbone {self.backbone!r}: the per-concept CBM needs the small CNN (one grouped conv "
                    "per concept); leave 'CBM (per c.)' out of models"
                )
        if self.concepts not in CONCEPT_SETS:
            raise ValueError(f"concepts must be 'cbm_112', 'rendered' or 'all', got {self.concepts!r}")
        for name in ("train_per_class", "test_per_class", "sub_per_pairing", "epochs", "threads"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        check_classes(self.world.class_names, "world.class_names")
        self.models = tuple(self.models)

    @property
    def on_world(self) -> bool:
        return self.cub_root is None

    @property
    def train(self) -> TrainConfig:
        """The training knobs every concept model of the run shares (image-side epochs, seed,
        threads); each model keeps its own learning rate and batch size unless given here."""
        return TrainConfig(epochs=int(self.epochs), seed=int(self.world.seed), threads=int(self.threads))

    def named_clips(self) -> list[tuple[str, str | None]]:
        """``(name, weights tag)`` of every Table 2 model named by ``clip_model``.

        >>> BenchConfig(clip_model=("ViT-B-32", "org/siglip"), clip_pretrained=("openai", None)).named_clips()
        [('ViT-B-32', 'openai'), ('org/siglip', None)]
        >>> BenchConfig(clip_model="ViT-B-32", clip_pretrained="openai").named_clips()
        [('ViT-B-32', 'openai')]
        """
        if not self.clip_model:
            return []
        names = (self.clip_model,) if isinstance(self.clip_model, str) else tuple(self.clip_model)
        tags = self.clip_pretrained
        tags = (tags,) * len(names) if tags is None or isinstance(tags, str) else tuple(tags)
        if len(tags) != len(names):
            raise ValueError(f"clip_pretrained: {len(tags)} weights tags for {len(names)} clip_model names")
        return list(zip(names, tags))

    def to_dict(self) -> dict[str, Any]:
        """The saved form (``config.json``): flat keys in :data:`SAVED_KEYS` order, the world's
        ``class_names`` as ``classes``; its ``pose`` / ``zoom`` / ``scene`` follow only when not
        the defaults (a bench world never changes them)."""
        own = {k: v for k, v in asdict(self).items() if k not in ("world", "out")}
        w = self.world
        world = {
            "image_size": w.image_size,
            "seed": w.seed,
            "deviation_rate": w.deviation_rate,
            "classes": list(w.class_names) if w.class_names is not None else None,
        }
        drawing = {k: getattr(w, k) for k in _WORLD_DRAWING if getattr(w, k) != getattr(BENCH_WORLD, k)}
        flat = {**own, **world}
        return {**{k: flat.pop(k) for k in SAVED_KEYS}, **flat, **drawing}  # a newer field after the old keys

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> BenchConfig:
        """Inverse of :meth:`to_dict` (JSON lists back to tuples; unknown keys refused, but for
        the unread ``extra`` of files written before it was removed)."""
        values = {k: v for k, v in values.items() if k != "extra"}
        world_keys = {"image_size", "seed", "deviation_rate", "classes", *_WORLD_DRAWING}
        known = ({f.name for f in fields(cls)} - {"world", "out"}) | world_keys
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"config.json: unknown key(s) {unknown}")
        world = {("class_names" if k == "classes" else k): v for k, v in values.items() if k in world_keys}
        if world.get("class_names") is not None:
            world["class_names"] = tuple(world["class_names"])
        own = {
            k: tuple(v) if k in ("models", "clip_model", "clip_pretrained") and isinstance(v, list) else v
            for k, v in values.items()
            if k not in world_keys
        }
        return cls(world=replace(BENCH_WORLD, **world), **own)

    def save(self, path: Path) -> None:
        from ..fileio import atomic_write_bytes

        atomic_write_bytes(path, json.dumps(self.to_dict(), indent=2).encode())
