"""CLIP-like models: one handle, SUB group-mode scoring, and a small CLIP trained on the world.

* :mod:`.handle`: :class:`ClipHandle`, the one object every consumer takes (model,
  tokenizer, preprocessing with its normalisation, backend, description).
* :mod:`.backends`: one :class:`ClipBackend` per library (open_clip, transformers, world) that
  encodes texts and images; :func:`backend_for` is the one place that picks it.
* :mod:`.prompts`: SUB's group prompts (:func:`group_prompts`, :func:`attribute_prompt`,
  :data:`NONE_PROMPT`), training captions and the one class prompt :func:`class_caption`.
* :mod:`.scoring`: :func:`clip_group_scores`, :func:`clip_score` (CLIPScore).
* :mod:`.loading`: :func:`load_clip` (world folder, open_clip name, transformers id) ->
  :class:`ClipHandle`; :func:`load_named_clip` checks a user-given name first.
* :mod:`.world`: :class:`WorldCLIP`, :class:`WordTokenizer`, :func:`train_world_clip`, :func:`fit_clip`.
* :mod:`.tiny`: tiny random CLIPs built from configs (the demo's world CLIP, ``random-clip``'s open_clip ViT).
"""

from .backends import BACKENDS, ClipBackend, backend_for, model_device
from .handle import ClipHandle
from .loading import load_clip, load_named_clip, world_clip_handle
from .prompts import (
    NONE_PROMPT,
    attribute_phrase_for_prompt,
    attribute_prompt,
    caption_for_attributes,
    class_caption,
    group_prompts,
)
from .scoring import clip_group_predict, clip_group_scores, clip_score
from .world import WordTokenizer, WorldCLIP, caption_matches, clip_loss, fit_clip, train_world_clip

__all__ = [
    "ClipHandle",
    "ClipBackend",
    "BACKENDS",
    "backend_for",
    "load_clip",
    "load_named_clip",
    "world_clip_handle",
    "NONE_PROMPT",
    "attribute_phrase_for_prompt",
    "attribute_prompt",
    "caption_for_attributes",
    "class_caption",
    "group_prompts",
    "clip_group_predict",
    "clip_group_scores",
    "clip_score",
    "model_device",
    "WordTokenizer",
    "WorldCLIP",
    "caption_matches",
    "clip_loss",
    "train_world_clip",
    "fit_clip",
]
