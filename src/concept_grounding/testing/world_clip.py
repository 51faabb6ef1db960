"""The tiny world CLIP for tests: the builders of :mod:`concept_grounding.models.clip.tiny`."""

from __future__ import annotations

from ..models.clip.tiny import TINY_WORLD_CLIP, tiny_clip_handle, tiny_world_clip

__all__ = ["TINY_WORLD_CLIP", "tiny_world_clip", "tiny_clip_handle"]
