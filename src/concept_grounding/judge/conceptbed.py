"""ConceptBed's judges (Sec. 3.2, App. F, Table 6), trained and validated on exact world truth.

Three judges, each trained on world renders at the concepts' setting (canonical pose, plain
scene, 32 px) that include every held-out species and style, and validated on held-out renders
(another block of sample indices) before any CCD is computed (docs/guide/conceptbed.md):

* ``conceptbed-species``: a :class:`ClassifierJudge` over the world's CUB classes (objects,
  fine-grained objects);
* ``conceptbed-style``: a :class:`ClassifierJudge` over PACS' four styles
  (:data:`~concept_grounding.world.styles.STYLES`), trained on stylised renders;
* ``conceptbed-attributes``: the project's :class:`~concept_grounding.models.ConceptEmbeddingModel`
  (the paper's CEM for CUB), whose concept head gives each attribute's probability; its
  attributes are the world-rendered ones of the CBM-112 subset. Validation: balanced accuracy
  (mean of the true-positive and true-negative rates) of ``p > 0.5`` against exact attributes.

Capacities (Table 8): ``small`` / ``medium`` / ``large`` :class:`~concept_grounding.models.SmallCNN`
widths (:data:`CAPACITIES`). A CCD from a judge below :data:`CONCEPTBED_BAR` is refused
(:func:`require_valid`). Trained judges are cached under a folder (``save_pretrained`` + the
validation in ``judge.json``), keyed by everything that makes them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn

from ..errors import UsageError
from ..models import ConceptEmbeddingModel, ConceptTensors, build_backbone, train_cem
from ..models.base import HUB_KWARGS
from ..models.training import fit, reproducible
from ..world import BirdWorld, WorldConfig
from ..world.styles import STYLES, stylise
from .base import JudgeReport, as_image_array, to_unit
from .conceptbed_spec import CAPACITIES, CONCEPTBED_BAR, KINDS, TRAIN_BLOCK, VALIDATION_BLOCK, ConceptBedJudgeSpec
from .registry import register_judge

__all__ = [
    "CAPACITIES",
    "CONCEPTBED_BAR",
    "KINDS",
    "ConceptBedJudgeSpec",
    "ClassifierJudge",
    "ConceptBedJudge",
    "train_conceptbed_judge",
    "load_or_train",
    "require_valid",
    "conceptbed_world",
]


class ClassifierJudge(nn.Module, PyTorchModelHubMixin, **HUB_KWARGS, tags=["conceptbed-judge"]):
    """A :class:`~concept_grounding.models.SmallCNN` and a linear head: images ``(B, 3, H, W)`` in
    [0, 1] -> logits ``(B, num_classes)``."""

    def __init__(self, num_classes: int, channels: Sequence[int] = CAPACITIES["medium"]) -> None:
        super().__init__()
        channels = [int(c) for c in channels]
        self.backbone = build_backbone({"kind": "cnn", "channels": channels, "strides": [1, 2, 2][: len(channels)]})
        self.head = nn.Linear(channels[-1], int(num_classes))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(images).pooled)


def conceptbed_world(spec: ConceptBedJudgeSpec) -> BirdWorld:
    """The world a judge of ``spec`` reads: its classes (all 200 CUB classes by default),
    canonical pose, plain scene."""
    from ..vocabulary import load_vocabulary

    classes = tuple(spec.classes) if spec.classes else tuple(load_vocabulary().classes)
    return BirdWorld(
        WorldConfig(image_size=spec.image_size, class_names=classes, seed=spec.seed, pose="canonical", scene="plain")
    )


@dataclass
class ConceptBedJudge:
    """A trained ConceptBed judge and its validation.

    Attributes:
        spec: how it was made.
        model: a :class:`ClassifierJudge` or a CEM (eval mode).
        accuracy: validation accuracy on held-out renders (balanced, for ``attributes``).
        names: the class names (``attributes``: the attribute names).
        attributes: vocabulary indices of the attribute judge's concepts (``()`` otherwise).
    """

    spec: ConceptBedJudgeSpec
    model: nn.Module
    accuracy: float
    names: tuple[str, ...]
    attributes: tuple[int, ...] = ()
    bar: float = CONCEPTBED_BAR

    @property
    def name(self) -> str:
        return f"conceptbed-{self.spec.kind}"

    @property
    def head_sizes(self) -> dict[str, int]:
        """One head named by the kind: ``K`` classes, styles or attributes."""
        return {self.spec.kind: len(self.names)}

    @torch.no_grad()
    def scores(self, images: np.ndarray | Sequence, batch_size: int = 256) -> np.ndarray:
        """``(N, H, W, 3)`` uint8 -> ``(N, K)`` float64: the softmax over classes, or (``attributes``)
        each attribute's probability. ``batch_size`` images per forward pass."""
        images = as_image_array(images)
        parts = []
        for start in range(0, len(images), batch_size):
            out = self.model(to_unit(images[start : start + batch_size]))
            parts.append(out.concept_probs if self.spec.kind == "attributes" else torch.softmax(out, dim=-1))
        return torch.cat(parts).double().numpy() if parts else np.zeros((0, len(self.names)))

    @property
    def report(self) -> JudgeReport:
        """Its last validation as the :class:`~.base.JudgeReport` printed beside its verdicts."""
        return JudgeReport(self.name, {self.spec.kind: self.accuracy}, self.bar)

    def probabilities(self, images: np.ndarray | Sequence) -> dict[str, np.ndarray]:
        """``{kind: (N, K)}`` (:meth:`scores`)."""
        return {self.spec.kind: self.scores(images)}

    def validate(self, world: BirdWorld | None = None, per_class: int = 2) -> JudgeReport:
        """Held-out accuracy (balanced for ``attributes``) on ``per_class`` renders per class of
        ``world`` (default: :func:`conceptbed_world`); sets :attr:`accuracy`."""
        world = world or conceptbed_world(self.spec)
        if self.spec.kind == "style":
            x, y = _style_data(world, per_class, VALIDATION_BLOCK)
            self.accuracy = float((self.scores(x).argmax(1) == y).mean())
        elif self.spec.kind == "species":
            x, y, _ = _species_data(world, per_class, VALIDATION_BLOCK)
            self.accuracy = float((self.scores(x).argmax(1) == y).mean())
        else:
            x, _, attrs = _species_data(world, per_class, VALIDATION_BLOCK)
            truth = attrs[:, list(self.attributes)].astype(bool)
            said = self.scores(x) > 0.5
            self.accuracy = float(0.5 * (said[truth].mean() + (~said[~truth]).mean()))
        return JudgeReport(self.name, {self.spec.kind: self.accuracy}, self.bar, len(x))

    def save(self, folder: Path) -> None:
        self.model.save_pretrained(folder)
        (folder / "judge.json").write_text(
            json.dumps(
                {
                    "spec": asdict(self.spec),
                    "accuracy": self.accuracy,
                    "names": list(self.names),
                    "attributes": list(self.attributes),
                },
                indent=1,
            ),
            encoding="utf-8",
        )


def attribute_indices(world: BirdWorld) -> tuple[int, ...]:
    """The attribute judge's concepts: world-rendered attributes of the CBM-112 subset."""
    return tuple(sorted(set(world.rendered_attributes) & set(world.vocab.cbm_112)))


def _species_data(world: BirdWorld, per_class: int, block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(images, labels, (N, 312) exact attributes) of ``per_class`` renders of every class."""
    indices = [c + (block + k) * world.num_classes for k in range(per_class) for c in range(world.num_classes)]
    samples = list(world.samples(indices))
    return (
        np.stack([s.image for s in samples]),
        np.array([s.label for s in samples]),
        np.stack([s.attributes for s in samples]),
    )


def _style_data(world: BirdWorld, per_species: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    images, labels = [], []
    for k in range(per_species):
        for c in range(world.num_classes):
            index = c + (block + k) * world.num_classes
            style = (c + k) % len(STYLES)
            images.append(stylise(world.sample(index).image, STYLES[style], seed=index))
            labels.append(style)
    return np.stack(images), np.array(labels)


def train_classifier(
    spec: ConceptBedJudgeSpec, images: np.ndarray, labels: np.ndarray, num_classes: int, progress: bool
) -> ClassifierJudge:
    """A :class:`ClassifierJudge` fitted by the shared :func:`~concept_grounding.models.training.fit`."""
    with reproducible(spec.seed):
        model = ClassifierJudge(num_classes, CAPACITIES[spec.capacity])
        fit(
            lambda b: nn.functional.cross_entropy(model(b[0]), b[1]),
            model.parameters(),
            (to_unit(images), torch.from_numpy(labels).long()),
            epochs=spec.epochs,
            batch_size=64,
            lr=3e-3,
            schedule="onecycle",
            seed=spec.seed,
            module=model,
            desc=f"{spec.kind} judge",
            progress=progress,
        )
    return model.eval()


def train_conceptbed_judge(
    spec: ConceptBedJudgeSpec, world: BirdWorld | None = None, progress: bool = False
) -> ConceptBedJudge:
    """Train the judge ``spec`` describes on ``world`` (default :func:`conceptbed_world`) and
    validate it on held-out renders (module docstring)."""
    world = world or conceptbed_world(spec)
    if spec.kind == "style":
        x, y = _style_data(world, max(1, spec.per_class // 4), TRAIN_BLOCK)
        judge = ConceptBedJudge(spec, train_classifier(spec, x, y, len(STYLES), progress), 0.0, STYLES)
    elif spec.kind == "species":
        x, y, _ = _species_data(world, spec.per_class, TRAIN_BLOCK)
        judge = ConceptBedJudge(spec, train_classifier(spec, x, y, world.num_classes, progress), 0.0, world.class_names)
    else:
        x, y, attrs = _species_data(world, spec.per_class, TRAIN_BLOCK)
        cols = list(attribute_indices(world))
        names = tuple(world.vocab.attributes[i] for i in cols)
        tensors = ConceptTensors(
            to_unit(x),
            torch.from_numpy(attrs[:, cols]).float(),
            torch.from_numpy(y).long(),
            tuple(cols),
            names,
            world.class_names,
        )
        with reproducible(spec.seed):
            backbone = {"kind": "cnn", "channels": list(CAPACITIES[spec.capacity]), "strides": [1, 2, 2]}
            model = train_cem(
                tensors,
                epochs=spec.epochs,
                seed=spec.seed,
                progress=progress,
                augment=False,
                batch_size=64,
                backbone=backbone,
            )
        judge = ConceptBedJudge(spec, model, 0.0, names, tuple(cols))
    judge.validate(world, 2 if spec.kind == "style" else 5)
    return judge


def load_or_train(
    spec: ConceptBedJudgeSpec, cache: str | Path | None, world: BirdWorld | None = None, progress: bool = False
) -> ConceptBedJudge:
    """The judge from ``cache / spec.key`` if there, else trained (and cached once it passes
    :data:`CONCEPTBED_BAR`, so a failing judge leaves nothing behind)."""
    folder = None if cache is None else Path(cache) / spec.key
    if folder is not None and (folder / "judge.json").is_file():
        meta = json.loads((folder / "judge.json").read_text(encoding="utf-8"))
        cls: Any = ConceptEmbeddingModel if spec.kind == "attributes" else ClassifierJudge
        model = cls.from_pretrained(str(folder)).eval()
        return ConceptBedJudge(spec, model, float(meta["accuracy"]), tuple(meta["names"]), tuple(meta["attributes"]))
    judge = train_conceptbed_judge(spec, world, progress)
    if folder is not None and judge.accuracy >= CONCEPTBED_BAR:
        folder.mkdir(parents=True, exist_ok=True)
        judge.save(folder)
    return judge


def require_valid(judge: ConceptBedJudge, argument: str = "--oracle-per-class") -> ConceptBedJudge:
    """``judge`` if its validation accuracy reaches :data:`CONCEPTBED_BAR`; else a one-line
    :class:`~concept_grounding.errors.UsageError` naming ``argument`` (no CCD from it)."""
    if judge.accuracy < CONCEPTBED_BAR:
        raise UsageError(
            f"the {judge.spec.kind} judge ({judge.spec.capacity}) validates at {judge.accuracy:.1%} "
            f"on held-out renders, below {CONCEPTBED_BAR:.0%}: its CCD is refused",
            argument=argument,
            hint="train it on more renders or epochs",
        )
    return judge


def _factory(kind: str):
    def create(
        cache: str | Path | None = None,
        capacity: str = "medium",
        per_class: int = 40,
        epochs: int = 8,
        seed: int = 0,
        image_size: int = 32,
        classes: Sequence[str] | None = None,
        progress: bool = False,
    ) -> ConceptBedJudge:
        spec = ConceptBedJudgeSpec(
            kind, capacity, per_class, epochs, seed, image_size, tuple(classes) if classes else None
        )
        return load_or_train(spec, cache, progress=progress)

    create.__doc__ = f"ConceptBed's {kind} judge of these settings, cached or trained (:func:`load_or_train`)."
    return create


for _kind in KINDS:
    register_judge(f"conceptbed-{_kind}")(_factory(_kind))
