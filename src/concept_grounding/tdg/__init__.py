"""Tied Diffusion Guidance (SUB, Bader et al., Sec. 3-4): tie, schedule, prompts, pipeline.

The tie, schedule and prompt builders import no heavy library at import time; the
pipeline classes (which import diffusers) and the ``generate`` / ``filter`` jobs
(:func:`run_generate`, :func:`run_filter`) load on first attribute access.

>>> from concept_grounding.tdg import tdg_prompts, EtaSchedule
>>> tdg_prompts("Downy Woodpecker", "has_breast_color::red").reference
'A photo of a Downy Woodpecker with a red colored breast'
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .prompts import TDGPrompts, attribute_category, attribute_text, prompting_only_prompt, tdg_prompts
from .schedule import ConstantEta, EtaSchedule, paper_schedule, schedule_for_attribute
from .tie import percentile_threshold, tie, tie_mask, tie_pair

_LAZY = {
    "Acceleration": ".acceleration",
    "TransformerCache": ".acceleration",
    "TiedDiffusionPipeline": ".pipeline",
    "TiedDiffusionPipelineOutput": ".pipeline_output",
    "load_flux_pipeline": ".loading",
    "GenerateConfig": ".generate_config",
    "GenerateResult": ".generate_job",
    "run_generate": ".generate_job",
    "FilterConfig": ".filter_job",
    "FilterJobResult": ".filter_job",
    "run_filter": ".filter_job",
}

__all__ = [
    "TDGPrompts",
    "attribute_category",
    "attribute_text",
    "prompting_only_prompt",
    "tdg_prompts",
    "ConstantEta",
    "EtaSchedule",
    "paper_schedule",
    "schedule_for_attribute",
    "percentile_threshold",
    "tie",
    "tie_mask",
    "tie_pair",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
