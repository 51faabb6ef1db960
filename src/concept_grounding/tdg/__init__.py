"""Tied Diffusion Guidance (SUB, Bader et al., Sec. 3-4): tie, schedule, prompts, pipeline.

The names (listed in ``__init__.pyi``) load on first use through ``lazy_loader``
(scientific-python.org/specs/spec-0001): the tie, schedule and prompt builders import no heavy
library; the pipeline classes (which import diffusers) and the ``generate`` / ``filter`` jobs
(:func:`run_generate`, :func:`run_filter`) import theirs when first reached. Manual: docs/tdg.md.

>>> from concept_grounding.tdg import tdg_prompts, EtaSchedule
>>> tdg_prompts("Downy Woodpecker", "has_breast_color::red").reference
'A photo of a Downy Woodpecker with a red colored breast'
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
