"""``concept-grounding bench``: the SUB benchmark and the Aysel et al. analysis.

One run, in numbered steps:

1. data: the bird world (train / test / exact counterfactuals) or CUB + SUB;
2. Table 1: every binary concept model of :data:`~.config.MODEL_VARIANTS` trained on the
   train split, scored for s+ / s- on SUB and for concept accuracy on the test split,
   beside reference rows (random chance; on the world an oracle that reads the true
   concepts and a class prior that recites the class-level vector);
3. the post-hoc CBM (Yuksekgonul et al.): CGIM, concept existence, concept location and
   CoAM galleries (Aysel et al.);
4. Table 2: open-vocabulary models in SUB's group mode (a small CLIP trained on the
   world, and any named model);
5. the report: ``report.md``, ``results.json``, PNGs (:meth:`BenchResult.save`); the saved
   models, ``config.json`` and the post-hoc CBM's figures are written as the run goes.

The whole run sits inside :func:`~concept_grounding.models.training.reproducible`
(``config.threads`` CPU threads, deterministic kernels, seeded), so the same
configuration on the same machine writes the same ``results.json`` byte for byte; what
depends on the moment and the machine (wall times, library versions, CPU) goes to
``timings.json``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import write_json, write_report
from ..vocabulary import load_vocabulary
from .artifacts import BenchArtifacts
from .ccd import ccd_analysis
from .config import BenchConfig
from .context import BenchContext, Split
from .data import BenchData, concept_columns, load_bench_data
from .report import bench_markdown, plot_breakdowns
from .tables import clip_row_name, posthoc_analysis, table1, table2

logger = logging.getLogger(__name__)

__all__ = ["run_bench", "run_bench_job", "BenchResult"]


@dataclass
class BenchResult:
    """What a bench run computed: the job result of ``concept-grounding bench``.

    The run wrote its models, ``config.json`` and the post-hoc CBM's figures under
    ``config.out`` as it went; :meth:`save` writes the report on top of them.

    Attributes:
        config: the run's configuration.
        data: the train / test / SUB data the run used (the report states their sizes).
        columns: the 0-based CUB attributes of the concept set.
        results: everything ``results.json`` holds (``source``, ``concepts``, ``table1``,
            ``table2``, ``posthoc``, ``ccd``).
        timings: wall time (s) of each step; model_seconds: of each Table 1 model.
        environment: library versions, CPU and threads of the run (:func:`_environment`).
    """

    config: BenchConfig
    data: BenchData
    columns: tuple[int, ...]
    results: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)
    model_seconds: dict[str, float] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)

    def save(self, out: str | Path) -> Path:
        """Write the report under ``out`` (normally ``config.out``): the per-model s+ / s- plots,
        ``timings.json``, ``results.json`` and ``report.md``; returns ``report.md``'s path."""
        out = Path(out)
        files = BenchArtifacts(out)
        r = self.results
        out.mkdir(parents=True, exist_ok=True)
        plots = plot_breakdowns(r["table1"] + r["table2"], out)
        write_json(
            files.timings_json,
            {"steps_seconds": self.timings, "model_seconds": self.model_seconds, "environment": self.environment},
        )
        markdown = bench_markdown(
            self.config,
            self.data,
            self.columns,
            r["table1"],
            r["table2"],
            r["posthoc"] or None,
            self.timings,
            plots,
            r["ccd"],
        )
        write_report(out, r, markdown, results_name=files.results_json.name, report_name=files.report_md.name)
        self.write_eval_results(out)
        logger.info("bench report: %s", files.report_md)
        return files.report_md

    def write_eval_results(self, out: Path) -> list[Path]:
        """``out/eval_results/<model>/bench.yaml`` per Table 1 / 2 model (:mod:`concept_grounding.eval_results`):
        s+, s- and, where measured, concept and class accuracy on the world's SUB-style set (or SUB)."""
        from ..eval_results import WORLD_SUB_DATASET, result_entries, write_eval_results

        dataset = WORLD_SUB_DATASET if self.data.source == "world" else str(self.config.sub or "Jessica-bader/SUB")
        notes = f"concept-grounding bench, {len(self.columns)} concepts, world seed {self.config.world.seed}"
        tasks = ("s_plus", "s_minus", "concept_accuracy", "class_accuracy")
        written = []
        for row in self.results["table1"] + self.results["table2"]:
            values = {k: row[k] for k in tasks if isinstance(row.get(k), (int, float))}
            path = write_eval_results(out, row["name"], "bench", result_entries(dataset, values, notes=notes))
            written += [path] if path else []
        return written


def run_bench_job(config: BenchConfig) -> BenchResult:
    """Run the benchmark (module docstring, steps 1-4), writing the models, ``config.json`` and
    the post-hoc CBM's figures under ``config.out`` as it goes; the report is the result's
    :meth:`~BenchResult.save`.

    Runs inside :func:`~concept_grounding.models.training.reproducible` with
    ``config.world.seed`` and ``config.threads``: the caller's thread count, RNG state and
    deterministic-algorithm setting are restored afterwards.

    Raises:
        ValueError: ``config.out`` is not set (the run folder is written as the run goes).
    """
    from ..models.training import reproducible

    if config.out is None:
        raise ValueError("out: a bench run writes its models as it goes; give its folder (BenchConfig(out=...))")
    with reproducible(config.world.seed, config.threads):
        return _run(config, Path(config.out))


def run_bench(config: BenchConfig, out: str | Path) -> dict[str, Any]:
    """Run the benchmark into ``out`` and write its report folder (:func:`run_bench_job`, then
    :meth:`BenchResult.save`); returns everything ``results.json`` holds."""
    result = run_bench_job(replace(config, out=Path(out)))
    result.save(out)
    return result.results


def _environment() -> dict[str, Any]:
    """What makes another machine's floats differ: library versions, CPU, threads."""
    import platform

    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cpu": platform.processor() or platform.machine(),
        "torch_threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def _run(config: BenchConfig, out: Path) -> BenchResult:
    from ..models.data import images_to_tensor

    vocab = load_vocabulary()
    out.mkdir(parents=True, exist_ok=True)
    files = BenchArtifacts(out)
    config.save(files.config_json)
    timings: dict[str, float] = {}
    model_seconds: dict[str, float] = {}

    def timed(name: str, fn, *args):
        start = time.perf_counter()
        logger.info("bench: %s", name)
        result = fn(*args)
        timings[name] = time.perf_counter() - start
        return result

    # 0. named models are loaded first, so that a bad name fails before any training
    clips = []
    if config.clip_model:
        from ..models.clip import load_clip

        clips = [(clip_row_name(name, tag), load_clip(name, pretrained=tag)) for name, tag in config.named_clips()]
    # 1. data
    data = timed("data", load_bench_data, config, vocab)
    columns = concept_columns(config, data, vocab)
    if not columns:
        raise ValueError("no concept of the chosen set is ever positive in the training split")
    size = config.world.image_size
    train = Split(data.train, columns, size)
    test = Split(data.test, columns, size)
    sub_images = images_to_tensor(data.sub["image"], size)
    ctx = BenchContext(data, train, test, sub_images, tuple(columns), vocab, config, out)
    # 2-4. models
    t1, models = timed("table 1 models", table1, ctx, model_seconds) if config.models else ([], {})
    ccd = None
    if models:
        oracle = "CBM (joint)" if "CBM (joint)" in models else next(iter(models))
        ccd = ccd_analysis(oracle, models[oracle], data, test, sub_images)
    posthoc = timed("post-hoc CBM", posthoc_analysis, ctx) if config.posthoc else None
    if posthoc:
        t1.append(posthoc["sub_row"])
    t2 = timed("table 2 models", table2, ctx, clips) if (config.clip or clips) else []
    results = {
        "source": data.source,
        "concepts": [vocab.attributes[i] for i in columns],
        "table1": t1,
        "table2": t2,
        "posthoc": {k: v for k, v in (posthoc or {}).items() if k != "sub_row"},
        "ccd": ccd,
    }
    return BenchResult(config, data, tuple(columns), results, timings, model_seconds, _environment())
