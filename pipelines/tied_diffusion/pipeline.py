"""Tied Diffusion Guidance as a diffusers custom pipeline (a thin shell).

    pipe = DiffusionPipeline.from_pretrained(
        "black-forest-labs/FLUX.1-dev", custom_pipeline="pipelines/tied_diffusion", trust_remote_code=True
    )

diffusers loads this file and picks the one ``DiffusionPipeline`` subclass found in it (every
local folder's ``pipeline.py`` becomes the same module: the last line drops an earlier folder's class);
the implementation lives in ``concept_grounding.tdg.pipeline``.
"""

from concept_grounding.tdg.loading import own_custom_pipeline_module
from concept_grounding.tdg.pipeline import TiedDiffusionPipeline

__all__ = ["TiedDiffusionPipeline"]

own_custom_pipeline_module(globals(), TiedDiffusionPipeline)
