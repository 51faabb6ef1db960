"""The ``generate`` job: TDG images for SUB pairings as a resumable image folder (SUB Sec. 4.2).

:func:`run_generate` does, in this order, everything cheap before anything heavy:
(1) the eta schedule override; (2) the pairings, planned by a :class:`PairingSource` and
narrowed to ``classes`` / ``attributes``; (3) the Flux model's settings, resolved by a
:class:`FluxSource` (a named model fails here, within seconds, before torch loads); (4) the
folder's manifest (a resume with other settings stops with every difference); then
(5) loads the pipeline, generates this process's shard with
:func:`~concept_grounding.tdg.generate.generate_images` (accelerate's ``PartialState``
gives the shard, so ``accelerate launch`` spreads the work) and, on the main process,
merges the metadata with :func:`~concept_grounding.tdg.generate.finalize`. It returns a
:class:`GenerateResult`. The command ``concept-grounding generate`` maps its arguments onto
a :class:`GenerateConfig` and prints one line; the demo builds the config directly.

Sources are the extension point for what the ``tdg`` package may not import itself
(README, "newcomer's map": ``tdg`` imports only the base): this module ships
:class:`TinyFlux`, :class:`PretrainedFlux`, :class:`PairingsFile` and
:class:`ClassTablePairings`; the world Flux and the bird world's pairings come from
:mod:`concept_grounding.worldflux.source`, CUB's class table from
:mod:`concept_grounding.loaders.class_table`.

Errors name the command-line argument behind each setting (``--classes``, ``--t-min/--t-max``,
:data:`MANIFEST_ARGUMENTS`), because this job is what that command runs.

>>> GenerateConfig(out=Path("gen"), model=TinyFlux(), pairings=PairingsFile(Path("p.txt")), t_min=0.3).eta_schedule()
EtaSchedule(t_min=0.3, t_max=0.9, k=10.0)
>>> GenerateConfig(out=Path("gen"), model=TinyFlux(), pairings=PairingsFile(Path("p.txt"))).eta_schedule() is None
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import UsageError
from .generate import (
    GenerationSettings,
    Pairing,
    check_manifest,
    finalize,
    generate_images,
    generation_manifest,
    plan_jobs,
    plan_pairings,
    read_pairings,
)
from .acceleration import Acceleration
from .schedule import EtaSchedule

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "FluxModel", "FluxSource", "TinyFlux", "PretrainedFlux", "PairingSource", "ClassTablePairings", "PairingsFile",
    "GenerateConfig", "GenerateResult", "run_generate", "TINY_MODEL"
]

#: The manifest's ``model`` of :class:`TinyFlux`.
TINY_MODEL = "tiny_flux_pipeline(seed=0)"

#: manifest setting -> the argument that sets it (for resume messages)
MANIFEST_ARGUMENTS = {
    "model": "--model/--tiny", "dtype": "--dtype", "seed": "--seed", "method": "--method",
    "num_inference_steps": "--steps", "guidance_scale": "--guidance-scale", "height": "--size", "width": "--size",
    "max_sequence_length": "--tiny/--model", "schedule": "--t-min/--t-max/--k", "save_guides": "--save-guides",
    "batch_size": "--batch-size", "pairings": "--classes/--attributes/--pairings/--images-per-pairing",
    "cache": "--cache", "compile": "--compile",
}


# ---------------------------------------------------------------------------- models


@dataclass(frozen=True)
class FluxModel:
    """A resolved Flux model: what the manifest records about it, and how to load it.

    Attributes:
        name: recorded as the manifest's ``model`` (a resolved Hub id or folder, ``"world"``, ...).
        dtype: recorded as the manifest's ``dtype`` (``"float32"``, ``"bfloat16"``, ...).
        default_size: image side in pixels when the config gives none.
        max_sequence_length: T5 prompt length in tokens.
        load: builds the :class:`~concept_grounding.tdg.TiedDiffusionPipeline` (torch loads here).
        extra: further keyword arguments of every pipeline call (e.g. true CFG).
    """

    name: str
    dtype: str
    default_size: int
    max_sequence_length: int
    load: Callable[[], Any] = field(compare=False, repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict)


class FluxSource(Protocol):
    """Resolves a Flux model's settings without loading torch; a bad name raises ``UsageError``."""

    def resolve(self) -> FluxModel: ...


def _tiny_pipeline() -> Any:
    from concept_grounding.testing import tiny_flux_pipeline  # the module attribute: tests may replace it

    return tiny_flux_pipeline()


@dataclass(frozen=True)
class TinyFlux:
    """The tiny random Flux built offline (tests, demo): float32, 32 px, 32-token prompts."""

    def resolve(self) -> FluxModel:
        return FluxModel(TINY_MODEL, "float32", 32, 32, _tiny_pipeline)


@dataclass(frozen=True)
class PretrainedFlux:
    """A FLUX checkpoint: Hub id or folder, resolved by :func:`concept_grounding.hub.resolve_model`
    (local, cached, or a clear error within seconds), loaded in ``dtype``; 1024 px, 512 tokens.

    Args:
        name: e.g. ``"black-forest-labs/FLUX.1-dev"`` or a folder.
        dtype: ``"bfloat16"``, ``"float16"`` or ``"float32"``.
        argument: the argument that errors about ``name`` name.
    """

    name: str
    dtype: str = "bfloat16"
    argument: str = "--model"

    def resolve(self) -> FluxModel:
        from ..hub import resolve_model

        resolved, dtype = resolve_model(self.name, self.argument), self.dtype

        def load() -> Any:
            from .loading import load_flux_pipeline

            return load_flux_pipeline(resolved, dtype)

        return FluxModel(resolved, dtype, 1024, 512, load)


# ---------------------------------------------------------------------------- pairings


@dataclass(frozen=True)
class PlannedPairings:
    """What a :class:`PairingSource` planned.

    Attributes:
        pairings: in plan order.
        class_names: the classes ``classes`` may choose from.
        description: how errors name the source (``"the bird world (33 SUB classes)"``).
    """

    pairings: list[Pairing]
    class_names: Sequence[str]
    description: str


class PairingSource(Protocol):
    """Plans the pairings; ``attributes`` (``None``: SUB's 32 substitutions) is the target list
    of a class table (a file lists its own)."""

    def plan(self, attributes: Sequence[str] | None) -> PlannedPairings: ...


class ClassTable(Protocol):
    """``class_names`` (C,) and their (C, 312) 0/1 class-level labels; a
    :class:`~concept_grounding.world.BirdWorld` is one."""

    class_names: Sequence[str]
    class_attributes: np.ndarray


@dataclass(frozen=True)
class ClassTablePairings:
    """Every (class, attribute) whose attribute the class lacks (:func:`~concept_grounding.tdg.generate.plan_pairings`).

    Args:
        load: builds the :class:`ClassTable` (called by :meth:`plan`, so errors come in order).
        description: how errors name the source; ``{num_classes}`` is replaced by C.
    """

    load: Callable[[], ClassTable]
    description: str

    def plan(self, attributes: Sequence[str] | None) -> PlannedPairings:
        table = self.load()
        names = table.class_names
        return PlannedPairings(plan_pairings(names, table.class_attributes, attributes), names,
                               self.description.replace("{num_classes}", str(len(names))))


@dataclass(frozen=True)
class PairingsFile:
    """Pairings listed in a file (see :func:`~concept_grounding.tdg.generate.read_pairings`)."""

    path: Path

    def plan(self, attributes: Sequence[str] | None) -> PlannedPairings:
        pairings = read_pairings(self.path)
        return PlannedPairings(pairings, sorted({p.reference_class for p in pairings}),
                               f"the pairings file {self.path}")


def select_pairings(planned: PlannedPairings, classes: Sequence[str] | None,
                    attributes: Sequence[str] | None) -> list[Pairing]:
    """The planned pairings of ``classes`` and ``attributes`` (empty or ``None``: all).

    Raises:
        UsageError: a class is not among the source's, or no pairing is left.
    """
    pairings, names, source = planned.pairings, planned.class_names, planned.description
    if classes:
        known, chosen = set(names), set(classes)
        missing = [c for c in classes if c not in known]
        if missing:
            raise UsageError(f"{missing} not among the classes of {source}", argument="--classes",
                             hint=f"choose from {list(names)[:6]}...")
        pairings = [p for p in pairings if p.reference_class in chosen]
    if attributes:
        targets = set(attributes)
        pairings = [p for p in pairings if p.target_attribute in targets]
    if not pairings:
        raise UsageError(f"no (class, attribute) pairing is left to generate from {source}: every selected class "
                         "already has every selected attribute", argument="--classes/--attributes",
                         hint="choose other classes or attributes")
    return pairings


# ---------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class GenerateConfig:
    """What to generate, where, and how.

    Args:
        out: the image folder (resumable; its manifest must match).
        model: the Flux to sample (:class:`TinyFlux`, :class:`PretrainedFlux`, the world Flux).
        pairings: where the pairings come from (a class table or a file).
        classes: keep only these CUB class folder names (``None`` or empty: all).
        attributes: target attributes (``None``: SUB's 32; with a file, a filter only).
        images_per_pairing: N (paper: 500).
        seed: base seed of the per-image seeds.
        method: ``"tdg"`` or ``"prompting"``.
        steps, guidance_scale: denoising steps and (distilled) guidance scale.
        size: image side in pixels (``None``: the model's default).
        t_min, t_max, k: override the paper's schedule (``None``: 0.2, 0.9, 10 when any is set).
        batch_size: images per pipeline call.
        max_images: stop after this many new images (``None``: all).
        save_guides: also write each guide image to ``.guides/``.
        acceleration: a diffusers transformer cache and/or ``torch.compile`` (``--cache``, ``--compile``).
    """

    out: Path
    model: FluxSource
    pairings: PairingSource
    classes: Sequence[str] | None = None
    attributes: Sequence[str] | None = None
    images_per_pairing: int = 500
    seed: int = 0
    method: str = "tdg"
    steps: int = 28
    guidance_scale: float = 3.5
    size: int | None = None
    t_min: float | None = None
    t_max: float | None = None
    k: float | None = None
    batch_size: int = 4
    max_images: int | None = None
    save_guides: bool = False
    acceleration: Acceleration = field(default_factory=Acceleration)

    def eta_schedule(self) -> EtaSchedule | None:
        """The override schedule, or ``None`` for the paper's per-attribute schedule.

        Raises:
            UsageError: ``t_min`` above ``t_max``.
        """
        given = {name: value for name, value in (("t_min", self.t_min), ("t_max", self.t_max), ("k", self.k))
                 if value is not None}
        if not given:
            return None
        paper = EtaSchedule()  # the settings not given keep the paper's values
        t_min, t_max = given.get("t_min", paper.t_min), given.get("t_max", paper.t_max)
        if t_min > t_max:
            raise UsageError(f"--t-min {t_min} is above --t-max {t_max}", argument="--t-min/--t-max")
        return replace(paper, **given)


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


def run_generate(config: GenerateConfig) -> GenerateResult:
    """Generate the config's images into ``config.out`` (steps in the module docstring)."""
    # 1. everything cheap first (no torch yet): schedule, pairings, the model's settings, the manifest
    schedule = config.eta_schedule()
    planned = config.pairings.plan(config.attributes)
    pairings = select_pairings(planned, config.classes, config.attributes)
    model = config.model.resolve()
    # expanding every (pairing, image) job takes seconds at the paper's N = 500: after the checks
    jobs = plan_jobs(pairings, config.images_per_pairing, config.seed)
    size = config.size or model.default_size
    settings = GenerationSettings(
        method=config.method,
        num_inference_steps=config.steps,
        guidance_scale=config.guidance_scale,
        height=size,
        width=size,
        max_sequence_length=model.max_sequence_length,
        schedule=schedule,
        save_guides=config.save_guides,
        extra=dict(model.extra),
        acceleration=config.acceleration,
    )
    run_info = {"model": model.name, "dtype": model.dtype, "seed": config.seed}
    check_manifest(config.out, generation_manifest(jobs, settings, config.batch_size, run_info), MANIFEST_ARGUMENTS)

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
        config.out,
        settings,
        batch_size=config.batch_size,
        process_index=state.process_index,
        num_processes=state.num_processes,
        max_images=config.max_images,
        progress=state.is_local_main_process,
        run_info=run_info,
    )
    state.wait_for_everyone()
    metadata = finalize(config.out, jobs) if state.is_main_process else None
    return GenerateResult(Path(config.out), written, len(jobs), metadata, model)
