"""ConceptBed's concept learners on a diffusers Flux (Patel et al., Table 5; docs/guide/learners.md):
Textual Inversion, DreamBooth, LoRA and Custom Diffusion learn a new concept V* from a few images.

:func:`learn` trains one (:class:`LearnConfig`; one ``accelerate`` loop, resumable, deterministic per
seed), :func:`learn_many` shards several over processes, and :func:`load_learned` applies a result to
a ``FluxPipeline`` through diffusers' own loaders. One object per learner (:mod:`.methods`: what it
trains, its defaults, its files); docs/guide/learners.md.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
