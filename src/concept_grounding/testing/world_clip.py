"""Tiny CLIP models for tests and quick builds: random weights, seconds to build on a CPU.

>>> model = tiny_world_clip(image_size=16, seed=0)
>>> model.image_size, tiny_clip_handle(image_size=16).backend.name
(16, 'world')
"""

from __future__ import annotations

from ..models.base import seeded
from ..models.clip.handle import ClipHandle
from ..models.clip.loading import world_clip_handle
from ..models.clip.world import WordTokenizer, WorldCLIP

__all__ = ["TINY_WORLD_CLIP", "tiny_world_clip", "tiny_clip_handle"]

#: the smallest world-CLIP sizes the tests use (one layer per tower).
TINY_WORLD_CLIP: dict[str, int] = dict(patch_size=8, vision_width=32, text_width=32, vision_layers=1, text_layers=1,
                                       head_width=16)


def tiny_world_clip(image_size: int = 32, seed: int = 0, **sizes: int) -> WorldCLIP:
    """A randomly initialised :class:`~concept_grounding.models.clip.WorldCLIP` over the vocabulary's words
    (:data:`TINY_WORLD_CLIP` sizes, overridden by ``sizes``), seeded; the caller's global
    torch RNG is left untouched."""
    with seeded(seed):
        return WorldCLIP(WordTokenizer.from_vocabulary().words, image_size=image_size,
                         **{**TINY_WORLD_CLIP, **sizes}).eval()


def tiny_clip_handle(image_size: int = 32, seed: int = 0, **sizes: int) -> ClipHandle:
    """:func:`tiny_world_clip` as a :class:`~concept_grounding.models.clip.ClipHandle`."""
    return world_clip_handle(tiny_world_clip(image_size, seed, **sizes),
                             f"tiny world CLIP ({image_size} px, random weights)")
