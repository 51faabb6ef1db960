"""The one CLIP handle: :class:`ClipHandle` carries a CLIP-like model with its tokenizer,
its preprocessing (where the pixel normalisation lives) and its backend object
(:mod:`.backends`: open_clip, transformers or the world CLIP), which does the encoding.

Every consumer takes it: SUB group scoring (:class:`~concept_grounding.evaluation.OpenVocabularyModel`,
``evaluate_sub``, the bench), CCI and COVAR (``concept-grounding explain`` / ``covar``),
and the Space's Explain tab. Two views of the same model:

* scoring (SUB): :meth:`ClipHandle.encode_images` of :meth:`ClipHandle.preprocess`'d PIL
  images and :meth:`ClipHandle.encode_texts`, both L2-normalised (``(N, D)``, ``(T, D)``).
* CCI: the handle (or :attr:`ClipHandle.model`) goes to ``ConceptClusterImportance``, which
  runs :meth:`ClipHandle.tower` (a :class:`~.world.WorldCLIP` is explained through its inner
  open_clip model) on :meth:`ClipHandle.pixels` (the tower's normalised input); its text
  embeddings are :meth:`ClipHandle.encode_text` (the text tower's raw output).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from .backends import BACKENDS, ClipBackend, backend_for, model_device

__all__ = ["ClipHandle", "BACKENDS"]


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
        backend: a :class:`~.backends.ClipBackend` or its name (a key of :data:`BACKENDS`);
            ``"auto"``: :func:`~.backends.backend_for` of the model.
        description: one line for reports and status lines.
        random_weights: the model's weights are random (asked for by name); reports say so first.
    """

    model: Any
    tokenizer: Callable | None
    preprocess: Callable[[Sequence[Any]], torch.Tensor]
    backend: ClipBackend | str = "auto"
    description: str = ""
    random_weights: bool = False

    def __post_init__(self) -> None:
        if self.backend == "auto":
            self.backend = backend_for(self.model)
        elif not isinstance(self.backend, ClipBackend):
            if self.backend not in BACKENDS:
                raise ValueError(f"backend must be one of {tuple(BACKENDS)} or 'auto', got {self.backend!r}")
            self.backend = BACKENDS[self.backend]
        if not self.description:
            self.description = f"{self.backend.name} model {type(self.model).__name__}"

    @property
    def device(self) -> torch.device:
        """Device of the model's parameters."""
        return model_device(self.model)

    # ------------------------------------------------------------------ scoring
    @torch.no_grad()
    def encode_images(self, pixels: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
        """``(N, D)`` L2-normalised float32 CPU embeddings of a preprocessed batch."""
        device = self.device
        return torch.cat(
            [
                F.normalize(
                    self.backend.encode_image(self.model, pixels[i : i + batch_size].to(device)).float(), dim=-1
                ).cpu()
                for i in range(0, len(pixels), batch_size)
            ]
        )

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """``(T, D)`` L2-normalised float32 embeddings of ``texts`` (SUB's prompt scoring)."""
        return F.normalize(self.encode_text(texts).float(), dim=-1)

    # ---------------------------------------------------------------------- CCI
    def tower(self) -> Any:
        """The module whose vision tower CCI explains (the world CLIP's inner open_clip model)."""
        return self.backend.tower(self.model)

    def pixels(self, images: Sequence[np.ndarray | Any]) -> torch.Tensor:
        """``(H, W, 3)`` uint8 arrays (or PIL images) -> ``(B, 3, h, w)`` input of the image
        tower CCI runs (:meth:`tower`), on the model's device: :attr:`preprocess`, then the
        backend's :meth:`~.backends.ClipBackend.tower_pixels` (the world CLIP's normalisation)."""
        from PIL import Image

        pil = [im if hasattr(im, "convert") else Image.fromarray(np.asarray(im)) for im in images]
        return self.backend.tower_pixels(self.preprocess(pil).to(self.device))

    @torch.no_grad()
    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """``(T, E)`` raw (unnormalised) text-tower output, as CCI takes text embeddings."""
        if self.tokenizer is None:
            raise ValueError("this CLIP handle has no tokenizer; pass text embeddings instead")
        return self.backend.encode_text(self.model, self.tokenizer, list(texts))
