"""What every CCI explainer returns (the protocol lives in :mod:`.explainers`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["Explanation"]


@dataclass
class Explanation:
    """What every explainer returns: ``maps`` ``(B, H, W)``, higher = more important, at the
    model's input resolution."""

    maps: torch.Tensor
