"""The concept metrics, one module each, as plain vectorised functions.

========================================  ==========================================  =========
function                                  paper                                       direction
========================================  ==========================================  =========
:func:`concept_confidence_deviation`      ConceptBed (Patel et al., 2023) Eq. 3       lower
:func:`concept_global_importance`         Aysel et al. (2025) Eqs. 3-8 (CGIM)         higher
:func:`concept_existence`                 Aysel et al. (2025) Eqs. 9-10 (CEM)         higher
:func:`concept_location`                  Aysel et al. (2025) Eq. 11 (CLM)            higher
:func:`sub_accuracy`                      SUB (Bader et al., 2025) Sec. 5.5-5.6, F    higher
========================================  ==========================================  =========

Inputs are numpy arrays (torch tensors and lists are converted); outputs are plain
dicts of floats and numpy arrays. The ``evaluate`` modules in the repository's
``metrics/`` folder are thin shells over these functions. torch is imported only to
draw upsampled maps (:func:`.concept_location.top_region`).

The package attributes named like the sub-modules are the functions; reach a module's
helpers with ``from concept_grounding.metrics.concept_location import centre_ranks``.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
