from .cci import ConceptClusterImportance
from .evaluation import evaluate_sub, load_sub_source
from .loaders import load_cub, load_sub
from .metrics import (
    concept_confidence_deviation,
    concept_existence,
    concept_global_importance,
    concept_location,
    sub_accuracy,
)
from .models.clip import ClipHandle, load_clip
from .tdg import schedule_for_attribute, tdg_prompts
from .tdg.pipeline import TiedDiffusionPipeline
from .vocabulary import Vocabulary, load_vocabulary
from .world import BirdWorld, WorldConfig

__version__: str
