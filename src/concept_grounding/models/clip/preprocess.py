"""Generic CLIP preprocessing for models that bring none (the random-weight test CLIP, COVAR's default).

Each image is resized on its own to the model's input side, so a batch may mix photos of any size
and aspect (as an open_clip transform or a transformers image processor takes them), then
normalised with OpenAI CLIP's statistics.

>>> import numpy as np
>>> images = [np.zeros((300, 451, 3), np.uint8), np.full((97, 233, 3), 255, np.uint8)]
>>> x = to_pixel_values(images, (32, 32))
>>> tuple(x.shape), round(float(x[1, 0, 0, 0]), 3)
((2, 3, 32, 32), 1.93)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["CLIP_MEAN", "CLIP_STD", "to_pixel_values"]

#: CLIP's preprocessing statistics (OpenAI)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def _resized(image: Any, image_size: tuple[int, int]) -> torch.Tensor:
    """One ``(H, W, 3) uint8`` array or PIL image -> ``(1, 3, h, w)`` floats in ``[0, 1]`` (bilinear, antialiased)."""
    arr = np.asarray(image.convert("RGB") if hasattr(image, "convert") else image, dtype=np.float32) / 255.0
    x = torch.from_numpy(arr).permute(2, 0, 1)[None]
    if tuple(x.shape[2:]) != tuple(image_size):
        x = F.interpolate(x, size=tuple(image_size), mode="bilinear", align_corners=False, antialias=True)
    return x


def to_pixel_values(images: Sequence[Any], image_size: tuple[int, int]) -> torch.Tensor:
    """``(H_i, W_i, 3) uint8`` arrays or PIL images of any sizes -> ``(B, 3, h, w)`` CLIP-normalised floats
    (each image resized to ``image_size = (h, w)``, then ``(x - CLIP_MEAN) / CLIP_STD`` per channel)."""
    x = torch.cat([_resized(im, image_size) for im in images])
    mean = torch.tensor(CLIP_MEAN)[None, :, None, None]
    std = torch.tensor(CLIP_STD)[None, :, None, None]
    return (x - mean) / std
