"""Loading CLIP-like models as a :class:`~.handle.ClipHandle`, with their preprocessing.

:func:`load_clip` takes a folder saved by :class:`~.world.WorldCLIP`, an open_clip
architecture name (``pretrained=`` tag) or ``hf-hub:`` id, or a transformers id / local
folder. Callers that take a name from the user check it first with
:func:`concept_grounding.hub.resolve_clip` (local, cached or reachable; fails in seconds),
as :func:`load_named_clip` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .backends import OPEN_CLIP, TRANSFORMERS, WORLD
from .handle import ClipHandle
from .world import WorldCLIP

__all__ = ["load_clip", "load_named_clip", "world_clip_handle"]


def pil_batch(transform: Callable) -> Callable[[Sequence[Any]], torch.Tensor]:
    """A per-image transform (PIL -> ``(3, H, W)``) as a batch one (list -> ``(B, 3, H, W)``)."""
    return lambda images: torch.stack([transform(im) for im in images])


def unit_pixels(size: int) -> Callable[[Any], torch.Tensor]:
    """PIL image -> ``(3, size, size)`` float32 RGB in ``[0, 1]`` (PIL resize), the world CLIP's input."""
    return lambda im: torch.from_numpy(
        np.asarray(im.convert("RGB").resize((size,) * 2), dtype=np.float32) / 255.0
    ).permute(2, 0, 1)


def world_clip_handle(model: WorldCLIP, description: str = "") -> ClipHandle:
    """A :class:`ClipHandle` around a :class:`~.world.WorldCLIP` in memory (eval mode)."""
    return ClipHandle(
        model.eval(), model.tokenizer, pil_batch(unit_pixels(model.image_size)), WORLD, description or "world CLIP"
    )


def load_clip(
    name_or_path: str | Path,
    backend: str = "auto",
    pretrained: str | None = None,
    local_files_only: bool | None = None,
    device: str | torch.device = "cpu",
) -> ClipHandle:
    """Load a CLIP-like model as a :class:`~.handle.ClipHandle` (SUB scoring, CCI, COVAR, the Space).

    Args:
        name_or_path: a folder saved by :meth:`~.world.WorldCLIP.save_pretrained`; an open_clip
            architecture (``"ViT-B-32"``, with ``pretrained="laion2b_s34b_b79k"``) or
            ``"hf-hub:org/name"``; a transformers model id or local folder.
        backend: ``"auto"``, ``"world"``, ``"open_clip"`` or ``"transformers"``.
        pretrained: open_clip weights tag or file; an architecture without one is refused
            (never scored with random weights) unless it is ``"random"``
            (:func:`concept_grounding.hub.require_open_clip_weights`).
        local_files_only: for transformers; default: ``HF_HUB_OFFLINE``.

    Raises:
        ValueError: the name is not a model any backend can load (with the backends' reasons).
        ModelUnavailableError: an open_clip architecture without ``pretrained``.
    """
    if backend not in ("auto", "world", "open_clip", "transformers"):
        raise ValueError(f"backend must be auto, world, open_clip or transformers, got {backend!r}")
    path = Path(str(name_or_path))
    config = path / "config.json"
    is_world = config.is_file() and "words" in json.loads(config.read_text())
    if backend == "world" or (backend == "auto" and is_world):
        model = WorldCLIP.from_pretrained(str(path)).to(device).eval()
        return world_clip_handle(model, f"world model {name_or_path}")
    import open_clip

    name = str(name_or_path)
    if backend == "open_clip" or (
        backend == "auto" and (name in open_clip.list_models() or name.startswith("hf-hub:"))
    ):
        if not (name in open_clip.list_models() or name.startswith("hf-hub:")):
            raise ValueError(
                f"unknown open_clip model {name!r}; known architectures: {open_clip.list_models()[:8]} ..."
            )
        from ...hub import require_open_clip_weights

        tag = require_open_clip_weights(name, pretrained)
        model, _, transform = open_clip.create_model_and_transforms(name, pretrained=tag, device=device)
        weights = f"weights {tag}" if tag else "RANDOM weights, asked for"
        return ClipHandle(
            model.eval(),
            open_clip.get_tokenizer(name),
            pil_batch(transform),
            OPEN_CLIP,
            f"open_clip model {name} ({weights})",
            random_weights=tag is None,
        )
    from huggingface_hub import constants
    from transformers import AutoModel, AutoProcessor

    if local_files_only is None:
        local_files_only = bool(constants.HF_HUB_OFFLINE)
    try:
        model = AutoModel.from_pretrained(name, local_files_only=local_files_only).to(device).eval()
        processor = AutoProcessor.from_pretrained(name, local_files_only=local_files_only)
    except (OSError, ValueError) as error:
        raise ValueError(
            f"cannot load CLIP-like model {name!r}: not a WorldCLIP folder, not an open_clip architecture "
            f"(see open_clip.list_models()), and transformers says: {error}"
        ) from error
    TRANSFORMERS.check_towers(model)
    preprocess = lambda images: processor(images=list(images), return_tensors="pt")["pixel_values"]  # noqa: E731
    return ClipHandle(
        model,
        processor.tokenizer if hasattr(processor, "tokenizer") else processor,
        preprocess,
        TRANSFORMERS,
        f"transformers model {name}",
    )


def load_named_clip(
    name: str, argument: str = "--model", device: str | torch.device = "cpu", pretrained: str | None = None
) -> ClipHandle:
    """:func:`load_clip` of a user-given name after the one resolver,
    :func:`~concept_grounding.hub.resolve_model_spec`, checked it (a local folder, in the
    cache, or reachable on the Hub; an open_clip architecture with a weights tag
    ``pretrained``; ``argument`` names the option in the error)."""
    from ...hub import resolve_model_spec

    resolved = resolve_model_spec(name, argument, pretrained=pretrained, accept=("folder", "name"))
    return load_clip(resolved.target, pretrained=pretrained, device=device)
