"""Tied Diffusion Guidance as a Modular Diffusers block (a thin shell).

    tdg = ModularPipelineBlocks.from_pretrained("pipelines/tied_diffusion_block", trust_remote_code=True)
    blocks = tdg.compose(FluxAutoBlocks())   # or Flux2AutoBlocks(), Flux2KleinAutoBlocks()

``modular_config.json`` (written by diffusers' ``save_pretrained``) maps
``ModularPipelineBlocks`` to ``block.TiedDiffusionLoopStep``; the implementation lives in
``concept_grounding.tdg.block``.
"""

from concept_grounding.tdg.block import TiedDiffusionLoopStep

__all__ = ["TiedDiffusionLoopStep"]
