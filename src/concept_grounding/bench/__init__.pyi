from .config import MODEL_VARIANTS, BenchConfig
from .runner import BenchResult, run_bench, run_bench_job
