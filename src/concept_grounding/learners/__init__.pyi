from .config import METHOD_DEFAULTS, METHODS, LearnConfig
from .methods import load_learned
from .train import learn, learn_many
