"""``WorldJudge``: a small CNN that names a world bird's species and every attribute it shows.

Two heads over one trunk: species logits ``(N, C)`` and **trait** logits: for each of the
world's 16 base groups (:data:`~concept_grounding.world.species.BASE_GROUPS`: the part
colours, eye colour, bill shape, the patterns) a softmax over the values the world draws,
since a bird shows exactly one value per base group. CUB's attribute probabilities follow
(:meth:`WorldJudge.attribute_probabilities`): a base group's value has its softmax
probability; a derived group's value (``primary_color`` = back or wing colour, ...) is
present when any base behind it shows it, ``1 - prod_b (1 - p_b(v))``. So finding S+ in a
group and dropping S- are one decision, not two independent thresholds.

The trunk keeps the layout (its last feature map is flattened, not pooled), so a crown and a
forehead of the same colour are told apart by where they are; the judge is meant for one
drawing setting (the generator's canonical pose). Training (:func:`train_judge`) weights
each base group's values by inverse frequency and shifts images by up to one pixel, which
makes the verdicts robust to a generator's small misplacements.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn

from ..vocabulary import Vocabulary, load_vocabulary
from ..world.species import BASE_GROUPS, DERIVED_GROUPS, RENDERED_VALUES
from .base import JudgeReport, as_image_array, from_pretrained_quietly, to_unit
from .data import JudgeSet
from .registry import register_judge

if TYPE_CHECKING:
    from ..world import BirdWorld

__all__ = ["WorldJudge", "train_judge", "judge_images", "load_world_judge", "judge_validated_groups"]

#: The shipped judge of the shipped world Flux's world (package data; model card inside).
WORLD_JUDGE_DIR = Path(__file__).resolve().parent.parent / "assets" / "world_judge"

_MEAN = (0.5, 0.5, 0.5)
_STD = (0.25, 0.25, 0.25)


@dataclass
class JudgeOutput:
    """``species_logits`` ``(N, C)`` and ``trait_logits`` ``(N, T)`` of a :class:`WorldJudge`
    (``T``: the base groups' drawable values, concatenated in :data:`BASE_GROUPS` order)."""

    species_logits: torch.Tensor
    trait_logits: torch.Tensor


def layout_trunk(width: int) -> nn.Sequential:
    """``(N, 3, S, S)`` -> ``(N, 2 * width * (S / 4)**2)``: a 3x3 and a 1x1 convolution at full
    resolution (colour features of every pixel, so a one-pixel eye survives), max-pooled,
    then a 3x3 convolution at half resolution, max-pooled and flattened."""
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(inplace=True),
        nn.Conv2d(width, width, 1, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1, bias=False),
        nn.BatchNorm2d(2 * width),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Flatten(),
    )


class WorldJudge(nn.Module, PyTorchModelHubMixin, library_name="concept-grounding", tags=["world-judge"]):
    """Species and attribute judge of the bird world; images ``(N, 3, H, W)`` in [0, 1].

    Args:
        image_size: side of the square inputs in pixels (a multiple of 4).
        class_names: the ``C`` species (CUB folder names), in the world's order.
        width: channels at full resolution (doubled at half resolution).
    """

    def __init__(self, image_size: int, class_names: Sequence[str], width: int = 32):
        super().__init__()
        if image_size % 4:
            raise ValueError(f"image_size must be a multiple of 4, got {image_size}")
        self.image_size = int(image_size)
        self.class_names = tuple(class_names)
        self.traits = TraitLayout.of(load_vocabulary())
        self.trunk = layout_trunk(width)
        features = 2 * width * (image_size // 4) ** 2
        self.neck = nn.Sequential(nn.Dropout(0.2), nn.Linear(features, 256), nn.ReLU(inplace=True))
        self.species_head = nn.Linear(256, len(self.class_names))
        self.trait_head = nn.Linear(256, self.traits.size)
        self.register_buffer("mean", torch.tensor(_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(_STD).view(1, 3, 1, 1), persistent=False)

    def forward(self, images: torch.Tensor) -> JudgeOutput:
        if images.ndim != 4 or images.shape[1] != 3 or tuple(images.shape[-2:]) != (self.image_size,) * 2:
            raise ValueError(f"images must be (N, 3, {self.image_size}, {self.image_size}), got {tuple(images.shape)}")
        h = self.neck(self.trunk((images - self.mean) / self.std))
        return JudgeOutput(self.species_head(h), self.trait_head(h))

    @property
    def attribute_columns(self) -> tuple[int, ...]:
        """The CUB attribute indices (0-based, of 312) the judge gives probabilities for."""
        return self.traits.columns

    def attribute_probabilities(self, trait_logits: torch.Tensor) -> torch.Tensor:
        """``(N, 312)`` CUB attribute probabilities from trait logits (see the module
        docstring); 0.5 on attributes the world never draws."""
        return self.traits.attribute_probabilities(trait_logits)

    name = "world-judge"
    #: every raw measure of :func:`~.validation.validate_judge` must reach it (docs/tdg_world/validation.md)
    bar = 0.95

    @property
    def head_sizes(self) -> dict[str, int]:
        """``species``: the ``C`` classes; ``attributes``: CUB's 312 (0.5 off :attr:`attribute_columns`)."""
        return {"species": len(self.class_names), "attributes": self.traits.num_attributes}

    @torch.inference_mode()
    def probabilities(self, images: np.ndarray | Sequence, batch_size: int = 128) -> dict[str, np.ndarray]:
        """``species`` ``(N, C)`` softmax and ``attributes`` ``(N, 312)`` on uint8 ``(N, S, S, 3)``
        images (or PIL); ``batch_size`` 128 keeps a batch's activations in cache on the CPU."""
        arr = as_image_array(images, self.image_size)
        was_training = self.training
        self.eval()
        species, attributes = [], []
        try:
            for i in range(0, len(arr), batch_size):
                out = self(to_unit(arr[i : i + batch_size]))
                species.append(out.species_logits.softmax(1).numpy())
                attributes.append(self.attribute_probabilities(out.trait_logits).numpy())
        finally:
            self.train(was_training)
        if not species:
            return {k: np.zeros((0, n)) for k, n in self.head_sizes.items()}
        return {"species": np.concatenate(species), "attributes": np.concatenate(attributes)}

    def world(self) -> BirdWorld:
        """The world this judge reads: its classes at its image size, canonical pose, plain scene."""
        from ..world import BirdWorld, WorldConfig

        return BirdWorld(
            WorldConfig(image_size=self.image_size, class_names=self.class_names, pose="canonical", scene="plain")
        )

    def validate(self, world: BirdWorld | None = None, per_class: int = 2) -> JudgeReport:
        """:func:`~.validation.validate_judge` on held-out exact edits (one per SUB pairing) and
        ``per_class`` renders per class of ``world`` (default :meth:`world`), as a
        :class:`~.base.JudgeReport` of the raw measures; the full table is ``details["validation"]``."""
        from .validation import validate_judge

        validation = validate_judge(
            lambda ims: judge_images(self, ims), world or self.world(), renders_per_class=per_class
        )
        return JudgeReport(
            self.name,
            dict(validation.raw.overall),
            self.bar,
            validation.edits + validation.renders,
            {"validation": validation},
        )


@dataclass(frozen=True)
class TraitLayout:
    """Where each base group's values sit in the trait logits, and which CUB columns they
    and the derived groups fill.

    Attributes:
        slices: per base group, its ``slice`` of the trait logits.
        base_columns: per base group, the CUB attribute index of each of its values.
        derived: ``(CUB column, ((base group position, value position), ...))`` per derived value.
        num_attributes: 312.
    """

    slices: tuple[slice, ...]
    base_columns: tuple[tuple[int, ...], ...]
    derived: tuple[tuple[int, tuple[tuple[int, int], ...]], ...]
    num_attributes: int

    @classmethod
    def of(cls, vocab: Vocabulary) -> TraitLayout:
        slices, columns, start = [], [], 0
        for g in BASE_GROUPS:
            values = RENDERED_VALUES[g]
            slices.append(slice(start, start + len(values)))
            columns.append(tuple(vocab.attribute_index(f"has_{g}::{v}") for v in values))
            start += len(values)
        derived = []
        for group, bases in DERIVED_GROUPS.items():
            for v in RENDERED_VALUES[group]:
                sources = tuple(
                    (BASE_GROUPS.index(b), RENDERED_VALUES[b].index(v)) for b in bases if v in RENDERED_VALUES[b]
                )
                derived.append((vocab.attribute_index(f"has_{group}::{v}"), sources))
        return cls(tuple(slices), tuple(columns), tuple(derived), vocab.num_attributes)

    @property
    def size(self) -> int:
        return self.slices[-1].stop

    @property
    def columns(self) -> tuple[int, ...]:
        return tuple(sorted({c for cols in self.base_columns for c in cols} | {c for c, _ in self.derived}))

    def targets(self, attributes: np.ndarray) -> np.ndarray:
        """``(N, 16)`` value positions of each base group from ``(N, 312)`` one-hot base labels."""
        return np.stack([attributes[:, list(cols)].argmax(1) for cols in self.base_columns], axis=1)

    def attribute_probabilities(self, trait_logits: torch.Tensor) -> torch.Tensor:
        probs = [torch.softmax(trait_logits[:, s], dim=1) for s in self.slices]
        out = trait_logits.new_full((trait_logits.shape[0], self.num_attributes), 0.5)
        for p, cols in zip(probs, self.base_columns):
            out[:, list(cols)] = p
        for column, sources in self.derived:
            absent = trait_logits.new_ones(trait_logits.shape[0])
            for group, value in sources:
                absent = absent * (1 - probs[group][:, value])
            out[:, column] = 1 - absent
        return out


def judge_images(
    judge: WorldJudge, images: np.ndarray | Sequence, batch_size: int = 128
) -> tuple[np.ndarray, np.ndarray]:
    """The judge's verdict on uint8 ``(N, H, W, 3)`` images (or PIL images):
    ``(species argmax (N,), attribute probabilities (N, 312))``, 0.5 off its columns
    (the ``images -> verdict`` callable :func:`~.validation.validate_judge` takes)."""
    probs = judge.probabilities(images, batch_size)
    return probs["species"].argmax(1), probs["attributes"]


def shift_images(x: torch.Tensor, g: torch.Generator, pixels: int = 1) -> torch.Tensor:
    """Each image shifted by a random (dx, dy) in [-pixels, pixels], edges replicated."""
    if pixels <= 0:
        return x
    padded = nn.functional.pad(x, (pixels,) * 4, mode="replicate")
    h, w = x.shape[-2:]
    offsets = torch.randint(0, 2 * pixels + 1, (x.shape[0], 2), generator=g)
    return torch.stack([padded[i, :, dy : dy + h, dx : dx + w] for i, (dy, dx) in enumerate(offsets.tolist())])


def fit_judge(
    judge: nn.Module,
    loss: Callable[[tuple[torch.Tensor, ...]], torch.Tensor],
    tensors: tuple[torch.Tensor, ...],
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
    desc: str,
    progress: bool,
) -> None:
    """The judges' one training recipe through the shared :func:`~concept_grounding.models.training.fit`:
    AdamW (weight decay 1e-4), one-cycle decay with a 15 % warm-up, each image shifted by up to one pixel
    (:func:`shift_images`, its own generator seeded by ``seed``); ``tensors`` share their first axis."""
    from ..models.training import fit

    shifts = torch.Generator().manual_seed(int(seed))
    fit(
        loss,
        judge.parameters(),
        tensors,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        weight_decay=1e-4,
        schedule="onecycle",
        optimiser="adamw",
        warmup=0.15,
        augment=lambda x: shift_images(x, shifts),
        seed=seed,
        module=judge,
        desc=desc,
        progress=progress,
    )


def train_judge(
    data: JudgeSet,
    class_names: Sequence[str],
    epochs: int = 32,
    batch_size: int = 128,
    lr: float = 2e-3,
    seed: int = 0,
    progress: bool = True,
) -> WorldJudge:
    """Fit a :class:`WorldJudge` through the shared :func:`~concept_grounding.models.training.fit`:
    species cross-entropy on rows with a label >= 0 plus, on rows that train attributes
    (:attr:`JudgeSet.trains_attributes`), each base group's cross-entropy with inverse-frequency
    value weights; AdamW with one-cycle decay (15 % warm-up), images shifted by up to one pixel.
    Deterministic in ``seed``; the caller's global RNG state is restored."""
    x_all = to_unit(data.images)
    y_species = torch.from_numpy(data.labels).long()
    trains = torch.from_numpy(data.trains_attributes)
    with torch.random.fork_rng(devices=[]):  # initialisation draws from a seeded, restored global RNG
        torch.manual_seed(int(seed))
        judge = WorldJudge(data.images.shape[1], class_names)
    y_traits = torch.from_numpy(judge.traits.targets(data.attributes)).long()
    fit_judge(
        judge,
        _judge_loss(judge, y_traits[trains]),
        (x_all, y_traits, y_species, trains),
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        desc="judge",
        progress=progress,
    )
    return judge.eval()


def _value_weights(targets: torch.Tensor, size: int) -> torch.Tensor:
    """Inverse-frequency weights of ``size`` values (mean 1 over the values seen), clamped to [0.2, 5]."""
    counts = torch.bincount(targets, minlength=size).float()
    w = torch.where(counts > 0, counts.sum() / (counts.clamp(min=1) * (counts > 0).sum()), torch.zeros(()))
    return w.clamp(0.2, 5.0)


def _judge_loss(judge: WorldJudge, trained_traits: torch.Tensor):
    """``batch (images, trait targets, species labels, trains attributes) -> loss`` of :func:`train_judge`,
    the value weights taken from ``trained_traits`` (the trait targets of the rows that train them)."""
    slices = judge.traits.slices
    weights = [_value_weights(trained_traits[:, k], s.stop - s.start) for k, s in enumerate(slices)]

    def loss(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        images, y_traits, y_species, trains = batch
        out = judge(images)
        total = out.species_logits.new_zeros(())
        if trains.any():
            logits, targets = out.trait_logits[trains], y_traits[trains]
            total = total + sum(
                nn.functional.cross_entropy(logits[:, s], targets[:, k], weight=weights[k])
                for k, s in enumerate(slices)
            ) / len(slices)
        has_species = y_species >= 0
        if has_species.any():
            total = total + nn.functional.cross_entropy(out.species_logits[has_species], y_species[has_species])
        return total

    return loss


@register_judge("world-judge")
def load_world_judge(path: str | Path | None = None) -> WorldJudge:
    """A saved :class:`WorldJudge` folder (default: the shipped one, trained and validated on
    the shipped world Flux's world by ``benchmarks/bench_tdg_world.py``), in eval mode."""
    folder = Path(path) if path is not None else WORLD_JUDGE_DIR
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"path: {folder} holds no saved WorldJudge (config.json)")
    return from_pretrained_quietly(WorldJudge, folder)


def judge_validated_groups(path: str | Path | None = None) -> frozenset[str] | None:
    """The attribute groups a saved judge meets every validation bar on (its folder's
    ``validation.json``, written beside the weights by ``bench_tdg_world.py --export-judge``;
    default: the shipped judge); ``None`` when the folder records no validation. Verdicts on
    other groups are not findings."""
    file = (Path(path) if path is not None else WORLD_JUDGE_DIR) / "validation.json"
    if not file.is_file():
        return None
    return frozenset(json.loads(file.read_text())["validated_groups"])
