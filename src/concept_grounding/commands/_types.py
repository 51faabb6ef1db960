"""The ``type=`` validators of the commands: they live in :mod:`concept_grounding.validators`
(settings declared in configs below the command layer use them too); re-exported here."""

from concept_grounding.validators import *  # noqa: F403
from concept_grounding.validators import __all__  # noqa: F401
