"""The bird world: a procedural renderer whose every concept is known (docs/world.md).

>>> from concept_grounding.world import BirdWorld, WorldConfig
>>> world = BirdWorld(WorldConfig(image_size=64, class_names=("017.Cardinal",)))
>>> world.sample(0).image.shape
(64, 64, 3)

Its names load on first use (``lazy_loader``, listed in ``__init__.pyi``); the world needs
numpy only, ``datasets`` is imported by the export methods.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
