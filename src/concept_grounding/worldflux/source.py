"""The bird world's inputs to the ``generate`` job: its Flux and its pairings.

:class:`WorldFlux` is the :class:`~concept_grounding.tdg.sources.FluxSource` of the
shipped world-trained Flux (``--model world``, the default of ``concept-grounding
generate``); :func:`world_pairings` plans SUB's pairings over the world's 33 classes from
their class-level labels.

>>> model = WorldFlux().resolve()
>>> model.name, model.default_size, model.max_sequence_length, model.default_steps, model.extra
('world', 32, 24, 20, {'true_cfg_scale': 4.0, 'negative_prompt': ''})
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..tdg.sources import ClassTablePairings, FluxModel
from .loader import world_flux_settings

__all__ = ["WORLD_MODEL", "WorldFlux", "world_pairings"]

#: The manifest's ``model`` (and ``--model`` value) of the shipped world Flux.
WORLD_MODEL = "world"


def _load_world_tdg(path: Path | None) -> Any:
    from ..tdg.pipeline import TiedDiffusionPipeline
    from .loader import load_world_flux

    return load_world_flux(path, pipeline_cls=TiedDiffusionPipeline)


@dataclass(frozen=True)
class WorldFlux:
    """A world Flux (default: the shipped one), float32, sampled as its
    :class:`~.loader.WorldFluxSettings` say: its VAE's trained side, its tokenizer's prompt
    length, the card's steps and true CFG against the empty prompt; it ignores ``guidance_scale``.

    Args:
        path: a folder written by ``train-flux`` (``None``: the shipped one, recorded as ``"world"``).
    """

    path: Path | None = None

    def resolve(self) -> FluxModel:
        settings = world_flux_settings(self.path)
        name = WORLD_MODEL if self.path is None else str(Path(self.path).resolve())
        return FluxModel(
            name,
            "float32",
            settings.size,
            settings.max_sequence_length,
            partial(_load_world_tdg, self.path),
            settings.extra(),
            default_steps=settings.num_inference_steps,
            uses_guidance=False,
        )


def _bird_world() -> Any:
    from ..world import BirdWorld

    return BirdWorld()


def world_pairings() -> ClassTablePairings:
    """SUB's pairings over the default bird world's classes (built when planned)."""
    return ClassTablePairings(_bird_world, "the bird world ({num_classes} SUB classes)")
