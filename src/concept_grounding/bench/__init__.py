"""``concept-grounding bench``: SUB Tables 1-2 and the Aysel et al. analysis, on the world or CUB + SUB.

The names below are loaded on first use, so that importing
:mod:`concept_grounding.bench.artifacts` (the demo, the Space, the CLI) does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import MODEL_VARIANTS, BenchConfig
    from .runner import run_bench

__all__ = ["BenchConfig", "MODEL_VARIANTS", "run_bench"]


def __getattr__(name: str) -> Any:
    if name in ("BenchConfig", "MODEL_VARIANTS"):
        from . import config

        return getattr(config, name)
    if name == "run_bench":
        from .runner import run_bench

        return run_bench
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
