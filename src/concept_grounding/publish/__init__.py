"""Every Hub repo of the project, built offline as folders and pushed with ``huggingface_hub``.

``concept-grounding publish --namespace NS --out DIR [--bench RUN] [--push]`` writes one folder per repo,
exactly as uploaded (:mod:`.layout`): the bird world and its SUB-style set, the metric Spaces, the custom
pipelines and block, a bench run's models, the world Flux and the Gradio Space. The code repos come from
the project's own folders (:mod:`.sources`; in a wheel the copy ``setup.py`` puts in
``concept_grounding/_hub_sources``), cards through ``huggingface_hub``'s card classes (:mod:`.cards`),
requirements pinned to the version being released; ``--push`` uploads them (:mod:`.push`). The repos
and how users load them: docs/hub.md.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
