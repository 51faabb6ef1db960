"""Tiny CLIPs built from configs (random weights, seconds on a CPU): the world CLIP the demo scores with when no
bench ran, and the open_clip ViT of ``--model random-clip``. Each is seeded and leaves torch's global RNG as it was.

>>> model = tiny_world_clip(image_size=16, seed=0)
>>> model.image_size, tiny_clip_handle(image_size=16).backend.name
(16, 'world')
"""

from __future__ import annotations

from typing import Any

import torch

from ..base import seeded
from .handle import ClipHandle
from .loading import world_clip_handle
from .world import WordTokenizer, WorldCLIP

__all__ = ["TINY_WORLD_CLIP", "tiny_world_clip", "tiny_clip_handle", "tiny_open_clip"]

#: the smallest world-CLIP sizes the tests use (one layer per tower).
TINY_WORLD_CLIP: dict[str, int] = dict(
    patch_size=8, vision_width=32, text_width=32, vision_layers=1, text_layers=1, head_width=16
)


def tiny_world_clip(image_size: int = 32, seed: int = 0, **sizes: int) -> WorldCLIP:
    """A randomly initialised :class:`~concept_grounding.models.clip.WorldCLIP` over the vocabulary's words
    (:data:`TINY_WORLD_CLIP` sizes, overridden by ``sizes``), seeded; the caller's global
    torch RNG is left untouched."""
    with seeded(seed):
        return WorldCLIP(
            WordTokenizer.from_vocabulary().words, image_size=image_size, **{**TINY_WORLD_CLIP, **sizes}
        ).eval()


def tiny_clip_handle(image_size: int = 32, seed: int = 0, **sizes: int) -> ClipHandle:
    """:func:`tiny_world_clip` as a :class:`~concept_grounding.models.clip.ClipHandle`."""
    return world_clip_handle(
        tiny_world_clip(image_size, seed, **sizes), f"tiny world CLIP ({image_size} px, random weights)"
    )


def tiny_open_clip(
    image_size: int = 32,
    patch_size: int = 8,
    width: int = 32,
    layers: int = 2,
    heads: int = 4,
    embed_dim: int = 16,
    seed: int = 0,
    with_text: bool = True,
) -> Any:
    """An open_clip ``CLIP`` (or its ``VisionTransformer`` alone when ``with_text=False``).

    The text tower uses open_clip's bundled BPE vocabulary (49408 tokens, context 77), so
    ``open_clip.get_tokenizer("ViT-B-16")`` tokenises for it offline.
    """
    from open_clip.model import CLIP, CLIPTextCfg, CLIPVisionCfg, _build_vision_tower

    vision = CLIPVisionCfg(
        layers=layers, width=width, head_width=width // heads, image_size=image_size, patch_size=patch_size
    )
    with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left as it was
        torch.manual_seed(seed)
        if not with_text:
            return _build_vision_tower(embed_dim, vision).eval()
        text = CLIPTextCfg(context_length=77, vocab_size=49408, width=width, heads=heads, layers=1)
        return CLIP(embed_dim, vision, text).eval()
