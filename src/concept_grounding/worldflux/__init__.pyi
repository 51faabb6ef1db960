from .components import FluxTrainConfig
from .loader import WORLD_FLUX_DIR, load_world_flux, world_flux_call_kwargs, world_flux_path
