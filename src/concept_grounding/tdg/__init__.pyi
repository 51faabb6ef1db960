from .acceleration import Acceleration, TransformerCache
from .baseline import prompting_images
from .block import (
    TiedDiffusionLoopStep,
    TiedFlux2AutoBlocks,
    TiedFlux2KleinAutoBlocks,
    TiedFluxAutoBlocks,
    TiedLatentsStep,
)
from .filter_job import FilterConfig, FilterJobResult, run_filter
from .generate_config import GenerateConfig
from .generate_job import GenerateResult, run_generate
from .loading import load_flux_pipeline
from .pipeline import REFUSED_ARGUMENTS, TiedDiffusionPipeline
from .pipeline_flux2 import TiedFlux2KleinPipeline, TiedFlux2Pipeline
from .pipeline_output import TiedDiffusionPipelineOutput
from .prompts import TDGPrompts, attribute_category, attribute_text, prompting_only_prompt, tdg_prompts
from .schedule import ConstantEta, EtaSchedule, paper_schedule, schedule_for_attribute
from .tie import percentile_threshold, tie, tie_batch, tie_mask, tie_pair
