"""Load a CLIP for CCI and COVAR (``explain``, ``covar``, the Space) as a
:class:`~concept_grounding.models.clip.ClipHandle`.

``--model`` may be empty (a tiny config-built open_clip CLIP, random weights: the
mechanics run, the explanations mean nothing), a folder saved by ``WorldCLIP`` (the
world CLIP of the benchmark), an open_clip architecture name or a transformers id/path
(through :func:`concept_grounding.models.clip.load_named_clip`, which first checks with
:func:`concept_grounding.hub.resolve_clip` that it is a local folder, cached, or reachable:
an unavailable name fails within seconds with a message saying how to get it).
The class prompt is :func:`concept_grounding.models.clip.class_caption`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from concept_grounding.models.clip import ClipHandle

__all__ = ["load_explainable_clip"]


def tiny_open_clip_handle(image_size: int = 64, device: str = "cpu", *, patch_size: int | None = None,
                          width: int = 64, layers: int = 4, heads: int = 4, embed_dim: int = 32,
                          seed: int = 0) -> "ClipHandle":
    """A tiny config-built open_clip CLIP (random weights, :func:`~concept_grounding.testing.tiny_open_clip`) with
    open_clip's bundled BPE tokenizer and CLIP's pixel statistics
    (:func:`~.covar.to_pixel_values`, ``image_size`` px)."""
    import open_clip

    from concept_grounding.models.clip import ClipHandle

    from .covar import to_pixel_values
    from concept_grounding.testing import tiny_open_clip

    model = tiny_open_clip(image_size=image_size, patch_size=patch_size or max(4, image_size // 8), width=width,
                           layers=layers, heads=heads, embed_dim=embed_dim, seed=seed).to(device)
    return ClipHandle(model, open_clip.get_tokenizer("ViT-B-16"),
                      lambda ims: to_pixel_values(ims, (image_size, image_size)), "open_clip",
                      f"tiny config-built open_clip ViT ({image_size} px, random weights)")


def load_explainable_clip(name: str | None = None, image_size: int = 64, device: str = "cpu",
                          pretrained: str | None = None) -> "ClipHandle":
    """Load ``name`` (see module doc; an open_clip architecture with its weights tag ``pretrained``)
    or build the tiny default CLIP for ``image_size`` px."""
    if not name:
        return tiny_open_clip_handle(image_size, device)
    from concept_grounding.models.clip import load_named_clip

    return load_named_clip(name, "--model", device=device, pretrained=pretrained)
