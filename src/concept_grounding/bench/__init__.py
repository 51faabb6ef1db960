"""``concept-grounding bench``: SUB Tables 1-2 and the Aysel et al. analysis, on the world or CUB + SUB.

The names (listed in ``__init__.pyi``) are loaded on first use through ``lazy_loader``, so
that importing :mod:`concept_grounding.bench.artifacts` (the demo, the Space, the CLI) does
not import torch.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
