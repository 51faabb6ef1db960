"""Load a CLIP for CCI and COVAR (``explain``, ``covar``, ``cci-bench``, ``diagnose``, the Space) as a
:class:`~concept_grounding.models.clip.ClipHandle`.

``--model`` / ``--models`` take:

* nothing or :data:`WORLD_CLIP` (``world-clip``): the trained world CLIP shipped with the package
  (:data:`SHIPPED_WORLD_CLIP`, 64 px; it knows only the bird world's words and birds);
* :data:`RANDOM_CLIP` (``random-clip``, or ``random-clip:<seed>``): a tiny config-built open_clip
  CLIP with *random weights*, asked for by name: the mechanics run, the explanations mean nothing;
* a folder saved by ``WorldCLIP`` (e.g. the one ``bench`` trains, ``reports/demo/bench/models/world-clip``),
  an open_clip architecture name or a transformers id/path (through
  :func:`concept_grounding.models.clip.load_named_clip`, which first checks with
  :func:`concept_grounding.hub.resolve_clip` that it is a local folder, cached, or reachable:
  an unavailable name fails within seconds with a message saying how to get it).

The class prompt is :func:`concept_grounding.models.clip.class_caption`.

>>> builtin_clip("world-clip"), builtin_clip("random-clip:3"), builtin_clip("ViT-B-32")
(True, True, False)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..shipped_models import SHIPPED_MODELS

if TYPE_CHECKING:  # pragma: no cover
    from concept_grounding.models.clip import ClipHandle

__all__ = ["load_explainable_clip", "builtin_clip", "WORLD_CLIP", "RANDOM_CLIP", "SHIPPED_WORLD_CLIP"]

#: the name of the trained world CLIP shipped with the package (every CCI command's default)
WORLD_CLIP = "world-clip"
#: the name that asks for a tiny random-weight CLIP on purpose (``random-clip:<seed>`` picks its seed)
RANDOM_CLIP = "random-clip"
#: where the shipped world CLIP lives (trained on the bird world; ``space_build.json`` holds its recipe)
SHIPPED_WORLD_CLIP = SHIPPED_MODELS[WORLD_CLIP].path


def builtin_clip(name: str | None) -> bool:
    """Whether ``name`` is one of the package's own CLIPs (empty, ``world-clip``, ``random-clip[:seed]``)
    rather than a folder or a model name to resolve; an existing folder of that name wins."""
    if not name:
        return True
    if Path(name).exists():
        return False
    return name in (WORLD_CLIP, RANDOM_CLIP) or name.startswith(RANDOM_CLIP + ":")


def random_clip_seed(name: str, argument: str = "--model") -> int:
    """The seed of ``random-clip[:seed]`` (0 without one); ``UsageError`` naming ``argument`` otherwise."""
    seed = name.partition(":")[2]
    if seed and not seed.isdigit():
        raise UsageError(f"{name!r}: {RANDOM_CLIP}:<seed> takes an integer seed", argument=argument)
    return int(seed or 0)


def tiny_open_clip_handle(
    image_size: int = 64,
    device: str = "cpu",
    *,
    patch_size: int | None = None,
    width: int = 64,
    layers: int = 4,
    heads: int = 4,
    embed_dim: int = 32,
    seed: int = 0,
) -> ClipHandle:
    """A tiny config-built open_clip CLIP (random weights,
    :func:`~concept_grounding.models.clip.tiny.tiny_open_clip`) with open_clip's bundled BPE tokenizer and CLIP's
    pixel statistics (:func:`~concept_grounding.models.clip.preprocess.to_pixel_values`, ``image_size`` px)."""
    import open_clip

    from concept_grounding.models.clip import ClipHandle
    from concept_grounding.models.clip.preprocess import to_pixel_values
    from concept_grounding.models.clip.tiny import tiny_open_clip

    model = tiny_open_clip(
        image_size=image_size,
        patch_size=patch_size or max(4, image_size // 8),
        width=width,
        layers=layers,
        heads=heads,
        embed_dim=embed_dim,
        seed=seed,
    ).to(device)
    return ClipHandle(
        model,
        open_clip.get_tokenizer("ViT-B-16"),
        lambda ims: to_pixel_values(ims, (image_size, image_size)),
        "open_clip",
        f"{RANDOM_CLIP}: tiny open_clip ViT with RANDOM weights ({image_size} px, seed {seed})",
        random_weights=True,
    )


def shipped_world_clip(device: str = "cpu") -> ClipHandle:
    """The trained world CLIP shipped with the package (:data:`SHIPPED_WORLD_CLIP`)."""
    from concept_grounding.models.clip import WorldCLIP, world_clip_handle

    model = WorldCLIP.from_pretrained(str(SHIPPED_WORLD_CLIP)).to(device)
    return world_clip_handle(model, f"shipped world CLIP ({model.image_size} px, trained on the bird world only)")


def load_explainable_clip(
    name: str | None = None,
    image_size: int = 64,
    device: str = "cpu",
    pretrained: str | None = None,
    argument: str = "--model",
) -> ClipHandle:
    """Load ``name`` (see module doc; an open_clip architecture with its weights tag ``pretrained``):
    nothing or ``world-clip`` is the shipped world CLIP, ``random-clip[:seed]`` the tiny random one
    at ``image_size`` px."""
    if builtin_clip(name):
        if name and name.startswith(RANDOM_CLIP):
            return tiny_open_clip_handle(image_size, device, seed=random_clip_seed(name, argument))
        return shipped_world_clip(device)
    from concept_grounding.models.clip import load_named_clip

    return load_named_clip(name, argument, device=device, pretrained=pretrained)
