from .config import LearnConfig
from .methods import (
    METHOD_DEFAULTS,
    METHODS,
    CustomDiffusion,
    DreamBooth,
    LearnerMethod,
    LoRA,
    TextualInversion,
    load_learned,
)
from .train import Trainer, learn, learn_many
