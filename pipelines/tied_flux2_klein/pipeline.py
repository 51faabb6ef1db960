"""Tied Diffusion Guidance for FLUX.2 [klein] as a diffusers custom pipeline (a thin shell).

    pipe = DiffusionPipeline.from_pretrained(
        "black-forest-labs/FLUX.2-klein-4B", custom_pipeline="pipelines/tied_flux2_klein", trust_remote_code=True
    )

diffusers loads this file and picks the one ``DiffusionPipeline`` subclass found in it (every
local folder's ``pipeline.py`` becomes the same module: the last line drops an earlier folder's class);
the implementation lives in ``concept_grounding.tdg.pipeline_flux2``.
"""

from concept_grounding.tdg.loading import own_custom_pipeline_module
from concept_grounding.tdg.pipeline_flux2 import TiedFlux2KleinPipeline

__all__ = ["TiedFlux2KleinPipeline"]

own_custom_pipeline_module(globals(), TiedFlux2KleinPipeline)
