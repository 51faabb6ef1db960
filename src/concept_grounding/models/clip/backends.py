"""One backend object per CLIP library: how its models encode texts and images, and which
module and pixels CCI's attention access runs on.

:func:`backend_for` is the one place that decides which library a model belongs to (by
type: the world's :class:`~.world.WorldCLIP`, a transformers or an open_clip module; a model
the caller built is read by the methods it has). Everything else asks the backend, the way
transformers asks ``ALL_ATTENTION_FUNCTIONS[impl]`` instead of testing the model:

* :data:`OPEN_CLIP`: ``model.encode_text(tokenizer(texts))`` / ``model.encode_image(pixels)``;
* :data:`TRANSFORMERS`: ``get_text_features(**tokenizer(texts, padding=True, return_tensors="pt"))``
  / ``get_image_features(pixel_values=...)`` (CLIP, SigLIP);
* :data:`WORLD`: open_clip's calls on a :class:`~.world.WorldCLIP` ([0, 1] pixels, normalised
  inside); CCI explains its inner open_clip model on normalised pixels.

CCI's tower adapters (:mod:`concept_grounding.cci.backends`) are chosen by :attr:`ClipBackend.name`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
from torch import nn

from ..pixels import normalize_pixels

__all__ = ["ClipBackend", "OPEN_CLIP", "TRANSFORMERS", "BACKENDS", "backend_for", "model_device", "features"]


def model_device(model: nn.Module | Any) -> torch.device:
    """Device of ``model``'s first parameter (CPU for callables without parameters)."""
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError, TypeError):
        return torch.device("cpu")


def features(output: Any) -> torch.Tensor:
    """The embedding tensor of a tower's output (a tensor, or ``image_embeds`` / ``text_embeds`` /
    ``pooler_output`` of a transformers output)."""
    if isinstance(output, torch.Tensor):
        return output
    for key in ("image_embeds", "text_embeds", "pooler_output"):
        value = getattr(output, key, None)
        if value is not None:
            return value
    raise TypeError(f"cannot read features from a {type(output).__name__}")


class ClipBackend:
    """What one CLIP library's models answer; subclasses are stateless singletons.

    Attributes:
        name: the library (``"open_clip"``, ``"transformers"``, ``"world"``).
        text_method, image_method: the towers' method names (checked by :meth:`check_towers`).
    """

    name: ClassVar[str] = ""
    text_method: ClassVar[str] = ""
    image_method: ClassVar[str] = ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def check_towers(self, model: Any) -> None:
        """Raise ``ValueError`` unless ``model`` has both towers of this library."""
        if not (hasattr(model, self.text_method) and hasattr(model, self.image_method)):
            raise ValueError(
                f"{type(model).__name__} is not CLIP-like: it needs {self.image_method} / "
                f"{self.text_method} ({self.name})"
            )

    def encode_text(self, model: Any, tokenizer: Callable | None, texts: Sequence[str] | torch.Tensor) -> torch.Tensor:
        """``(T, E)`` raw (unnormalised) text-tower output of strings (through ``tokenizer``) or token ids."""
        raise NotImplementedError

    def encode_image(self, model: Any, pixels: torch.Tensor) -> torch.Tensor:
        """``(B, E)`` raw image-tower output of a batch in the model's input format."""
        raise NotImplementedError

    def tower(self, model: Any) -> Any:
        """The module whose vision tower CCI runs (its attention is masked there)."""
        return model

    def tower_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        """The preprocessed batch as :meth:`tower`'s image encoder takes it."""
        return pixels


class OpenClipBackend(ClipBackend):
    """open_clip ``CLIP`` / ``CustomTextCLIP`` (and models built with the same two methods)."""

    name = "open_clip"
    text_method, image_method = "encode_text", "encode_image"

    def encode_text(self, model, tokenizer, texts):
        if isinstance(texts, torch.Tensor):
            tokens = texts
        elif tokenizer is None:
            raise ValueError("texts: pass token ids or text embeddings (no tokenizer was given)")
        else:
            tokens = tokenizer(list(texts))
        if not hasattr(model, "encode_text"):
            raise ValueError("model: this open_clip module has no text tower; pass text embeddings")
        if isinstance(tokens, torch.Tensor):
            context = getattr(model, "context_length", None)
            tokens = (tokens[:, :context] if context else tokens).to(model_device(model))
        return features(model.encode_text(tokens))

    def encode_image(self, model, pixels):
        out = model.encode_image(pixels) if hasattr(model, "encode_image") else getattr(model, "visual", model)(pixels)
        return features(out[0] if isinstance(out, tuple) else out)


class WorldBackend(OpenClipBackend):
    """The world's :class:`~.world.WorldCLIP` (or any module wrapping an open_clip CLIP as ``.clip``):
    scored through its own calls on [0, 1] pixels, explained through the inner model."""

    name = "world"

    def tower(self, model):
        return model.clip

    def tower_pixels(self, pixels):
        return normalize_pixels(pixels)


class TransformersBackend(ClipBackend):
    """transformers ``CLIPModel``-like models (CLIP, SigLIP, ``CLIPVisionModel[WithProjection]``)."""

    name = "transformers"
    text_method, image_method = "get_text_features", "get_image_features"

    def encode_text(self, model, tokenizer, texts):
        if not hasattr(model, "get_text_features"):
            raise ValueError("model: this transformers model has no text tower; pass text embeddings")
        device = model_device(model)
        if isinstance(texts, torch.Tensor):
            return features(model.get_text_features(input_ids=texts.to(device)))
        if tokenizer is None:
            raise ValueError("texts: pass token ids or text embeddings (no tokenizer was given)")
        inputs = tokenizer(list(texts), padding=True, return_tensors="pt")
        return features(model.get_text_features(**{k: torch.as_tensor(v).to(device) for k, v in inputs.items()}))

    def encode_image(self, model, pixels):
        if hasattr(model, "get_image_features"):
            return features(model.get_image_features(pixel_values=pixels))
        return features(model(pixel_values=pixels))


OPEN_CLIP, TRANSFORMERS, WORLD = OpenClipBackend(), TransformersBackend(), WorldBackend()
#: the backends by name.
BACKENDS: dict[str, ClipBackend] = {b.name: b for b in (WORLD, OPEN_CLIP, TRANSFORMERS)}


def _from_open_clip(module: Any) -> bool:
    return module is not None and type(module).__module__.startswith("open_clip")


def backend_for(model: Any) -> ClipBackend:
    """The backend of ``model``: the one place that decides which library a CLIP belongs to.

    A :class:`~.world.WorldCLIP` (or a module wrapping an open_clip CLIP as ``.clip``) is
    :data:`WORLD`; a transformers module :data:`TRANSFORMERS`; an open_clip module (or one
    with an open_clip ``.visual``) :data:`OPEN_CLIP`. A model the caller built follows the
    library whose methods it has (``encode_image`` / ``encode_text``: open_clip's;
    ``get_image_features`` / ``get_text_features``: transformers').

    Raises:
        ValueError: ``model`` has the methods of neither library.
    """
    if _from_open_clip(getattr(getattr(model, "clip", None), "visual", None)):
        return WORLD
    module = type(model).__module__
    if module.startswith("transformers."):
        return TRANSFORMERS
    if module.startswith("open_clip") or _from_open_clip(getattr(model, "visual", None)):
        return OPEN_CLIP
    for backend in (OPEN_CLIP, TRANSFORMERS):
        if hasattr(model, backend.image_method) or hasattr(model, backend.text_method):
            return backend
    raise ValueError(
        f"{type(model).__name__} is not CLIP-like: it needs encode_image / encode_text (open_clip) "
        "or get_image_features / get_text_features (transformers)"
    )
