"""Load a CLIP for the ``explain`` and ``covar`` commands: model, text encoder, pixel pipe.

``--model`` may be empty (a tiny config-built open_clip CLIP, random weights: the
mechanics run, the explanations mean nothing), a folder saved by ``WorldCLIP`` (the
world CLIP of the benchmark), an open_clip architecture name or a transformers id/path
(through :func:`concept_grounding.models.clip.load_clip`, after
:func:`concept_grounding.hub.resolve_clip` checked that it is a local folder, cached, or
reachable: an unavailable name fails within seconds with a message saying how to get it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["ExplainableCLIP", "load_explainable_clip", "class_prompt"]


@dataclass
class ExplainableCLIP:
    """What the commands need.

    Attributes:
        model: passed to :class:`~.importance.ConceptClusterImportance`.
        encode_text: list of strings -> ``(C, E)``.
        pixels: list of ``(H, W, 3) uint8`` arrays -> ``(B, 3, h, w)`` model inputs.
        description: one line for reports.
    """

    model: Any
    encode_text: Callable[[Sequence[str]], "torch.Tensor"]
    pixels: Callable[[Sequence[np.ndarray]], "torch.Tensor"]
    description: str


def class_prompt(name: str) -> str:
    """``"017.Cardinal"`` -> ``"a photo of a cardinal."``

    >>> class_prompt("073.Blue_Jay")
    'a photo of a blue jay.'
    """
    base = name.split(".", 1)[1] if "." in name and name.split(".", 1)[0].isdigit() else name
    return f"a photo of a {base.replace('_', ' ').lower()}."


def load_explainable_clip(name: str | None = None, image_size: int = 64, device: str = "cpu") -> ExplainableCLIP:
    """Load ``name`` (see module doc) or build the tiny default CLIP for ``image_size`` px."""
    import torch
    from PIL import Image

    from .backends import get_backend
    from .covar import to_pixel_values

    if not name:
        from .tiny import tiny_open_clip

        model = tiny_open_clip(image_size=image_size, patch_size=max(4, image_size // 8), width=64, layers=4,
                               heads=4, embed_dim=32).to(device)
        backend = get_backend(model)

        def encode(texts):
            with torch.no_grad():
                return backend.encode_text(list(texts))

        return ExplainableCLIP(model, encode, lambda ims: to_pixel_values(ims, backend.image_size).to(device),
                               f"tiny config-built open_clip ViT ({image_size} px, random weights)")
    from concept_grounding.hub import resolve_clip
    from concept_grounding.models.clip import load_clip

    name = resolve_clip(name, "--model")
    bundle = load_clip(name, device=device)
    model = bundle.model
    scale = bundle.backend == "world"  # WorldCLIP normalises inside encode_image; CCI runs the inner CLIP

    def pixels(ims):
        x = bundle.preprocess([Image.fromarray(np.asarray(im)) for im in ims]).to(device)
        return (x - 0.5) / 0.25 if scale else x

    def encode(texts):
        with torch.no_grad():
            if bundle.backend == "transformers":
                tokens = bundle.tokenizer(list(texts), padding=True, return_tensors="pt")["input_ids"]
            else:
                tokens = bundle.tokenizer(list(texts))
            if hasattr(model, "get_text_features"):
                out = model.get_text_features(input_ids=torch.as_tensor(tokens).to(device))
                return out.pooler_output if hasattr(out, "pooler_output") else out
            return model.encode_text(torch.as_tensor(tokens).to(device))

    return ExplainableCLIP(model, encode, pixels, f"{bundle.backend} model {name}")
