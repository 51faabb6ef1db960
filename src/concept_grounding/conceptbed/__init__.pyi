from .concepts import Concept, ConceptWorld, export_world_concepts, family, task_species
from .styles import STYLES, stylise
