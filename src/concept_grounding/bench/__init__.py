"""``concept-grounding bench``: SUB Tables 1-2 and the Aysel et al. analysis, on the world or CUB + SUB."""

from .config import MODEL_VARIANTS, BenchConfig
from .runner import run_bench

__all__ = ["BenchConfig", "MODEL_VARIANTS", "run_bench"]
