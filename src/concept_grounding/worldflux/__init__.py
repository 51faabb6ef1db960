"""A Flux-architecture text-to-image pipeline trained on the bird world (docs/world.md; its card:
assets/world_flux/README.md).

``concept-grounding train-flux`` trains it (:mod:`.train`); :func:`load_world_flux` loads
the shipped weights from ``concept_grounding/assets/world_flux``.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
