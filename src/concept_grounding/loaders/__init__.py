"""Loaders for CUB-200-2011 and SUB, and the CBM class-level labels.

>>> from concept_grounding.loaders import load_cub, write_cub, load_sub, write_sub, class_level_labels

* :func:`load_cub` / :func:`write_cub`: the official ``CUB_200_2011`` folder layout <->
  ``datasets.DatasetDict`` in :func:`~concept_grounding.schema.cub_features`
  (:mod:`.cub`: assembly and choices; :mod:`.cub_files`: the text files' parsers;
  :mod:`.cub_checks`: image and part checks; :mod:`.cub_write`: writing).
* :func:`load_sub` / :func:`write_sub`: SUB from the Hub or a local copy <-> a
  ``datasets.Dataset`` in :func:`~concept_grounding.schema.sub_features`.
* :func:`class_level_labels`: Koh et al.'s majority vote and 10-class keep rule.

``datasets`` and PIL are imported inside the functions that need them.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
