"""``CompositionJudge``: how many birds, in which scene, facing which way, of which species.

The instrument behind ConceptBed's composition categories on the world (relation = the
scene, action = the facing, counting = the number of birds; :mod:`concept_grounding.world.composition`).
One trunk (the :class:`~.model.WorldJudge`'s, which keeps the layout) and four softmax heads,
trained on compositions of the varied world whose truth is exact, and validated on held-out
compositions before any verdict is used (:func:`validate_composition_judge`: accuracy per head,
bar :data:`COMPOSITION_BAR`). A head's verdict on an image is its argmax; its probability of the
asked value is the P(yes) of ConceptBed's existence question ("is there a bird in the sky?").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn

from ..world.composition import ACTIONS, COUNT_WORDS, composition_config
from ..world.config import BACKGROUNDS
from .base import JudgeReport, as_image_array, from_pretrained_quietly, to_unit
from .model import fit_judge, layout_trunk
from .registry import register_judge

if TYPE_CHECKING:
    from ..world import BirdWorld

__all__ = [
    "HEADS",
    "COMPOSITION_BAR",
    "CompositionJudge",
    "composition_set",
    "train_composition_judge",
    "validate_composition_judge",
    "ship_composition_judge",
    "load_composition_judge",
]

#: Head -> the values it tells apart, in logit order.
HEADS: dict[str, tuple] = {"count": tuple(COUNT_WORDS), "scene": BACKGROUNDS, "facing": tuple(ACTIONS)}
#: Held-out accuracy every head must reach before its verdicts are reported.
COMPOSITION_BAR = 0.95


class CompositionJudge(nn.Module, PyTorchModelHubMixin, library_name="concept-grounding", tags=["world-judge"]):
    """Count, scene, facing and species of a world composition; images ``(N, 3, S, S)`` in [0, 1].

    Args:
        image_size: input side in pixels (a multiple of 4).
        num_classes: species the ``species`` head names (the world's class order).
        width: channels at full resolution.
    """

    def __init__(self, image_size: int, num_classes: int, width: int = 32):
        super().__init__()
        if image_size % 4:
            raise ValueError(f"image_size must be a multiple of 4, got {image_size}")
        self.image_size, self.num_classes = int(image_size), int(num_classes)
        self.trunk = layout_trunk(width)
        self.neck = nn.Sequential(
            nn.Dropout(0.2), nn.Linear(2 * width * (image_size // 4) ** 2, 256), nn.ReLU(inplace=True)
        )
        sizes = {**{k: len(v) for k, v in HEADS.items()}, "species": self.num_classes}
        self.heads = nn.ModuleDict({k: nn.Linear(256, n) for k, n in sizes.items()})
        self.register_buffer("mean", torch.full((1, 3, 1, 1), 0.5), persistent=False)
        self.register_buffer("std", torch.full((1, 3, 1, 1), 0.25), persistent=False)

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        """head -> ``(N, values)`` logits."""
        if images.ndim != 4 or tuple(images.shape[1:]) != (3, self.image_size, self.image_size):
            raise ValueError(f"images must be (N, 3, {self.image_size}, {self.image_size}), got {tuple(images.shape)}")
        h = self.neck(self.trunk((images - self.mean) / self.std))
        return {k: head(h) for k, head in self.heads.items()}

    name = "composition-judge"
    bar = COMPOSITION_BAR

    @property
    def head_sizes(self) -> dict[str, int]:
        """``count`` 3 (1-3 birds), ``scene`` 5, ``facing`` 2, ``species`` the ``C`` classes."""
        return {k: head.out_features for k, head in self.heads.items()}

    @torch.inference_mode()
    def probabilities(self, images: np.ndarray | Sequence, batch_size: int = 64) -> dict[str, np.ndarray]:
        """head -> ``(N, values)`` softmax on uint8 ``(N, S, S, 3)`` images (or PIL);
        ``batch_size`` 64 keeps a batch's activations in cache on the CPU."""
        arr = as_image_array(images, self.image_size)
        self.eval()
        parts = [self(to_unit(arr[i : i + batch_size])) for i in range(0, len(arr), batch_size)]
        if not parts:
            return {k: np.zeros((0, n)) for k, n in self.head_sizes.items()}
        return {k: torch.cat([p[k] for p in parts]).softmax(-1).numpy() for k in parts[0]}

    def validate(self, world: BirdWorld | None = None, per_class: int = 2) -> JudgeReport:
        """Accuracy of the verdict heads (:data:`HEADS`: count, scene, facing) on ``per_class``
        held-out compositions per species of ``world`` (default: SUB's species at the judge's
        size). The ``species`` head gives no verdict (ConceptBed's concepts are species it never saw)."""
        from ..world import BirdWorld, WorldConfig

        world = world or BirdWorld(WorldConfig(image_size=self.image_size))
        data = composition_set(world, per_class, start=10_000, seed=1)
        accuracy = validate_composition_judge(self, data)
        return JudgeReport(self.name, {k: accuracy[k] for k in HEADS}, self.bar, len(data.images))


@dataclass(frozen=True)
class CompositionSet:
    """``images`` (N, S, S, 3) uint8 and per head the (N,) int targets (``count``: 0-2 for 1-3 birds)."""

    images: np.ndarray
    targets: dict[str, np.ndarray]


def composition_set(world, per_class: int, start: int = 0, seed: int = 0) -> CompositionSet:
    """``per_class`` compositions per species of ``world`` drawn in its varied scene and pose
    (samples ``start ..`` of each class), with 1-3 birds (drawn from ``seed``) and exact truth.

    >>> from concept_grounding.world import BirdWorld, WorldConfig
    >>> s = composition_set(BirdWorld(WorldConfig(image_size=32, class_names=("017.Cardinal",))), 3)
    >>> s.images.shape, sorted(s.targets)
    ((3, 32, 32, 3), ['count', 'facing', 'scene', 'species'])
    """
    from ..world import BirdWorld

    varied = BirdWorld(composition_config(world.config), world.vocab)
    rng = np.random.default_rng([seed, start, 303])
    comps = [
        varied.composition(i, int(rng.integers(1, 4)))
        for c in range(varied.num_classes)
        for i in varied.class_indices(c, per_class, start)
    ]
    return CompositionSet(
        images=np.stack([c.image for c in comps]),
        targets={
            "count": np.asarray([c.count - 1 for c in comps]),
            "scene": np.asarray([BACKGROUNDS.index(c.scene) for c in comps]),
            "facing": np.asarray([tuple(ACTIONS).index(c.facing) for c in comps]),
            "species": np.asarray([c.label for c in comps]),
        },
    )


def train_composition_judge(
    data: CompositionSet,
    num_classes: int,
    epochs: int = 20,
    batch_size: int = 128,
    lr: float = 3e-3,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = True,
) -> CompositionJudge:
    """Fit a :class:`CompositionJudge` through the shared :func:`~concept_grounding.models.training.fit`
    (sum of the heads' cross-entropies, AdamW, one-cycle with 15 % warm-up, one-pixel random
    shifts); deterministic in ``seed`` on the CPU; the caller's global RNG state is restored."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        judge = CompositionJudge(data.images.shape[1], num_classes).to(device)
    names = tuple(data.targets)
    x = to_unit(data.images).to(device)
    y = tuple(torch.as_tensor(data.targets[k], dtype=torch.long, device=device) for k in names)

    def loss(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        out = judge(batch[0])
        return sum(nn.functional.cross_entropy(out[k], target) for k, target in zip(names, batch[1:]))

    fit_judge(
        judge,
        loss,
        (x, *y),
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        desc="composition judge",
        progress=progress,
    )
    return judge.eval().cpu()


def validate_composition_judge(judge: CompositionJudge, data: CompositionSet) -> dict[str, float]:
    """Held-out accuracy of every head on ``data`` (exact truth)."""
    probs = judge.probabilities(data.images)
    return {k: float((probs[k].argmax(1) == data.targets[k]).mean()) for k in probs}


#: The shipped composition judge (package data; model card inside).
COMPOSITION_JUDGE_DIR = Path(__file__).resolve().parent.parent / "assets" / "composition_judge"


def ship_composition_judge(
    out: str | Path = COMPOSITION_JUDGE_DIR, per_class: int = 120, epochs: int = 20, seed: int = 0
) -> dict[str, float]:
    """Train the shipped judge on compositions of the default world (SUB's 33 species at 32 px),
    validate it on held-out compositions of the other 167 CUB species (the ones ConceptBed's
    learners learn), and save it (fp16 safetensors) with its validation and model card."""
    import json

    from ..vocabulary import load_vocabulary
    from ..world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=32, seed=seed))
    judge = train_composition_judge(
        composition_set(world, per_class, 0, seed), world.num_classes, epochs=epochs, seed=seed
    )
    others = tuple(c for c in load_vocabulary().classes if c not in world.class_names)
    held_out = composition_set(
        BirdWorld(WorldConfig(image_size=32, seed=seed, class_names=others)), 4, 10_000, seed + 1
    )
    validation = validate_composition_judge(judge, held_out)
    out = Path(out)
    judge.half().save_pretrained(out)
    (out / "validation.json").write_text(json.dumps(validation, indent=1) + "\n")
    (out / "README.md").write_text(
        _CARD.format(
            per_class=per_class,
            epochs=epochs,
            seed=seed,
            n=len(held_out.images),
            val=", ".join(f"{k} {100 * v:.1f} %" for k, v in validation.items()),
        )
    )
    return validation


@register_judge("composition-judge")
def load_composition_judge(path: str | Path | None = None) -> CompositionJudge:
    """A saved :class:`CompositionJudge` (default: the shipped one), float32, in eval mode."""
    return from_pretrained_quietly(CompositionJudge, Path(path) if path is not None else COMPOSITION_JUDGE_DIR).float()


_CARD = """---
library_name: concept-grounding
tags:
- world-judge
---

# Composition judge of the bird world

How many birds (1-3), in which scene (sky, foliage, water, ground, reeds), facing which way, and
which of SUB's 33 species: a `CompositionJudge` (`concept_grounding.judge.composition`) trained on
{per_class} compositions per species of the varied world at 32 px for {epochs} epochs (seed {seed}).
It answers the existence questions of ConceptBed's compositions (`concept-grounding conceptbed
--tasks composition`).

Made with:

    python -c "from concept_grounding.judge.composition import ship_composition_judge; ship_composition_judge()"

Validation on {n} held-out compositions of the 167 CUB species it never saw (the concepts the
learners learn): {val}. Its species head names only SUB's 33 species (not used on held-out ones).
"""
