from .config import BACKGROUNDS, SCENES, Pose, WorldConfig
from .sample import BirdSample, Counterfactual
from .world import BirdWorld
