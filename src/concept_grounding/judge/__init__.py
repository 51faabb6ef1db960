"""Every trained image judge, by one protocol and one registry (docs/judges.md).

A judge gives probabilities per head for a batch of images and validates itself on the bird
world's exact truth (:mod:`.base`); ``create_judge(name)`` builds any of them (:mod:`.registry`):
the world judge (:mod:`.model`), the composition judge (:mod:`.composition`), ConceptBed's
species, style and attribute judges (:mod:`.conceptbed`) and a saved concept model
(:mod:`.concept_model`). Names load on first use through ``lazy_loader``.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
