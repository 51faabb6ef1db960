"""concept-grounding: do interpretable vision models really see the concepts they claim?

The names a user starts from, one import away (``from concept_grounding import BirdWorld``):

* the vocabulary: :class:`Vocabulary`, :func:`load_vocabulary`;
* data: :class:`BirdWorld`, :class:`WorldConfig` (the procedural bird world),
  :func:`load_cub`, :func:`load_sub`;
* the metrics, plain NumPy functions: :func:`sub_accuracy`, :func:`concept_existence`,
  :func:`concept_location`, :func:`concept_global_importance`,
  :func:`concept_confidence_deviation`;
* Tied Diffusion Guidance: :func:`tdg_prompts`, :func:`schedule_for_attribute`,
  :class:`TiedDiffusionPipeline` (the ``[tdg]`` extra);
* your own model on SUB: :func:`evaluate_sub`, :func:`load_sub_source`, and CLIP through
  one handle, :func:`load_clip` -> :class:`ClipHandle` (the ``[models]`` extra);
* CCI: :class:`ConceptClusterImportance` (the ``[cci]`` extra).

Everything else lives in its sub-package (the newcomer's map, docs/guide/development.md). Importing this
package is cheap: each name is imported on first use (``lazy_loader``, scientific-python.org/specs/spec-0001; the names
are listed in ``__init__.pyi``), so torch, diffusers, datasets and gradio are imported by
the sub-modules that need them, never here. A name whose extra is missing says, in one
line, which to install.

>>> import concept_grounding
>>> concept_grounding.sub_accuracy.__module__
'concept_grounding.metrics.sub_accuracy'
"""

from typing import Any

import lazy_loader as lazy

#: the one place the version is written: pyproject.toml reads it (setuptools dynamic version),
#: and `publish` pins the Hub repos' requirements to it
__version__ = "0.1.0"

_lazy_getattr, __dir__, _names = lazy.attach_stub(__name__, __file__)
__all__ = [*_names, "__version__"]

#: the names that need an extra (:mod:`concept_grounding.extras`) -> that extra
_EXTRA_OF = {
    "TiedDiffusionPipeline": "tdg",
    "evaluate_sub": "models",
    "load_sub_source": "models",
    "ClipHandle": "models",
    "load_clip": "models",
    "ConceptClusterImportance": "cci",
}


def __getattr__(name: str) -> Any:
    """Import ``name`` on first use, after checking that its extra is installed."""
    if name in _EXTRA_OF:
        from .extras import require_extra

        require_extra(_EXTRA_OF[name], f"concept_grounding.{name}")
    return _lazy_getattr(name)
