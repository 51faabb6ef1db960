"""A Flux-architecture text-to-image pipeline trained on the bird world (issue 15).

``concept-grounding train-flux`` trains it (:mod:`.train`); :func:`load_world_flux` loads
the shipped weights from ``concept_grounding/assets/world_flux``.
"""

from .components import FluxTrainConfig
from .loader import WORLD_FLUX_DIR, load_world_flux, world_flux_call_kwargs, world_flux_path

__all__ = ["FluxTrainConfig", "WORLD_FLUX_DIR", "load_world_flux", "world_flux_call_kwargs", "world_flux_path"]
