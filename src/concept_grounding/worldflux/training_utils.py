"""Small helpers shared by the world Flux's training stages (as diffusers keeps its
``training_utils.py``): atomic checkpoints, the learning-rate schedule, image tensors."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import atomic_write_bytes
from .components import FluxTrainConfig

__all__ = []


def training_world(cfg: FluxTrainConfig) -> Any:
    """The :class:`~concept_grounding.world.BirdWorld` whose renders train the pipeline."""
    from ..world import BirdWorld

    return BirdWorld(cfg.world)


def atomic_save(obj: Any, path: Path) -> None:
    """``torch.save`` through :func:`~concept_grounding.fileio.atomic_write_bytes` (a full disk
    is an ``OSError`` naming ``path``, and leaves no temporary file)."""
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def cosine_lr(step: int, total: int, base: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay to 0 at ``total``.

    >>> cosine_lr(0, 100, 1.0, 10), cosine_lr(10, 100, 1.0, 10), round(cosine_lr(100, 100, 1.0, 10), 6)
    (0.1, 1.0, 0.0)
    """
    warmup = min(warmup, max(total // 10, 1))
    if step < warmup:
        return base * (step + 1) / warmup
    frac = min(1.0, (step - warmup) / max(1, total - warmup))
    return base * 0.5 * (1.0 + math.cos(math.pi * frac))


def to_tensor(images: np.ndarray) -> Any:
    """uint8 ``(N, H, W, 3)`` -> float ``(N, 3, H, W)`` in [-1, 1] (the VAE's range)."""
    import torch

    return torch.from_numpy(images).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)
