"""Tied Diffusion Guidance as Modular Diffusers blocks (SUB, Bader et al., Sec. 3; Eqs. 3-6).

:class:`TiedDiffusionLoopStep` ties each (reference, guide) pair of the batch ``[references; guides]``
between a Flux-family loop's ``denoiser`` and its scheduler step (through :func:`~.tie.tie_batch`, as
the pipelines do); :class:`TiedLatentsStep` starts guide ``i`` from reference ``i``'s initial latents.
:meth:`TiedDiffusionLoopStep.compose` inserts both into ``FluxAutoBlocks``, ``Flux2AutoBlocks`` or
``Flux2KleinAutoBlocks``; the loop step is published as a Hub repo (``block.py`` +
``modular_config.json``). Manual, saving and reloading: docs/guide/tdg.md.
"""

from __future__ import annotations

import copy
import functools
import os
from typing import Any

import torch
from diffusers.modular_pipelines import (
    Flux2AutoBlocks,
    Flux2KleinAutoBlocks,
    FluxAutoBlocks,
    ModularPipelineBlocks,
    PipelineState,
)
from diffusers.modular_pipelines.modular_pipeline_utils import ComponentSpec, InputParam, OutputParam
from diffusers.schedulers import FlowMatchEulerDiscreteScheduler

from .schedule import EtaSchedule
from .tie import tie_batch

__all__ = [
    "TiedDiffusionLoopStep",
    "TiedLatentsStep",
    "TiedFluxAutoBlocks",
    "TiedFlux2AutoBlocks",
    "TiedFlux2KleinAutoBlocks",
    "BLOCK_SHELL",
]

LOOP_STEP_NAME, LATENTS_STEP_NAME = "tdg_tie", "tdg_tied_latents"


def _halves(batch: torch.Tensor, name: str) -> int:
    if batch.shape[0] % 2:
        raise ValueError(f"TDG needs an even batch [references; guides] of {name}, got {batch.shape[0]} rows")
    return batch.shape[0] // 2


class TiedLatentsStep(ModularPipelineBlocks):
    """After ``prepare_latents``: ``latents`` (2P, ...) become ``[first half; first half]``, so guide ``i``
    starts where reference ``i`` starts (SUB Sec. 3)."""

    model_name = "flux"

    @property
    def description(self) -> str:
        return "TDG: every guide image starts from its reference image's initial latents"

    @property
    def inputs(self) -> list[InputParam]:
        return [
            InputParam(
                "latents",
                required=True,
                type_hint=torch.Tensor,
                description="initial latents of the batch [references; guides]",
            )
        ]

    @property
    def intermediate_outputs(self) -> list[OutputParam]:
        return [OutputParam("latents", type_hint=torch.Tensor, description="[reference half; reference half]")]

    @torch.no_grad()
    def __call__(self, components: Any, state: PipelineState) -> tuple[Any, PipelineState]:
        block_state = self.get_block_state(state)
        half = _halves(block_state.latents, "latents")
        reference = block_state.latents[:half]
        block_state.latents = torch.cat([reference, reference])
        self.set_block_state(state, block_state)
        return components, state


class TiedDiffusionLoopStep(ModularPipelineBlocks):
    """A denoising-loop sub-block: ties ``noise_pred`` per (reference, guide) pair before the scheduler step.

    Inputs ``eta_schedule`` (any ``t -> eta``) or ``t_min``, ``t_max``, ``k`` (SUB Eq. 4, paper:
    0.2 / 0.9 colour and shape, 0.6 pattern / 10), and ``granularity``; outputs the tied
    ``noise_pred`` and the record ``tdg_t_per_step`` / ``tdg_eta_per_step``.
    """

    model_name = "flux"

    @property
    def description(self) -> str:
        return (
            "TDG (SUB Eqs. 3-6): ties the guided prediction of each (reference, guide) pair of the batch "
            "[references; guides] where they differ least; insert between a loop's denoiser and after_denoiser "
            "(see `compose`)"
        )

    @property
    def expected_components(self) -> list[ComponentSpec]:
        return [ComponentSpec("scheduler", FlowMatchEulerDiscreteScheduler)]

    @property
    def inputs(self) -> list[InputParam]:
        return [
            InputParam(
                "noise_pred",
                type_hint=torch.Tensor,  # set by the loop's denoiser, which declares no output
                description="final guided predictions of the batch [references; guides]",
            ),
            InputParam("eta_schedule", description="t -> eta in [0, 1]; default EtaSchedule(t_min, t_max, k)"),
            InputParam("t_min", default=0.2, type_hint=float, description="SUB Eq. 4: eta = 0 below"),
            InputParam("t_max", default=0.9, type_hint=float, description="SUB Eq. 4: eta = 1 above"),
            InputParam("k", default=10.0, type_hint=float, description="SUB Eq. 4: exponent"),
            InputParam("granularity", default="element", type_hint=str, description="'element' or 'token'"),
        ]

    @property
    def intermediate_outputs(self) -> list[OutputParam]:
        return [
            OutputParam("noise_pred", type_hint=torch.Tensor, description="the tied predictions"),
            OutputParam("tdg_t_per_step", type_hint=list, description="t = timestep / num_train_timesteps per step"),
            OutputParam("tdg_eta_per_step", type_hint=list, description="eta applied at each step"),
        ]

    @torch.no_grad()
    def __call__(self, components: Any, block_state: Any, i: int, t: torch.Tensor) -> tuple[Any, Any]:
        if i == 0:
            schedule = block_state.eta_schedule
            block_state.tdg_schedule = (
                schedule if schedule is not None else EtaSchedule(block_state.t_min, block_state.t_max, block_state.k)
            )
            block_state.tdg_t_per_step, block_state.tdg_eta_per_step = [], []
        time = float(t) / float(components.scheduler.config.num_train_timesteps)
        block_state.noise_pred, eta = tie_batch(
            block_state.noise_pred, time, block_state.tdg_schedule, block_state.granularity
        )
        block_state.tdg_t_per_step.append(time)
        block_state.tdg_eta_per_step.append(eta)
        return components, block_state

    def compose(self, blocks: Any) -> Any:
        """A copy of ``blocks`` (e.g. ``FluxAutoBlocks()``, ``Flux2AutoBlocks()``) with TDG: this step before
        every loop's ``after_denoiser`` and a :class:`TiedLatentsStep` after every ``prepare_latents``.
        ``blocks`` itself is left as it was (composing twice adds nothing).

        Raises:
            ValueError: ``blocks`` holds no denoising loop with an ``after_denoiser`` step.
        """
        blocks = copy.deepcopy(blocks)  # diffusers' auto blocks share module-level sub-blocks instances
        _insert_steps(blocks, self)
        tied = _TIED_BLOCKS.get(type(blocks))
        if tied is not None:  # a class whose constructor rebuilds this composition: saved pipelines reload tied
            blocks.__class__ = tied
        return blocks


def _insert_steps(blocks: Any, step: TiedDiffusionLoopStep) -> None:
    """``step`` before every loop's ``after_denoiser`` and a :class:`TiedLatentsStep` after every
    ``prepare_latents`` of ``blocks`` (in place; a step already there is kept)."""
    loops = latents = 0
    for parent in _walk(blocks):
        names = list(parent.sub_blocks)
        if "after_denoiser" in names:
            if LOOP_STEP_NAME not in names:
                parent.sub_blocks.insert(LOOP_STEP_NAME, step, names.index("after_denoiser"))
            loops += 1
        if "prepare_latents" in names:
            if LATENTS_STEP_NAME not in names:
                parent.sub_blocks.insert(LATENTS_STEP_NAME, TiedLatentsStep(), names.index("prepare_latents") + 1)
            latents += 1
    if not loops or not latents:
        raise ValueError(
            f"{type(blocks).__name__} has no denoising loop with 'prepare_latents' and "
            "'after_denoiser' steps: TDG composes with the Flux family's blocks "
            "(FluxAutoBlocks, Flux2AutoBlocks, Flux2KleinAutoBlocks)"
        )


def _walk(blocks: Any) -> list[Any]:
    """Every block with sub-blocks in the tree under ``blocks`` (``blocks`` first)."""
    found, stack = [], [blocks]
    while stack:
        block = stack.pop()
        children = getattr(block, "sub_blocks", None)
        if children:
            found.append(block)
            stack.extend(children.values())
    return found


def _layout(blocks: Any) -> tuple:
    """The tree of (name, class name) under ``blocks``: what a constructor must rebuild."""
    children = getattr(blocks, "sub_blocks", None) or {}
    return tuple((name, type(child).__name__, _layout(child)) for name, child in children.items())


#: The ``block.py`` a saved TDG pipeline (and ``pipelines/tied_diffusion_block``) carries: the
#: module ``modular_config.json``'s ``auto_map`` names; it imports the installed package.
BLOCK_SHELL = '''"""Tied Diffusion Guidance as Modular Diffusers blocks (a thin shell).

    tdg = ModularPipelineBlocks.from_pretrained("pipelines/tied_diffusion_block", trust_remote_code=True)
    blocks = tdg.compose(FluxAutoBlocks())   # or Flux2AutoBlocks(), Flux2KleinAutoBlocks()

``modular_config.json`` (written by diffusers' ``save_pretrained``) maps ``ModularPipelineBlocks``
to ``block.TiedDiffusionLoopStep`` here, or to ``block.Tied...AutoBlocks`` in a saved TDG
pipeline; the implementation lives in ``concept_grounding.tdg.block``.
"""

from concept_grounding.tdg.block import (
    TiedDiffusionLoopStep,
    TiedFlux2AutoBlocks,
    TiedFlux2KleinAutoBlocks,
    TiedFluxAutoBlocks,
)

__all__ = ["TiedDiffusionLoopStep", "TiedFluxAutoBlocks", "TiedFlux2AutoBlocks", "TiedFlux2KleinAutoBlocks"]
'''


class _TiedAutoBlocks:
    """A Flux family's auto blocks composed with TDG, saved as code (mixed in before the family's class).

    The constructor is the family's plus :meth:`TiedDiffusionLoopStep.compose`'s insertions, so
    ``ModularPipelineBlocks.from_pretrained`` rebuilds it from ``modular_config.json``;
    ``save_pretrained`` writes :data:`BLOCK_SHELL` as ``block.py`` beside it; ``init_pipeline``
    gives a pipeline whose ``save_pretrained`` saves these blocks with the components.
    """

    def __init__(self) -> None:
        super().__init__()
        self.sub_blocks = copy.deepcopy(self.sub_blocks)  # they share module-level instances with the family's
        _insert_steps(self, TiedDiffusionLoopStep())

    def save_pretrained(self, save_directory: str | os.PathLike[str], **kwargs: Any) -> None:
        """``modular_config.json`` (``auto_map`` -> ``block.<this class>``) and ``block.py``.

        Raises:
            ValueError: the blocks were changed after composing; the reload would rebuild them unchanged.
        """
        if _layout(self) != _layout(type(self)()):
            raise ValueError(
                f"these {type(self).__name__} were changed after compose: a reload would rebuild "
                f"{type(self).__name__}() without the changes; save the blocks as your own class"
            )
        os.makedirs(save_directory, exist_ok=True)
        with open(os.path.join(save_directory, "block.py"), "w", encoding="utf-8") as handle:
            handle.write(BLOCK_SHELL)
        # diffusers' save_pretrained keys auto_map by the class defining save_pretrained (here this mixin);
        # the loader looks up "ModularPipelineBlocks"
        self.register_to_config(auto_map={"ModularPipelineBlocks": f"block.{type(self).__name__}"})
        self.save_config(save_directory, **kwargs)

    def init_pipeline(self, *args: Any, **kwargs: Any) -> Any:
        pipeline = super().init_pipeline(*args, **kwargs)
        pipeline.__class__ = _saving_pipeline_class(type(pipeline))
        return pipeline


@functools.cache
def _saving_pipeline_class(base: type) -> type:
    """``base`` (e.g. ``Flux2ModularPipeline``) whose ``save_pretrained`` also saves its TDG blocks.

    It keeps ``base``'s name: ``modular_model_index.json`` records the class name and the reload looks
    it up in diffusers."""

    def save_pretrained(self: Any, save_directory: str | os.PathLike[str], **kwargs: Any) -> None:
        self._blocks.save_pretrained(save_directory)  # first: a push uploads the folder at the end
        base.save_pretrained(self, save_directory, **kwargs)

    save_pretrained.__doc__ = f"{base.__name__}.save_pretrained, plus the TDG blocks (modular_config.json, block.py)"
    return type(
        base.__name__,
        (base,),
        {"save_pretrained": save_pretrained, "__module__": __name__, "__qualname__": f"tied_{base.__name__}"},
    )


class TiedFluxAutoBlocks(_TiedAutoBlocks, FluxAutoBlocks):
    """``FluxAutoBlocks`` (FLUX.1) with TDG; what ``compose(FluxAutoBlocks())`` returns."""


class TiedFlux2AutoBlocks(_TiedAutoBlocks, Flux2AutoBlocks):
    """``Flux2AutoBlocks`` (FLUX.2 [dev]) with TDG; what ``compose(Flux2AutoBlocks())`` returns."""


class TiedFlux2KleinAutoBlocks(_TiedAutoBlocks, Flux2KleinAutoBlocks):
    """``Flux2KleinAutoBlocks`` (FLUX.2 [klein]) with TDG; what ``compose(Flux2KleinAutoBlocks())`` returns."""


_TIED_BLOCKS: dict[type, type] = {
    FluxAutoBlocks: TiedFluxAutoBlocks,
    Flux2AutoBlocks: TiedFlux2AutoBlocks,
    Flux2KleinAutoBlocks: TiedFlux2KleinAutoBlocks,
}
