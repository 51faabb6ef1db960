"""The bird world's inputs to the ``generate`` job: its Flux and its pairings.

:class:`WorldFlux` is the :class:`~concept_grounding.tdg.generate_job.FluxSource` of the
shipped world-trained Flux (``--model world``, the default of ``concept-grounding
generate``); :func:`world_pairings` plans SUB's pairings over the world's 33 classes from
their class-level labels.

>>> WORLD_MODEL, WORLD_EXTRA
('world', {'true_cfg_scale': 4.0, 'negative_prompt': ''})
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..tdg.generate_job import ClassTablePairings, FluxModel

__all__ = ["WORLD_MODEL", "WORLD_EXTRA", "WorldFlux", "world_pairings"]

#: The manifest's ``model`` (and ``--model`` value) of the shipped world Flux.
WORLD_MODEL = "world"
#: How the world Flux is sampled: true classifier-free guidance against the empty prompt
#: (it was trained with 10 % caption dropout and has no distilled guidance embedding).
WORLD_EXTRA = {"true_cfg_scale": 4.0, "negative_prompt": ""}


def _load_world_tdg() -> Any:
    from ..tdg.pipeline import TiedDiffusionPipeline
    from .loader import load_world_flux

    return load_world_flux(pipeline_cls=TiedDiffusionPipeline)


@dataclass(frozen=True)
class WorldFlux:
    """The shipped world Flux: float32, 32 px, its tokenizer's prompt length, true CFG 4."""

    def resolve(self) -> FluxModel:
        from .loader import world_flux_path

        config = (world_flux_path() / "tokenizer_2" / "tokenizer_config.json").read_text()
        return FluxModel(WORLD_MODEL, "float32", 32, json.loads(config)["model_max_length"], _load_world_tdg,
                         dict(WORLD_EXTRA))


def _bird_world() -> Any:
    from ..world import BirdWorld

    return BirdWorld()


def world_pairings() -> ClassTablePairings:
    """SUB's pairings over the default bird world's classes (built when planned)."""
    return ClassTablePairings(_bird_world, "the bird world ({num_classes} SUB classes)")
