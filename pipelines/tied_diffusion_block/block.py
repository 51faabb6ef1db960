"""Tied Diffusion Guidance as Modular Diffusers blocks (a thin shell).

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
