"""The demo job: the main job on the bird world, end to end (``concept-grounding demo``, ``make demo``).

:func:`run_demo` (``DemoConfig -> DemoResult``) runs each stage into its own sub-folder of
``config.out`` as it goes (a stage that fails stops the demo with its error; stages already
written stay on disk, and ``resume`` skips them), then ``DemoResult.save(out)`` writes the
index ``README.md`` that links them and ``timings.json``. The settings live in
:mod:`concept_grounding.demo_config`, the stages in :mod:`concept_grounding.demo_stages`.
"""

from __future__ import annotations

import json
import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from .cpu import choose_threads, limited_threads, set_threads
from .demo_config import DEMO_LEARNERS, DEMO_TABLE8, REPEATED_MODELS, DemoConfig
from .demo_stages import STAGES

__all__ = ["DemoResult", "run_demo"]

logger = logging.getLogger(__name__)


def dropped(config: DemoConfig) -> str | None:
    """What the default demo leaves out to fit 12 minutes on two cores, and the command that runs it;
    ``None`` for ``--full`` and ``--quick`` runs and when no stage it shortens runs."""
    if config.full or config.quick:
        return None
    left_out = []
    if "bench" in config.stage_names:
        left_out.append(
            f"Table 1's {' and '.join(REPEATED_MODELS)} rows (on the world they are the per-image"
            " rows number for number)"
        )
    if "conceptbed" in config.stage_names:
        left_out.append(
            "ConceptBed's DreamBooth and Custom Diffusion learners and Table 8's large judge (it keeps"
            f" {' and '.join(DEMO_LEARNERS)}, and the {' and '.join(DEMO_TABLE8)} judges)"
        )
    if not left_out:
        return None
    return (
        f"To fit 12 minutes on two cores this run leaves out {'; and '.join(left_out)}."
        " `concept-grounding demo --full` runs everything (docs/guide/demo.md)."
    )


@dataclass
class DemoResult:
    """What :func:`run_demo` ran: one index line per stage (Markdown) and its seconds."""

    config: DemoConfig
    lines: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def save(self, out: str | Path) -> Path:
        """``timings.json`` and the index ``README.md`` under ``out``; returns the index's path."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "timings.json").write_text(json.dumps(self.timings, indent=2))
        note = dropped(self.config)
        (out / "README.md").write_text(
            "# concept-grounding demo report\n\n"
            + "\n".join(self.lines)
            + ("" if note is None else f"\n\n{note}")
            + "\n\nStage timings (s): "
            + ", ".join(f"{k} {v}" for k, v in self.timings.items())
            + "\n"
        )
        return out / "README.md"


#: stages that read no other stage's output and train on one thread: with two free cores they run in a
#: second process beside the others
BESIDE: tuple[str, ...] = ("conceptbed",)


def _run_stage(name: str, out: Path, config: DemoConfig, threads: int | None = None) -> tuple[str, float]:
    """Run stage ``name`` into ``out/name`` (at ``threads`` CPU threads if given) and mark it done
    (``.done``: its index line and seconds); returns both."""
    if threads is not None:
        set_threads(threads)
    logger.info("== %s ==", name)
    start = time.perf_counter()
    line = STAGES[name](out / name, config)
    seconds = round(time.perf_counter() - start, 2)
    (out / name / ".done").write_text(json.dumps([line, seconds, config.full]))
    logger.info("%s done in %.1f s", name, seconds)
    return line, seconds


def finished_stage(folder: Path, full: bool) -> tuple[str, float] | None:
    """The index line and seconds of the stage run in ``folder`` if it finished at the same scope
    (``--full`` or not), else ``None``: a default run's shortened stage is not a ``--full`` run's.
    A ``.done`` of two entries predates the default run's shortening, so it was a full run.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = (Path(tmp) / ".done").write_text('["bench: ok", 1.5, false]')
    ...     finished_stage(Path(tmp), full=False), finished_stage(Path(tmp), full=True)
    (('bench: ok', 1.5), None)
    """
    marker = folder / ".done"
    if not marker.is_file():
        return None
    line, seconds, *scope = json.loads(marker.read_text())
    ran_full = scope[0] if scope else True
    return (line, seconds) if ran_full == full else None


def _beside(todo: list[str]) -> list[str]:
    """The stages of ``todo`` to run in a second process: :data:`BESIDE`'s, when other stages run too and
    this process may use two threads or more (:func:`~concept_grounding.cpu.choose_threads`)."""
    threads = choose_threads().threads
    beside = [name for name in todo if name in BESIDE]
    return beside if threads is not None and threads >= 2 and len(beside) < len(todo) else []


def run_demo(config: DemoConfig) -> DemoResult:
    """Run the configured stages into ``config.out/<stage>`` (each marks itself done with
    ``.done``: its index line and seconds, which ``resume`` reads back). With two free cores the
    :data:`BESIDE` stages run in a second process, one thread each."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    stages = config.stage_names
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    result = DemoResult(config)
    done: dict[str, tuple[str, float]] = {}
    for name in stages:
        finished = finished_stage(out / name, config.full) if config.resume else None
        if finished is not None:
            logger.info("== %s == (done in an earlier run, skipped)", name)
            done[name] = finished
    todo = [name for name in stages if name not in done]
    beside = _beside(todo)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) if beside else nullcontext() as pool:
        futures = {name: pool.submit(_run_stage, name, out, config, 1) for name in beside}
        with limited_threads(1) if beside else nullcontext():
            for name in todo:
                if name not in futures:
                    done[name] = _run_stage(name, out, config)
        done.update({name: future.result() for name, future in futures.items()})
    for name in stages:
        line, result.timings[name] = done[name]
        result.lines.append(f"- {line}")
    return result
