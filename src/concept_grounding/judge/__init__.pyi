from .base import ImageJudge, JudgeReport
from .composition import (
    COMPOSITION_BAR,
    CompositionJudge,
    composition_set,
    load_composition_judge,
    ship_composition_judge,
    train_composition_judge,
    validate_composition_judge,
)
from .concept_model import ConceptModelJudge
from .conceptbed import ConceptBedJudge, load_or_train, require_valid, train_conceptbed_judge
from .conceptbed_spec import CAPACITIES, CONCEPTBED_BAR, ConceptBedJudgeSpec
from .data import EditSet, JudgeSet, exact_edits, judge_training_set, typical_renders
from .model import WorldJudge, judge_images, judge_validated_groups, load_world_judge, train_judge
from .registry import attribute_judge, create_judge, judge_of, list_judges, register_judge
from .scorer import ScorerValidation, validate_scorer_on_world
from .validation import JUDGE_BARS, JudgeValidation, validate_judge
