"""concept-grounding: do interpretable vision models really see the concepts they claim?

Importing this package is cheap: torch, diffusers, datasets and gradio are imported by
the sub-modules that need them, never here.
"""

from .vocabulary import Vocabulary, load_vocabulary

#: the one place the version is written: pyproject.toml reads it (setuptools dynamic version),
#: and `publish` pins the Hub repos' requirements to it
__version__ = "0.1.0"
__all__ = ["Vocabulary", "load_vocabulary", "__version__"]
