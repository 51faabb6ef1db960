from .adapters import BinaryConceptModel, OpenVocabularyModel, SubModel, as_sub_model
from .concepts import resolve_concept_names
from .loading import load_model
from .preprocessing import make_preprocess
from .sub import PROTOCOLS, SubEvaluation, evaluate_sub, load_sub_source
