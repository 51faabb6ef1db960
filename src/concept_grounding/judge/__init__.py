"""Grounded judges of the bird world and their validation on exact counterfactuals.

A judge names a generated bird's species and the attributes it shows; SUB's substitution
verdicts (S+ found, S- removed, species kept) are only as good as it is. This package trains
one on renders whose attributes vary independently of the species (:mod:`.data`,
:mod:`.model`), validates any judge on the world's exact edits before its verdicts are used
(:mod:`.validation`), and measures a VQA filter's scorer the same way (:mod:`.scorer`).

The names (listed in ``__init__.pyi``) load on first use through ``lazy_loader``: the data and
validation modules need only numpy, the model (torch) and the scorer check import theirs when
first reached.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
