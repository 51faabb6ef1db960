"""SUB's group scores of CLIP-like models (docs/sub_accuracy.md), asked of the one handle.

* :func:`clip_score`: CLIPScore of cosine similarities (ConceptBed's Table 2).
* :func:`clip_group_scores`: ``(N, |group| (+1))`` cosine similarities with a group's prompts,
  from :meth:`~.handle.ClipHandle.encode_images` / :meth:`~.handle.ClipHandle.encode_texts`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ...vocabulary import Vocabulary
from .handle import ClipHandle
from .prompts import group_prompts

__all__ = ["clip_group_scores", "clip_group_predict", "clip_score"]


def clip_score(cosine: Any, w: float = 100.0) -> Any:
    """CLIPScore (Hessel et al. 2021, Eq. 1) of image-text cosine similarities: ``w * max(cos, 0)``
    (``w`` = 100 as ConceptBed reports it; the paper's 2.5 rescales it); numpy or torch, any shape.

    >>> clip_score(np.array([0.3, -0.2])).tolist()
    [30.0, 0.0]
    """
    return w * (cosine.clamp(min=0.0) if isinstance(cosine, torch.Tensor) else np.maximum(cosine, 0.0))


def _tensor_input(images: Any) -> torch.Tensor:
    raise ValueError("images must be a (N, 3, H, W) tensor, or pass preprocess= to convert them")


def clip_group_scores(
    model: Any,
    tokenizer: Callable | None,
    images: torch.Tensor | Sequence,
    group: str,
    vocab: Vocabulary | None = None,
    include_none: bool = False,
    preprocess: Callable | None = None,
    batch_size: int = 256,
) -> torch.Tensor:
    """Cosine similarities of images with the prompts of one attribute group (SUB group mode).

    Args:
        model: a :class:`~.handle.ClipHandle` (``tokenizer`` and ``preprocess`` unused), or an open_clip
            model, a transformers CLIP-like model or a :class:`~.world.WorldCLIP`.
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
    clip = model if isinstance(model, ClipHandle) else ClipHandle(model, tokenizer, preprocess or _tensor_input)
    prompts = group_prompts(group, vocab, include_none)
    if preprocess is not None or not isinstance(images, torch.Tensor):
        images = (preprocess or clip.preprocess)(images)
    if not isinstance(images, torch.Tensor) or images.ndim != 4:
        raise ValueError("images must be a (N, 3, H, W) tensor, or pass preprocess= to convert them")
    was = getattr(clip.model, "training", False)
    if hasattr(clip.model, "eval"):
        clip.model.eval()
    try:
        text = clip.encode_texts(prompts)
        image = clip.encode_images(images, batch_size)
    finally:
        if was:
            clip.model.train()
    return image @ text.T.cpu()


def clip_group_predict(scores: torch.Tensor) -> torch.Tensor:
    """``(N,)`` column index of the highest similarity (the value predicted present)."""
    return scores.argmax(dim=1)
