from .conceptbed import CONCEPT_COLUMNS, TASKS, concept_features, load_conceptbed_layout, load_concepts
from .cub import load_cub, read_cub_tables
from .cub_files import CUBTables
from .cub_write import write_cub
from .errors import CUBFormatError, DatasetFormatError, DatasetWarning, HubUnavailableError, SUBFormatError
from .labels import class_level_labels
from .ratings import (
    RATING_COLUMNS,
    RATING_KINDS,
    RATING_SCALE,
    REFERENCES,
    RatingItem,
    read_rating_items,
    read_rating_truth,
    write_rating_items,
)
from .sub import DEFAULT_SUB_COLUMNS, load_sub, write_sub
