"""The bird world's inputs to the ``generate`` job: its Flux and its pairings.

:class:`WorldFlux` is the :class:`~concept_grounding.tdg.sources.FluxSource` of the
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

from ..tdg.sources import ClassTablePairings, FluxModel
from .loader import WORLD_TRUE_CFG

__all__ = ["WORLD_MODEL", "WorldFlux", "world_pairings"]

#: The manifest's ``model`` (and ``--model`` value) of the shipped world Flux.
WORLD_MODEL = "world"
#: How the world Flux is sampled: true classifier-free guidance against the empty prompt
#: (it was trained with 10 % caption dropout and has no distilled guidance embedding).
WORLD_EXTRA = {"true_cfg_scale": WORLD_TRUE_CFG, "negative_prompt": ""}


def _load_world_tdg() -> Any:
    from ..tdg.pipeline import TiedDiffusionPipeline
    from .loader import load_world_flux

    return load_world_flux(pipeline_cls=TiedDiffusionPipeline)


@dataclass(frozen=True)
class WorldFlux:
    """The shipped world Flux: float32, at its VAE's trained size and its tokenizer's prompt length, true CFG."""

    def resolve(self) -> FluxModel:
        from .loader import world_flux_path

        folder = world_flux_path()
        size = json.loads((folder / "vae" / "config.json").read_text())["sample_size"]  # the trained side
        tokens = json.loads((folder / "tokenizer_2" / "tokenizer_config.json").read_text())["model_max_length"]
        return FluxModel(WORLD_MODEL, "float32", int(size), int(tokens), _load_world_tdg, dict(WORLD_EXTRA))


def _bird_world() -> Any:
    from ..world import BirdWorld

    return BirdWorld()


def world_pairings() -> ClassTablePairings:
    """SUB's pairings over the default bird world's classes (built when planned)."""
    return ClassTablePairings(_bird_world, "the bird world ({num_classes} SUB classes)")
