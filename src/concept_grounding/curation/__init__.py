"""Building a SUB-like benchmark (Bader et al., Sec. 4.2-4.3): the steps around TDG.

* :mod:`.candidates` -- candidate classes (a classifier on generated images), candidate
  attributes (a VQA scorer on CUB over the threshold grid) and the pairings plan that
  ``generate`` reads; the formulas are in :mod:`concept_grounding.tdg.candidates`.

This package sits above ``tdg``, ``judge``, ``worldflux``, the world and the loaders, which
it joins (``pyproject.toml``'s import contracts); the human validation of Sec. 4.3
(issue 33) belongs here too.
"""
