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

from dataclasses import dataclass
from pathlib import Path

from .generate import finalize, generate_images
from .generate_config import GenerateConfig
from .plan import plan_jobs
from .resume import MANIFEST_ARGUMENTS, check_manifest, generation_manifest
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
    """

    out: Path
    written: int
    planned: int
    metadata: Path | None
    model: FluxModel

    def save(self, out: str | Path) -> Path:
        """The folder's ``metadata.jsonl``: the images and the metadata are written as the job
        runs (the metadata by the main process), so nothing is left to write.

        Raises:
            ValueError: ``out`` is not the folder the job wrote to.
        """
        if Path(out).resolve() != self.out.resolve():
            raise ValueError(f"out: the generate job wrote to {self.out}, its config's out, not {out}")
        return self.metadata if self.metadata is not None else self.out / "metadata.jsonl"


#: A plan of more images than this, without ``max_images``, is announced before any work.
LARGE_PLAN = 1000


def announce_plan(n_pairings: int, config: GenerateConfig) -> None:
    """Warn (one ``UserWarning``) when the plan holds more than :data:`LARGE_PLAN` images and
    ``max_images`` does not bound it: the paper's 500 per pairing is 13,500 images for one
    class's 27 pairings, days of CPU, which a newcomer should hear of before it starts.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     announce_plan(27, GenerateConfig(out=Path("x"), images_per_pairing=500))
    >>> print(caught[0].message)
    13,500 images planned (27 pairings x 500 images per pairing); images_per_pairing / max_images (--images-per-pairing / --max-images) make fewer; a run resumes where it stopped
    """
    import warnings

    planned = n_pairings * config.images_per_pairing
    if planned > LARGE_PLAN and config.max_images is None:
        warnings.warn(f"{planned:,} images planned ({n_pairings} pairings x {config.images_per_pairing} images per "
                      "pairing); images_per_pairing / max_images (--images-per-pairing / --max-images) make fewer; "
                      "a run resumes where it stopped",
                      UserWarning, stacklevel=2)


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
    announce_plan(len(pairings), config)

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
    written = generate_images(pipe, jobs, config, model, process_index=state.process_index,
                              num_processes=state.num_processes, progress=state.is_local_main_process)
    state.wait_for_everyone()
    metadata = finalize(config.out, jobs) if state.is_main_process else None
    return GenerateResult(Path(config.out), written, len(jobs), metadata, model)
