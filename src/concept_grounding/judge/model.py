"""``WorldJudge``: a small CNN that names a world bird's species and every attribute it shows.

Two heads over one trunk: species logits ``(N, C)`` and attribute logits ``(N, A)`` over the
world's rendered attribute columns. The trunk keeps the layout (its last feature map is
flattened, not pooled), so a crown and a forehead of the same colour are told apart by where
they are; the judge is meant for one drawing setting (the generator's canonical pose).

Training (:func:`train_judge`) balances every attribute column (BCE ``pos_weight`` =
negatives / positives, so a rare colour counts as much as a common one) and shifts images
by up to one pixel, which makes the verdicts robust to a generator's small misplacements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn
from tqdm.auto import tqdm

from ..vocabulary import load_vocabulary
from .data import JudgeSet

__all__ = ["WorldJudge", "JudgeOutput", "train_judge", "judge_images"]

_MEAN = (0.5, 0.5, 0.5)
_STD = (0.25, 0.25, 0.25)


@dataclass
class JudgeOutput:
    """``species_logits`` ``(N, C)`` and ``attribute_logits`` ``(N, A)`` of a :class:`WorldJudge`."""

    species_logits: torch.Tensor
    attribute_logits: torch.Tensor


def _trunk(width: int) -> nn.Sequential:
    """``(N, 3, S, S)`` -> ``(N, 2 * width * (S / 4)**2)``: a 3x3 and a 1x1 convolution at full
    resolution (colour features of every pixel, so a one-pixel eye survives), max-pooled,
    then a 3x3 convolution at half resolution, max-pooled and flattened."""
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
        nn.Conv2d(width, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1, bias=False), nn.BatchNorm2d(2 * width), nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Flatten(),
    )


class WorldJudge(nn.Module, PyTorchModelHubMixin, library_name="concept-grounding", tags=["world-judge"]):
    """Species and attribute judge of the bird world; images ``(N, 3, H, W)`` in [0, 1].

    Args:
        image_size: side of the square inputs in pixels (a multiple of 4).
        class_names: the ``C`` species (CUB folder names), in the world's order.
        attribute_columns: the ``A`` CUB attribute indices (0-based, of 312) it judges.
        width: channels at full resolution (doubled at half resolution).
    """

    def __init__(self, image_size: int, class_names: Sequence[str], attribute_columns: Sequence[int], width: int = 32):
        super().__init__()
        if image_size % 4:
            raise ValueError(f"image_size must be a multiple of 4, got {image_size}")
        self.image_size = int(image_size)
        self.class_names = tuple(class_names)
        self.attribute_columns = tuple(int(c) for c in attribute_columns)
        self.trunk = _trunk(width)
        features = 2 * width * (image_size // 4) ** 2
        self.neck = nn.Sequential(nn.Dropout(0.2), nn.Linear(features, 256), nn.ReLU(inplace=True))
        self.species_head = nn.Linear(256, len(self.class_names))
        self.attribute_head = nn.Linear(256, len(self.attribute_columns))
        self.register_buffer("mean", torch.tensor(_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(_STD).view(1, 3, 1, 1), persistent=False)

    def forward(self, images: torch.Tensor) -> JudgeOutput:
        if images.ndim != 4 or images.shape[1] != 3 or tuple(images.shape[-2:]) != (self.image_size,) * 2:
            raise ValueError(f"images must be (N, 3, {self.image_size}, {self.image_size}), got {tuple(images.shape)}")
        h = self.neck(self.trunk((images - self.mean) / self.std))
        return JudgeOutput(self.species_head(h), self.attribute_head(h))


def _to_unit(images: np.ndarray) -> torch.Tensor:
    """uint8 ``(N, H, W, 3)`` -> float ``(N, 3, H, W)`` in [0, 1]."""
    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float().div_(255.0)


@torch.no_grad()
def judge_images(judge: WorldJudge, images: np.ndarray | Sequence, batch_size: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """The judge's verdict on uint8 ``(N, H, W, 3)`` images (or PIL images):
    ``(species argmax (N,), attribute probabilities (N, 312))``, 0.5 off its columns."""
    arr = np.stack([np.asarray(im.convert("RGB")) if hasattr(im, "convert") else np.asarray(im) for im in images])
    was_training = judge.training
    judge.eval()
    species, probs = [], []
    try:
        for i in range(0, len(arr), batch_size):
            out = judge(_to_unit(arr[i : i + batch_size]))
            species.append(out.species_logits.argmax(1).numpy())
            probs.append(torch.sigmoid(out.attribute_logits).numpy())
    finally:
        judge.train(was_training)
    full = np.full((len(arr), load_vocabulary().num_attributes), 0.5)
    full[:, list(judge.attribute_columns)] = np.concatenate(probs) if probs else np.zeros((0, len(judge.attribute_columns)))
    return (np.concatenate(species) if species else np.zeros(0, int)), full


def _shift(x: torch.Tensor, g: torch.Generator, pixels: int = 1) -> torch.Tensor:
    """Each image shifted by a random (dx, dy) in [-pixels, pixels], edges replicated."""
    if pixels <= 0:
        return x
    padded = nn.functional.pad(x, (pixels,) * 4, mode="replicate")
    h, w = x.shape[-2:]
    offsets = torch.randint(0, 2 * pixels + 1, (x.shape[0], 2), generator=g)
    return torch.stack([padded[i, :, dy : dy + h, dx : dx + w] for i, (dy, dx) in enumerate(offsets.tolist())])


def train_judge(
    data: JudgeSet,
    class_names: Sequence[str],
    attribute_columns: Sequence[int],
    epochs: int = 8,
    batch_size: int = 128,
    lr: float = 2e-3,
    seed: int = 0,
    progress: bool = True,
) -> WorldJudge:
    """Fit a :class:`WorldJudge`: species cross-entropy on rows with a label >= 0 plus the
    class-balanced BCE of every attribute column on rows that train attributes
    (:attr:`JudgeSet.trains_attributes`), AdamW with one-cycle decay. Deterministic in
    ``seed``; the caller's global RNG state is restored."""
    columns = list(attribute_columns)
    x_all = _to_unit(data.images)
    y_attr = torch.from_numpy(data.attributes[:, columns].astype(np.float32))
    y_species = torch.from_numpy(data.labels).long()
    trains = torch.from_numpy(data.trains_attributes)
    with torch.random.fork_rng(devices=[]):  # initialisation and dropout draw from a seeded, restored global RNG
        torch.manual_seed(int(seed))
        judge = WorldJudge(data.images.shape[1], class_names, columns)
        _fit(judge, x_all, y_attr, y_species, trains, epochs, batch_size, lr, torch.Generator().manual_seed(int(seed)),
             progress)
    return judge.eval()


def _fit(judge: WorldJudge, x_all: torch.Tensor, y_attr: torch.Tensor, y_species: torch.Tensor, trains: torch.Tensor,
         epochs: int, batch_size: int, lr: float, g: torch.Generator, progress: bool) -> None:
    """The optimisation loop of :func:`train_judge` (batches and shifts drawn from ``g``)."""
    pos = y_attr[trains].sum(0).clamp(min=1.0)
    pos_weight = ((int(trains.sum()) - pos) / pos).clamp(0.1, 100.0)
    bce = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    opt = torch.optim.AdamW(judge.parameters(), lr=lr, weight_decay=1e-4)
    n = x_all.shape[0]
    steps = epochs * ((n + batch_size - 1) // batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.15)
    judge.train()
    bar = tqdm(total=steps, desc="judge", disable=not progress)
    for _ in range(epochs):
        order = torch.randperm(n, generator=g)
        for i in range(0, n, batch_size):
            idx = order[i : i + batch_size]
            out = judge(_shift(x_all[idx], g))
            loss = out.species_logits.new_zeros(())
            rows = trains[idx]
            if rows.any():
                loss = loss + bce(out.attribute_logits[rows], y_attr[idx][rows])
            has_species = y_species[idx] >= 0
            if has_species.any():
                loss = loss + nn.functional.cross_entropy(out.species_logits[has_species], y_species[idx][has_species])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}")
    bar.close()
