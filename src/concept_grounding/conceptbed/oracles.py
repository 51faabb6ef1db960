"""ConceptBed's oracles (Sec. 3.2, App. F, Table 6), trained and validated on exact world truth.

Three oracles, each trained on world renders at the concepts' setting (canonical pose, plain
scene, 32 px) that include every held-out species and style, and validated on held-out renders
(another block of sample indices) before any CCD is computed:

* ``species``: a :class:`OracleClassifier` over all 200 CUB classes (objects, fine-grained objects);
* ``style``: a :class:`OracleClassifier` over PACS' four styles (:data:`~.styles.STYLES`),
  trained on stylised renders of all 200 species;
* ``attributes``: the project's :class:`~concept_grounding.models.ConceptEmbeddingModel` (the
  paper's CEM oracle for CUB), whose concept head gives each attribute's probability; its
  attributes are the world-rendered ones of the CBM-112 subset. Validation: balanced accuracy
  (mean of the true-positive and true-negative rates) of ``p > 0.5`` against each image's exact
  attributes.

Capacities (Table 8): ``small`` / ``medium`` / ``large`` :class:`~concept_grounding.models.SmallCNN`
widths (:data:`CAPACITIES`). A CCD from an oracle below :data:`ORACLE_BAR` is refused
(:func:`require_valid`). Trained oracles are cached under a folder (``save_pretrained`` + the
validation in ``oracle.json``), keyed by everything that makes them.
"""

from __future__ import annotations

import hashlib
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
from .concepts import BLOCKS, CAPACITIES, ORACLE_BAR, TASK_ORACLE, ConceptWorld
from .styles import STYLES, stylise

__all__ = ["CAPACITIES", "ORACLE_BAR", "KINDS", "OracleSpec", "OracleClassifier", "Oracle", "train_oracle",
           "load_or_train", "require_valid", "TASK_ORACLE"]

KINDS = ("species", "style", "attributes")


@dataclass(frozen=True)
class OracleSpec:
    """What makes an oracle (its cache key).

    Attributes:
        kind: one of :data:`KINDS`.
        capacity: a key of :data:`CAPACITIES`.
        per_class: training renders per species (``style``: per species and style, a quarter of it).
        epochs: training epochs.
        seed: world and training seed.
        image_size: render side in pixels.
        classes: the world's CUB classes (``None``: all 200; a subset for fast tests).
    """

    kind: str = "species"
    capacity: str = "medium"
    per_class: int = 40
    epochs: int = 8
    seed: int = 0
    image_size: int = 32
    classes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.capacity not in CAPACITIES:
            raise ValueError(f"capacity must be one of {tuple(CAPACITIES)}, got {self.capacity!r}")

    @property
    def key(self) -> str:
        """``species-medium-<8 hex>``: the cache folder's name."""
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.kind}-{self.capacity}-{digest}"


class OracleClassifier(nn.Module, PyTorchModelHubMixin, **HUB_KWARGS, tags=["conceptbed-oracle"]):
    """A :class:`~concept_grounding.models.SmallCNN` and a linear head: images ``(B, 3, H, W)`` in
    [0, 1] -> logits ``(B, num_classes)``."""

    def __init__(self, num_classes: int, channels: Sequence[int] = CAPACITIES["medium"]) -> None:
        super().__init__()
        channels = [int(c) for c in channels]
        self.backbone = build_backbone({"kind": "cnn", "channels": channels, "strides": [1, 2, 2][:len(channels)]})
        self.head = nn.Linear(channels[-1], int(num_classes))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(images).pooled)


def to_pixels(images: np.ndarray) -> torch.Tensor:
    """``(N, H, W, 3)`` uint8 -> ``(N, 3, H, W)`` float32 in [0, 1]."""
    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float() / 255.0


@dataclass
class Oracle:
    """A trained, validated oracle.

    Attributes:
        spec: how it was made.
        model: an :class:`OracleClassifier` or a CEM (eval mode).
        accuracy: validation accuracy on held-out renders (balanced, for ``attributes``).
        names: the class names (``attributes``: the attribute names).
        attributes: vocabulary indices of the attribute oracle's concepts (``()`` otherwise).
    """

    spec: OracleSpec
    model: nn.Module
    accuracy: float
    names: tuple[str, ...]
    attributes: tuple[int, ...] = ()

    @torch.no_grad()
    def probabilities(self, images: np.ndarray, batch_size: int = 256) -> np.ndarray:
        """``(N, H, W, 3)`` uint8 -> ``(N, K)`` float64: the softmax over classes, or (``attributes``)
        each attribute's probability. ``batch_size`` images per forward pass."""
        images = np.asarray(images)
        if images.ndim != 4 or images.shape[-1] != 3:
            raise ValueError(f"images must be (N, H, W, 3), got {images.shape}")
        parts = []
        for start in range(0, len(images), batch_size):
            out = self.model(to_pixels(images[start:start + batch_size]))
            parts.append(out.concept_probs if self.spec.kind == "attributes" else torch.softmax(out, dim=-1))
        return torch.cat(parts).double().numpy() if parts else np.zeros((0, len(self.names)))

    def save(self, folder: Path) -> None:
        self.model.save_pretrained(folder)
        (folder / "oracle.json").write_text(json.dumps({"spec": asdict(self.spec), "accuracy": self.accuracy,
                                                        "names": list(self.names), "attributes": list(self.attributes)},
                                                       indent=1), encoding="utf-8")


def attribute_indices(cw: ConceptWorld) -> tuple[int, ...]:
    """The attribute oracle's concepts: world-rendered attributes of the CBM-112 subset."""
    return tuple(sorted(set(cw.world.rendered_attributes) & set(cw.vocab.cbm_112)))


def _species_data(cw: ConceptWorld, per_class: int, block: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(images, labels, (N, 312) exact attributes) of ``per_class`` renders of every class."""
    w = cw.world
    indices = [c + (BLOCKS[block] + k) * w.num_classes for k in range(per_class) for c in range(w.num_classes)]
    samples = list(w.samples(indices))
    return (np.stack([s.image for s in samples]), np.array([s.label for s in samples]),
            np.stack([s.attributes for s in samples]))


def _style_data(cw: ConceptWorld, per_species: int, block: str) -> tuple[np.ndarray, np.ndarray]:
    w = cw.world
    images, labels = [], []
    for k in range(per_species):
        for c in range(w.num_classes):
            index = c + (BLOCKS[block] + k) * w.num_classes
            style = (c + k) % len(STYLES)
            images.append(stylise(w.sample(index).image, STYLES[style], seed=index))
            labels.append(style)
    return np.stack(images), np.array(labels)


def train_classifier(spec: OracleSpec, images: np.ndarray, labels: np.ndarray, num_classes: int,
                      progress: bool) -> OracleClassifier:
    with reproducible(spec.seed):
        model = OracleClassifier(num_classes, CAPACITIES[spec.capacity])
        fit(lambda b: nn.functional.cross_entropy(model(b[0]), b[1]), model.parameters(),
            (to_pixels(images), torch.from_numpy(labels).long()), epochs=spec.epochs, batch_size=64, lr=3e-3,
            schedule="onecycle", seed=spec.seed, module=model, desc=f"{spec.kind} oracle", progress=progress)
    return model.eval()


def train_oracle(spec: OracleSpec, cw: ConceptWorld | None = None, progress: bool = False) -> Oracle:
    """Train the oracle ``spec`` describes and validate it on held-out renders (module docstring)."""
    cw = cw or ConceptWorld(image_size=spec.image_size, seed=spec.seed, classes=spec.classes)
    if spec.kind == "style":
        x, y = _style_data(cw, max(1, spec.per_class // 4), "oracle_train")
        model = train_classifier(spec, x, y, len(STYLES), progress)
        oracle = Oracle(spec, model, 0.0, STYLES)
        vx, vy = _style_data(cw, 2, "oracle_val")
        oracle.accuracy = float((oracle.probabilities(vx).argmax(1) == vy).mean())
        return oracle
    x, y, attrs = _species_data(cw, spec.per_class, "oracle_train")
    vx, vy, vattrs = _species_data(cw, 5, "oracle_val")
    if spec.kind == "species":
        oracle = Oracle(spec, train_classifier(spec, x, y, cw.world.num_classes, progress), 0.0, cw.world.class_names)
        oracle.accuracy = float((oracle.probabilities(vx).argmax(1) == vy).mean())
        return oracle
    cols = list(attribute_indices(cw))
    names = tuple(cw.vocab.attributes[i] for i in cols)
    tensors = ConceptTensors(to_pixels(x), torch.from_numpy(attrs[:, cols]).float(), torch.from_numpy(y).long(),
                             tuple(cols), names, cw.world.class_names)
    with reproducible(spec.seed):
        model = train_cem(tensors, epochs=spec.epochs, seed=spec.seed, progress=progress, augment=False, batch_size=64,
                          backbone={"kind": "cnn", "channels": list(CAPACITIES[spec.capacity]), "strides": [1, 2, 2]})
    oracle = Oracle(spec, model, 0.0, names, tuple(cols))
    truth = vattrs[:, cols].astype(bool)
    said = oracle.probabilities(vx) > 0.5
    oracle.accuracy = float(0.5 * (said[truth].mean() + (~said[~truth]).mean()))
    return oracle


def load_or_train(spec: OracleSpec, cache: str | Path | None, cw: ConceptWorld | None = None,
                  progress: bool = False) -> Oracle:
    """The oracle from ``cache / spec.key`` if there, else trained (and cached once it passes
    :data:`ORACLE_BAR`, so a failing oracle leaves nothing behind)."""
    folder = None if cache is None else Path(cache) / spec.key
    if folder is not None and (folder / "oracle.json").is_file():
        meta = json.loads((folder / "oracle.json").read_text(encoding="utf-8"))
        cls: Any = ConceptEmbeddingModel if spec.kind == "attributes" else OracleClassifier
        model = cls.from_pretrained(str(folder)).eval()
        return Oracle(spec, model, float(meta["accuracy"]), tuple(meta["names"]), tuple(meta["attributes"]))
    oracle = train_oracle(spec, cw, progress)
    if folder is not None and oracle.accuracy >= ORACLE_BAR:
        folder.mkdir(parents=True, exist_ok=True)
        oracle.save(folder)
    return oracle


def require_valid(oracle: Oracle, argument: str = "--oracle-per-class") -> Oracle:
    """``oracle`` if its validation accuracy reaches :data:`ORACLE_BAR`; else a one-line
    :class:`~concept_grounding.errors.UsageError` naming ``argument`` (no CCD from it)."""
    if oracle.accuracy < ORACLE_BAR:
        raise UsageError(f"the {oracle.spec.kind} oracle ({oracle.spec.capacity}) validates at {oracle.accuracy:.1%} "
                         f"on held-out renders, below {ORACLE_BAR:.0%}: its CCD is refused",
                         argument=argument, hint="train it on more renders or epochs")
    return oracle
