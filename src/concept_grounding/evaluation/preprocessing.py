"""Image preprocessing of a user's model: PIL images -> the ``(B, 3, H, W)`` batch it reads.

One callable type, :data:`Preprocess` (``list[PIL.Image] -> torch.Tensor``), built by
:func:`make_preprocess` from whatever the model comes with:

* a torchvision transform (``PIL -> (3, H, W)`` tensor), applied per image and stacked;
* a Hugging Face image processor (``processor(images=..., return_tensors="pt")``);
* ``size`` + ``mean`` / ``std``: bilinear resize to ``size x size``, scale to [0, 1],
  then ``(x - mean) / std`` per channel (no ``mean`` / ``std``: the [0, 1] images, the
  convention of every model in :mod:`concept_grounding.models`; a user's binary concept
  model must ask for them with ``normalize=False``, see
  :class:`~.adapters.BinaryConceptModel`).

>>> from PIL import Image
>>> pre = make_preprocess(size=4, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
>>> x = pre([Image.new("RGB", (8, 8), (255, 0, 128))])
>>> tuple(x.shape), [round(float(v), 3) for v in x[0, :, 0, 0]]
((1, 3, 4, 4), [1.0, -1.0, 0.004])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import UsageError, option
from ..models.data import images_to_tensor

__all__ = ["make_preprocess", "IMAGENET_MEAN", "IMAGENET_STD"]

#: ``list of PIL images -> (B, 3, H, W) float tensor``
Preprocess = Callable[[Sequence[Any]], torch.Tensor]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _per_image(transform: Callable) -> Preprocess:
    def apply(images: Sequence[Any]) -> torch.Tensor:
        return torch.stack([transform(im.convert("RGB") if hasattr(im, "convert") else im) for im in images])

    return apply


def _processor(processor: Any) -> Preprocess:
    def apply(images: Sequence[Any]) -> torch.Tensor:
        return processor(images=[im.convert("RGB") for im in images], return_tensors="pt")["pixel_values"]

    return apply


def _resize_normalise(size: int | None, mean: Sequence[float] | None, std: Sequence[float] | None) -> Preprocess:
    m = None if mean is None else torch.tensor([float(v) for v in mean]).view(1, 3, 1, 1)
    s = None if std is None else torch.tensor([float(v) for v in std]).view(1, 3, 1, 1)

    def apply(images: Sequence[Any]) -> torch.Tensor:
        if not len(images):
            return torch.empty(0, 3, size or 0, size or 0)
        first = images[0]
        x = images_to_tensor(images, size or (first.size[0] if hasattr(first, "convert") else first.shape[1]))
        if m is not None:
            x = x.sub_(m)
        if s is not None:
            x = x.div_(s)
        return x

    return apply


def make_preprocess(
    transform: Callable | None = None,
    *,
    processor: Any | None = None,
    size: int | None = None,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
) -> Preprocess:
    """A :data:`Preprocess` from one of: a torchvision ``transform``, an HF image
    ``processor``, or ``size`` (px, square; ``None`` keeps each image's own width) with
    optional per-channel ``mean`` / ``std`` applied to [0, 1] pixels.

    Raises:
        ValueError: more than one kind given, or ``mean`` / ``std`` not 3 numbers / ``std`` has a 0.
    """
    given = [n for n, v in (("transform", transform), ("processor", processor)) if v is not None]
    if len(given) > 1 or (given and (size or mean or std)):
        raise UsageError(
            f"preprocessing: pass one of {option('transform')}, {option('processor')} or "
            f"{option('size')} / {option('mean')} / {option('std')}, not several"
        )
    if transform is not None:
        if not callable(transform):
            raise ValueError(f"transform must be callable (PIL image -> tensor), got {type(transform).__name__}")
        return _per_image(transform)
    if processor is not None:
        return _processor(processor)
    for name, value in (("mean", mean), ("std", std)):
        if value is not None and len(value) != 3:
            raise ValueError(f"{name} must have 3 values (R, G, B), got {list(value)}")
    if std is not None and any(float(v) == 0 for v in std):
        raise ValueError(f"std must be non-zero, got {list(std)}")
    if size is not None and int(size) < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    return _resize_normalise(None if size is None else int(size), mean, std)
