"""The bird world: a procedural renderer whose every concept is known (docs/world.md).

>>> from concept_grounding.world import BirdWorld, WorldConfig
>>> world = BirdWorld(WorldConfig(image_size=64, class_names=("017.Cardinal",)))
>>> world.sample(0).image.shape
(64, 64, 3)

Only numpy is imported here; ``datasets`` is imported by the export methods.
"""

from .config import BACKGROUNDS, SCENES, Pose, WorldConfig
from .sample import BirdSample, Counterfactual
from .world import BirdWorld

__all__ = ["BirdWorld", "WorldConfig", "BirdSample", "Counterfactual", "Pose", "BACKGROUNDS", "SCENES"]

