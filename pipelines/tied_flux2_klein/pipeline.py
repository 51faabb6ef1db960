"""Tied Diffusion Guidance for FLUX.2 [klein] as a diffusers custom pipeline (a thin shell).

    pipe = DiffusionPipeline.from_pretrained(
        "black-forest-labs/FLUX.2-klein-4B", custom_pipeline="pipelines/tied_flux2_klein", trust_remote_code=True
    )

diffusers loads this file and picks the one ``DiffusionPipeline`` subclass found in it;
the implementation lives in ``concept_grounding.tdg.pipeline_flux2``.
"""

from concept_grounding.tdg.pipeline_flux2 import TiedFlux2KleinPipeline

__all__ = ["TiedFlux2KleinPipeline"]
