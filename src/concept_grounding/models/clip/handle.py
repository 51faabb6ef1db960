"""The one CLIP handle: :class:`ClipHandle` carries a CLIP-like model with its tokenizer,
its preprocessing (where the pixel normalisation lives) and its backend name.

Every consumer takes it: SUB group scoring (:class:`~concept_grounding.evaluation.OpenVocabularyModel`,
``evaluate_sub``, the bench), CCI and COVAR (``concept-grounding explain`` / ``covar``),
and the Space's Explain tab. Two views of the same model:

* scoring (SUB): :meth:`ClipHandle.encode_images` of :meth:`ClipHandle.preprocess`'d PIL
  images and :meth:`ClipHandle.encode_texts`, both L2-normalised (``(N, D)``, ``(T, D)``).
* CCI: :attr:`ClipHandle.model` goes to ``ConceptClusterImportance`` (a
  :class:`~.world.WorldCLIP` is explained through its inner open_clip model), whose inputs
  are :meth:`ClipHandle.pixels` (the tower's normalised input) and whose text embeddings are
  :meth:`ClipHandle.encode_text` (the text tower's raw output).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..pixels import normalize_pixels
from .scoring import encode_images, encode_texts, model_device

__all__ = ["ClipHandle", "BACKENDS"]

#: backend names: who built the model (``"custom"``: a model the caller built itself).
BACKENDS: tuple[str, ...] = ("world", "open_clip", "transformers", "custom")


@dataclass
class ClipHandle:
    """A CLIP-like model with what it takes to use it.

    Attributes:
        model: an open_clip ``CLIP``, a transformers ``CLIPModel``-like model (SigLIP too) or
            a :class:`~.world.WorldCLIP`.
        tokenizer: open_clip style (texts -> ``(T, L)`` ids) or a transformers tokenizer /
            processor (called with ``padding=True, return_tensors="pt"``).
        preprocess: list of PIL images -> ``(B, 3, H, W)`` input of ``model``'s image encoder
            (normalised for open_clip / transformers; ``[0, 1]`` for the world CLIP, which
            normalises inside with :func:`~..pixels.normalize_pixels`).
        backend: one of :data:`BACKENDS`.
        description: one line for reports and status lines.
    """

    model: Any
    tokenizer: Callable | None
    preprocess: Callable[[Sequence[Any]], torch.Tensor]
    backend: str = "custom"
    description: str = ""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if not self.description:
            self.description = f"{self.backend} model {type(self.model).__name__}"

    @property
    def device(self) -> torch.device:
        """Device of the model's parameters."""
        return model_device(self.model)

    # ------------------------------------------------------------------ scoring
    def encode_images(self, pixels: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
        """``(N, D)`` L2-normalised float32 CPU embeddings of a preprocessed batch."""
        return encode_images(self.model, pixels, batch_size)

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """``(T, D)`` L2-normalised float32 embeddings of ``texts`` (SUB's prompt scoring)."""
        return encode_texts(self.model, self.tokenizer, texts)

    # ---------------------------------------------------------------------- CCI
    def pixels(self, images: Sequence[np.ndarray | Any]) -> torch.Tensor:
        """``(H, W, 3)`` uint8 arrays (or PIL images) -> ``(B, 3, h, w)`` input of the image
        tower CCI runs, on the model's device: :attr:`preprocess`, then for the world CLIP
        its normalisation (CCI runs its inner open_clip tower, past ``encode_image``)."""
        from PIL import Image

        pil = [im if hasattr(im, "convert") else Image.fromarray(np.asarray(im)) for im in images]
        x = self.preprocess(pil).to(self.device)
        return normalize_pixels(x) if self.backend == "world" else x

    @torch.no_grad()
    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """``(T, E)`` raw (unnormalised) text-tower output, as CCI takes text embeddings.

        transformers models get the token ids only (``get_text_features(input_ids=...)``);
        open_clip models and the world CLIP ``encode_text(tokenizer(texts))``.
        """
        if self.tokenizer is None:
            raise ValueError("this CLIP handle has no tokenizer; pass text embeddings instead")
        device = self.device
        if hasattr(self.model, "get_text_features"):
            tokens = self.tokenizer(list(texts), padding=True, return_tensors="pt")["input_ids"]
            out = self.model.get_text_features(input_ids=torch.as_tensor(tokens).to(device))
            return out.pooler_output if hasattr(out, "pooler_output") else out
        return self.model.encode_text(torch.as_tensor(self.tokenizer(list(texts))).to(device))
