"""ConceptBed (Patel et al., 2023) on the bird world and on real concept folders.

Concepts (:mod:`.concepts`; the styles are the world's, :mod:`concept_grounding.world.styles`)
judged by ConceptBed's judges validated on exact truth (:mod:`concept_grounding.judge.conceptbed`),
CCD beside Table 7's alternatives and the DINO-style baseline (:mod:`.scoring`), concept
learners as a small registry (:mod:`.learners`) and the ``concept-grounding conceptbed`` job
(:mod:`.job`). torch loads with the judges, never at import.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
