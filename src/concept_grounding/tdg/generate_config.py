"""The settings of one ``generate`` run (SUB Sec. 4.2), each under one name.

Each setting has the name the folder's manifest records it by (``num_inference_steps``,
``guidance_scale``, ...) and is declared once with :func:`~concept_grounding.settings.setting`:
its flag (``--steps``), validator, default and help, from which ``concept-grounding generate``
builds its arguments and the resume messages name the flag (:data:`~.resume.MANIFEST_ARGUMENTS`).

>>> GenerateConfig(out=Path("gen"), t_min=0.3).eta_schedule()
EtaSchedule(t_min=0.3, t_max=0.9, k=10.0)
>>> GenerateConfig(out=Path("gen")).eta_schedule() is None
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..errors import UsageError, named, option
from ..settings import setting, tuple_or_none
from ..validators import (
    attribute_name,
    class_name,
    closed_unit_interval,
    multiple_of,
    nonnegative_float,
    positive_float,
    positive_int,
)
from .acceleration import Acceleration
from .schedule import EtaSchedule
from .sources import DEFAULT_STEPS

if TYPE_CHECKING:
    from .sources import FluxModel, FluxSource, PairingSource

__all__ = ["GenerateConfig", "SIZE_MULTIPLE"]

#: FLUX's VAE downsamples by 8 and the transformer packs 2 x 2 latents into a token.
SIZE_MULTIPLE = 16

Method = Literal["tdg", "prompting"]


@dataclass(frozen=True)
class GenerateConfig:
    """What to generate, where, and how: every setting of one run, once.

    Args:
        out: the image folder (resumable; its manifest must match).
        model: the Flux to sample (:class:`~.tiny.TinyFlux`, :class:`~.sources.PretrainedFlux`,
            the world Flux), resolved by :func:`~.generate_job.run_generate`.
        pairings: where the pairings come from (a class table or a file), planned by ``run_generate``.
        classes: keep only these CUB class folder names (``None`` or empty: all).
        attributes: target attributes (``None``: SUB's 32; with a file, a filter only).
        images_per_pairing: N (paper: 500).
        seed: base seed of the per-image seeds.
        method: ``"tdg"`` or ``"prompting"`` (the reference prompt alone, a baseline).
        num_inference_steps: denoising steps (``None``: the model's own, e.g. 20 for the world
            Flux as its card says, 28 for the others).
        guidance_scale: FLUX.1 [dev]'s distilled guidance scale; recorded in the manifest only for
            a model whose transformer reads it (the world Flux does not: it uses true CFG).
        size: image side in pixels (``None``: the model's default); the manifest's ``size``.
        t_min, t_max, k: override the paper's schedule (``None``: 0.2, 0.9, 10 when any is set).
        batch_size: images per pipeline call (one pairing per call; batching changes the numerics).
        max_images: stop after this many new images (``None``: all; resume later).
        guide_bird: the guide bird of shape / pattern attributes for pairings that name none
            (SUB App. B; ``None``: App. B's own; a pairings file's ``guide_bird`` wins).
        save_guides: also write each guide image to ``.guides/`` (SUB keeps only the references).
        acceleration: a diffusers transformer cache and/or ``torch.compile`` (``--cache``, ``--compile``).
    """

    out: Path
    model: FluxSource | None = None
    pairings: PairingSource | None = None
    classes: Sequence[str] | None = setting(
        None, "restrict to these classes (CUB names; default: all)", parse=class_name, nargs="*", convert=tuple_or_none
    )
    attributes: Sequence[str] | None = setting(
        None,
        "restrict to these target attributes (default: all)",
        parse=attribute_name,
        nargs="*",
        convert=tuple_or_none,
    )
    images_per_pairing: int = setting(500, "images per (class, attribute) pairing (paper: 500)", parse=positive_int)
    seed: int = setting(0, "base seed of the per-image seeds", parse=int)
    method: Method = setting(
        "tdg",
        "tdg: tied diffusion (SUB Sec. 3); prompting: the reference prompt alone (baseline)",
        choices=("tdg", "prompting"),
    )
    num_inference_steps: int | None = setting(
        None,
        f"denoising steps (default: the model's own, as its card says; {DEFAULT_STEPS} for a model without one)",
        parse=positive_int,
        flag="--steps",
    )
    guidance_scale: float = setting(
        3.5,
        "FLUX.1 [dev]'s distilled guidance scale (ignored by models without a guidance embedding, such as the "
        "world Flux, which uses true CFG 4; the manifest then omits it)",
        parse=nonnegative_float,
    )
    size: int | None = setting(
        None,
        f"image side, a multiple of {SIZE_MULTIPLE} (default 32 for the world model and --tiny, else 1024)",
        parse=multiple_of(SIZE_MULTIPLE, why="FLUX: VAE factor 8 x 2 x 2 latent packing"),
    )
    t_min: float | None = setting(
        None,
        "eta schedule: start of the tie, in [0, 1] (default: the paper's per-attribute schedule)",
        parse=closed_unit_interval,
    )
    t_max: float | None = setting(
        None,
        "eta schedule: end of the tie, in [0, 1] (default: the paper's per-attribute schedule)",
        parse=closed_unit_interval,
    )
    k: float | None = setting(
        None, "eta schedule: steepness k > 0 (default: the paper's per-attribute schedule)", parse=positive_float
    )
    batch_size: int = setting(4, "image pairs per pipeline call", parse=positive_int)
    max_images: int | None = setting(None, "stop after this many new images (default: no limit)", parse=positive_int)
    save_guides: bool = setting(
        False,
        "also write each guide image to .guides/ (SUB itself keeps only the reference images)",
        action="store_true",
    )
    guide_bird: str | None = setting(
        None,
        "guide bird of shape / pattern attributes for pairings that name none "
        "(SUB App. B; default: App. B's; a --pairings file's guide_bird wins)",
    )
    budget: int = setting(
        10_000,
        "largest number of new images a run makes without --yes (the plan's size is announced first either way)",
        parse=positive_int,
    )
    yes: bool = setting(False, "run a plan larger than --budget", action="store_true")
    acceleration: Acceleration = field(default_factory=Acceleration)

    def eta_schedule(self) -> EtaSchedule | None:
        """The override schedule, or ``None`` for the paper's per-attribute schedule.

        Raises:
            UsageError: ``t_min`` above ``t_max``.
        """
        given = {
            name: value
            for name, value in (("t_min", self.t_min), ("t_max", self.t_max), ("k", self.k))
            if value is not None
        }
        if not given:
            return None
        paper = EtaSchedule()  # the settings not given keep the paper's values
        t_min, t_max = given.get("t_min", paper.t_min), given.get("t_max", paper.t_max)
        if t_min > t_max:
            raise UsageError(
                f"{option('t_min', t_min)} is above {option('t_max', t_max)}", argument=named("t_min", "t_max")
            )
        return replace(paper, **given)

    def resolved_size(self, model: FluxModel) -> int:
        """The image side in pixels: ``size``, else the model's default."""
        return self.size or model.default_size

    def resolved_steps(self, model: FluxModel) -> int:
        """The denoising steps: ``num_inference_steps``, else the model's own (:attr:`FluxModel.default_steps`)."""
        return self.num_inference_steps if self.num_inference_steps is not None else model.default_steps
