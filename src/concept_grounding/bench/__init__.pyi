from .config import MODEL_VARIANTS, BenchConfig
from .runner import run_bench
