"""Real photos: Tux Paint's animal cut-outs (Debian, GPL-2, fetched into the user's cache) on the real
backgrounds scikit-image and scikit-learn ship, with exact masks; class-level animal concepts.

* :mod:`.stamps` — the catalogue and the fetch (apt-get download, else Debian's archive; unpacked in Python);
* :mod:`.backgrounds` — the photographs, their licences and habitats;
* :mod:`.export` — the ``photos`` job (ImageNet-style folder + CounterAnimals-style easy / hard);
* :mod:`.concepts` — class-level concepts of the animal classes, with their source.

The names (listed in ``__init__.pyi``) load on first use through ``lazy_loader``.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
