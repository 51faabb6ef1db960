"""Image and text embeddings of CLIP-like models and SUB's group scores (docs/sub_accuracy.md).

* :func:`encode_images` / :func:`encode_texts`: L2-normalised embeddings for open_clip
  models, transformers ``CLIPModel``-like models (``get_image_features`` /
  ``get_text_features``) and :class:`~.world.WorldCLIP`.
* :func:`clip_group_scores`: ``(N, |group| (+1))`` cosine similarities with a group's prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ...vocabulary import Vocabulary
from .prompts import group_prompts

__all__ = ["encode_images", "encode_texts", "clip_group_scores", "clip_group_predict", "model_device"]


def _features(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    for key in ("image_embeds", "text_embeds", "pooler_output"):
        value = getattr(output, key, None)
        if value is not None:
            return value
    raise TypeError(f"cannot read features from a {type(output).__name__}")


def model_device(model: nn.Module | Any) -> torch.device:
    """Device of ``model``'s first parameter (CPU for callables without parameters)."""
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError, TypeError):
        return torch.device("cpu")


@torch.no_grad()
def encode_texts(model: Any, tokenizer: Callable, texts: Sequence[str]) -> torch.Tensor:
    """L2-normalised text embeddings ``(T, D)``: ``model.encode_text(tokenizer(texts))`` (open_clip,
    :class:`~.world.WorldCLIP`) or ``model.get_text_features(**tokenizer(texts, padding=True, return_tensors="pt"))``
    (transformers)."""
    device = model_device(model)
    if hasattr(model, "encode_text"):
        tokens = tokenizer(list(texts))
        tokens = tokens.to(device) if isinstance(tokens, torch.Tensor) else tokens
        out = model.encode_text(tokens)
    elif hasattr(model, "get_text_features"):
        inputs = tokenizer(list(texts), padding=True, return_tensors="pt")
        out = model.get_text_features(**{k: v.to(device) for k, v in inputs.items()})
    else:
        raise TypeError(f"{type(model).__name__} has neither encode_text (open_clip) nor get_text_features (transformers)")
    return F.normalize(_features(out).float(), dim=-1)


@torch.no_grad()
def encode_images(model: Any, images: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """L2-normalised image embeddings ``(N, D)`` of images already in the model's input format."""
    device = model_device(model)
    parts = []
    for start in range(0, len(images), batch_size):
        batch = images[start : start + batch_size].to(device)
        if hasattr(model, "encode_image"):
            out = model.encode_image(batch)
        elif hasattr(model, "get_image_features"):
            out = model.get_image_features(pixel_values=batch)
        else:
            raise TypeError(f"{type(model).__name__} has neither encode_image nor get_image_features")
        parts.append(F.normalize(_features(out).float(), dim=-1).cpu())
    return torch.cat(parts)


def clip_group_scores(
    model: Any,
    tokenizer: Callable,
    images: torch.Tensor | Sequence,
    group: str,
    vocab: Vocabulary | None = None,
    include_none: bool = False,
    preprocess: Callable | None = None,
    batch_size: int = 256,
) -> torch.Tensor:
    """Cosine similarities of images with the prompts of one attribute group (SUB group mode).

    Args:
        model: an open_clip model, a transformers CLIP-like model or a :class:`~.world.WorldCLIP`.
        tokenizer: its tokenizer (open_clip style: texts -> token tensor; transformers style:
            called with ``padding=True, return_tensors="pt"``).
        images: a tensor ``(N, 3, H, W)`` in the model's input format, or anything
            ``preprocess`` turns into one (e.g. a list of PIL images with :func:`~.loading.load_clip`'s
            ``preprocess``).
        group: attribute group, e.g. ``"crown_color"``.
        include_none: append the "none" option (:data:`~.prompts.NONE_PROMPT`) as the last column.

    Returns:
        ``(N, |group|)`` or ``(N, |group| + 1)`` cosine similarities in [-1, 1]; columns in
        the order of ``vocab.groups[group]`` (then "none").
    """
    prompts = group_prompts(group, vocab, include_none)
    if preprocess is not None:
        images = preprocess(images)
    if not isinstance(images, torch.Tensor) or images.ndim != 4:
        raise ValueError("images must be a (N, 3, H, W) tensor, or pass preprocess= to convert them")
    was = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        text = encode_texts(model, tokenizer, prompts)
        image = encode_images(model, images, batch_size)
    finally:
        if was:
            model.train()
    return image @ text.T.cpu()


def clip_group_predict(scores: torch.Tensor) -> torch.Tensor:
    """``(N,)`` column index of the highest similarity (the value predicted present)."""
    return scores.argmax(dim=1)
