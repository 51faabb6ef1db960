"""The output of every image backbone (:mod:`concept_grounding.models.backbone`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["BackboneOutput"]


@dataclass
class BackboneOutput:
    """``pooled`` ``(B, d)``; ``features`` ``(B, d, h, w)`` (CNN) or ``(B, N, d)`` (ViT);
    ``grid_size`` ``(h, w)`` of the feature map / patch grid."""

    pooled: torch.Tensor
    features: torch.Tensor
    grid_size: tuple[int, int]
