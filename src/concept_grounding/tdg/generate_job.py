"""The ``generate`` job: TDG images for SUB pairings as a resumable image folder (SUB Sec. 4.2).

:func:`run_generate` does, in this order, everything cheap before anything heavy:
(1) the eta schedule override; (2) the pairings, planned by the config's pairing source
(:mod:`.sources`) and narrowed to ``classes`` / ``attributes``; (3) the Flux model's
settings, resolved by its Flux source (a named model fails here, within seconds, before
torch loads); (4) the folder's manifest (:mod:`.resume`: a resume with other settings stops
with every difference, naming the argument behind each); then (5) loads the pipeline,
generates this process's shard with :func:`~.generate.generate_images` (accelerate's
``PartialState`` gives the shard, so ``accelerate launch`` spreads the work) and, on the main
process, merges the metadata with :func:`~.generate.finalize`. It returns a
:class:`GenerateResult` (the job shape of :mod:`concept_grounding.jobs`: a resumable job
writes as it goes, so ``save(out)`` has nothing left to write and returns
``metadata.jsonl``'s path). The command ``concept-grounding generate`` maps its arguments
onto a :class:`~.generate_config.GenerateConfig` and prints one line; the demo builds the
config directly.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..settings import flag
from .generate import finalize, generate_images
from .generate_config import GenerateConfig
from .plan import GenerationJob, plan_jobs
from .resume import MANIFEST_ARGUMENTS, check_manifest, generation_manifest, is_done
from .sources import FluxModel, select_pairings

__all__ = ["GenerateResult", "run_generate"]


@dataclass(frozen=True)
class GenerateResult:
    """What :func:`run_generate` did on this process.

    Attributes:
        out: the image folder.
        written: images this process wrote now (0 when everything was done).
        planned: images in the whole plan (every process).
        metadata: ``<out>/metadata.jsonl`` on the main process, else ``None``.
        model: the resolved model (as recorded in the manifest).
        sheet: the contact sheet the config's ``sheet`` drew (main process), else ``None``.
    """

    out: Path
    written: int
    planned: int
    metadata: Path | None
    model: FluxModel
    sheet: Path | None = None

    def save(self, out: str | Path) -> Path:
        """The folder's ``metadata.jsonl``: the images and the metadata are written as the job
        runs (the metadata by the main process), so nothing is left to write.

        Raises:
            ValueError: ``out`` is not the folder the job wrote to.
        """
        if Path(out).resolve() != self.out.resolve():
            raise ValueError(f"out: the generate job wrote to {self.out}, its config's out, not {out}")
        return self.metadata if self.metadata is not None else self.out / "metadata.jsonl"


def announce_plan(jobs: Sequence[GenerationJob], config: GenerateConfig, model_name: str) -> str:
    """One line announcing the plan before any work (pairings, images, what this run makes), printed on
    stderr; ``UsageError`` naming ``--budget`` when this run would make more than ``config.budget`` new
    images and ``config.yes`` is not set (the paper's 500 per pairing is 742,500 images for 1,485 pairings:
    weeks of CPU, which a newcomer should hear of before it starts). A pairing's own ``images`` count (a
    ``candidates plan`` file) is what is counted.

    >>> from concept_grounding.tdg.plan import Pairing, plan_jobs
    >>> jobs = plan_jobs([Pairing("017.Cardinal", "has_crown_color::black")], 600)
    >>> announce_plan(jobs, GenerateConfig(out=Path("x"), max_images=5), "world")
    'plan: 600 images (1 pairings); this run makes 5 new images with world (time: estimated on the first batch)'
    >>> announce_plan(jobs, GenerateConfig(out=Path("x"), budget=100), "world")
    Traceback (most recent call last):
    ...
    concept_grounding.errors.UsageError: --budget: this run would make 600 new images (over the budget of 100);
    pass --yes to run it, or make fewer with --max-images / --images-per-pairing (a run resumes where it stopped)
    """
    pairings = len({job.pairing for job in jobs})
    todo = len(jobs) if len(jobs) <= config.budget else sum(not is_done(config.out, j) for j in jobs)
    run = todo if config.max_images is None else min(todo, config.max_images)
    line = (
        f"plan: {len(jobs):,} images ({pairings:,} pairings); this run makes {run:,} new images with {model_name} "
        "(time: estimated on the first batch)"
    )
    if run > config.budget and not config.yes:
        raise UsageError(
            f"this run would make {run:,} new images (over the budget of {config.budget:,}); pass --yes "
            "to run it, or make fewer with --max-images / --images-per-pairing (a run resumes where it "
            "stopped)",
            argument=flag(GenerateConfig, "budget"),
        )
    return line


def run_generate(config: GenerateConfig) -> GenerateResult:
    """Generate the config's images into ``config.out`` (steps in the module docstring).

    Raises:
        ValueError: ``config.model`` or ``config.pairings`` is ``None``.
    """
    if config.model is None or config.pairings is None:
        raise ValueError("config.model and config.pairings must name a Flux source and a pairing source")
    # 1. everything cheap first (no torch yet): schedule, pairings, the model's settings, the manifest
    config.eta_schedule()
    planned = config.pairings.plan(config.attributes)
    pairings = select_pairings(planned, config.classes, config.attributes)
    model = config.model.resolve()
    # expanding every (pairing, image) job takes seconds at the paper's N = 500: after the checks
    jobs = plan_jobs(pairings, config.images_per_pairing, config.seed)
    check_manifest(config.out, generation_manifest(jobs, config, model), MANIFEST_ARGUMENTS)
    print(announce_plan(jobs, config, model.name), file=sys.stderr, flush=True)  # noqa: T201 - the command's plan line

    # 2. the pipeline, on this process's device
    import torch
    from accelerate import PartialState

    # cpu=True without CUDA: under torchrun (or any launcher that sets WORLD_SIZE but not
    # accelerate's own CPU flag) the processes then form a gloo group and take their shards;
    # without it each CPU process believed it was alone and generated the whole plan.
    state = PartialState(cpu=not torch.cuda.is_available())
    pipe = model.load()
    pipe.to(state.device)
    pipe.set_progress_bar_config(disable=True)

    # 3. generate this process's shard, then merge the metadata
    written = generate_images(
        pipe,
        jobs,
        config,
        model,
        process_index=state.process_index,
        num_processes=state.num_processes,
        progress=state.is_local_main_process,
    )
    state.wait_for_everyone()
    metadata = finalize(config.out, jobs) if state.is_main_process else None
    sheet = config.sheet(Path(config.out)) if config.sheet is not None and metadata is not None else None
    return GenerateResult(Path(config.out), written, len(jobs), metadata, model, sheet)
