"""Every Hub repo of the project, built offline as folders and pushed with ``huggingface_hub``.

``concept-grounding publish --namespace NS --out DIR [--bench RUN] [--push]`` writes one
folder per repo, exactly as uploaded (:mod:`.layout`):

=========================== ======== ==================================================
repo                        type     made from
=========================== ======== ==================================================
``NS/bird-world``           dataset  the bird world, train/test Parquet (:mod:`.world_data`)
``NS/bird-world-sub``       dataset  its counterfactuals in SUB's Hub schema
``NS/<metric>`` (five)      space    ``metrics/<metric>/`` (``evaluate`` modules)
``NS/tied_diffusion``       model    ``pipelines/tied_diffusion/`` (diffusers custom pipeline)
``NS/tied_flux2`` (+klein)  model    ``pipelines/tied_flux2[_klein]/`` (FLUX.2 custom pipelines)
``NS/tied_diffusion_block`` model    ``pipelines/tied_diffusion_block/`` (Modular Diffusers block)
``NS/world-<model>``        model    the models of a ``concept-grounding bench`` run (``--bench``)
``NS/world-flux``           model    ``concept_grounding/assets/world_flux`` (when shipped)
``NS/concept-grounding``    space    ``spaces/concept-grounding/`` (the Gradio Space)
=========================== ======== ==================================================

One source: the code repos are generated from the project's own folders
(:mod:`.sources`: in a checkout the repository root, in a wheel the copy ``setup.py``
puts in ``concept_grounding/_hub_sources``), with local paths turned into Hub ids, cards
written through ``huggingface_hub``'s card classes (:mod:`.cards`) and requirements
pinned to the package version being released. ``--push`` uploads them (:mod:`.push`).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
