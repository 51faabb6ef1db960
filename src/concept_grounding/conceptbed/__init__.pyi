from .concepts import Concept, ConceptWorld, export_world_concepts, family, task_species
from .config import ConceptBedConfig
from .human_ratings import (
    METRICS,
    SimulatedRater,
    export_rating_items,
    pearson_r,
    simulate_ratings,
    table3,
    truth_rating,
)
from .job import ConceptBedResult, run_conceptbed
from .learners import (
    FLUX_LEARNERS,
    LEARNER_NAMES,
    REFERENCE_LEARNERS,
    FluxLearner,
    Learner,
    check_learners,
    flux_learner,
    make_learner,
)
from .scoring import Scored, ccd_scores, clip_image_embedder, pairwise_cosine, table7_row
