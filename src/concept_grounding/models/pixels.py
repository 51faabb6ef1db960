"""The pixel convention of the project's own models (CNN / ViT backbones, the world CLIP).

Images enter as ``(B, 3, H, W)`` RGB floats in ``[0, 1]`` and are normalised inside the
model with one fixed mean and standard deviation for every channel:
``x' = (x - PIXEL_MEAN) / PIXEL_STD``, i.e. ``[0, 1] -> [-2, 2]``. Models from other
libraries bring their own statistics in their preprocessing (open_clip transforms,
transformers image processors).

>>> import torch
>>> normalize_pixels(torch.tensor([0.0, 0.5, 1.0])).tolist()
[-2.0, 0.0, 2.0]
"""

from __future__ import annotations

import torch

__all__ = ["normalize_pixels"]

#: mean subtracted from ``[0, 1]`` pixels (every channel).
PIXEL_MEAN = 0.5
#: standard deviation the centred pixels are divided by (every channel).
PIXEL_STD = 0.25


def normalize_pixels(images: torch.Tensor) -> torch.Tensor:
    """``(images - PIXEL_MEAN) / PIXEL_STD`` for ``[0, 1]`` images of any shape."""
    return (images - PIXEL_MEAN) / PIXEL_STD
