"""ConceptBed's concept learners on a diffusers Flux (Patel et al., Table 5; docs/guide/conceptbed.md):
Textual Inversion, DreamBooth, LoRA and Custom Diffusion learn a new concept V* from a few images.

:func:`learn` trains one (:class:`LearnConfig`; resumable, deterministic per seed),
:func:`learn_many` shards several over ``accelerate`` processes, and :func:`load_learned`
applies a result to a ``FluxPipeline`` through diffusers' own loaders
(:mod:`.methods` lists what each method trains and the files it writes).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
