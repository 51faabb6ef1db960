"""Concept Cluster Importance (CCI) for CLIP, faithfulness curves, error diagnosis, COVAR.

CVPR 2026 "Concept Regions Matter: Benchmarking CLIP with a New Cluster-Importance
Approach"; docs/cci.md. The names (listed in ``__init__.pyi``) load on first use through ``lazy_loader``, so
importing this package is cheap.

* :mod:`.attention` — the key mask, multi-head attention, and the ``"cci_cluster_mask"``
  function registered in transformers' ``AttentionInterface``;
* :mod:`.backends` — adapters for transformers CLIP and open_clip ViT towers;
* :mod:`.masking` — :class:`ClusterMask`, the model's own forward with keys cut out (the reference);
* :mod:`.clusters` — deterministic batched k-means;
* :mod:`.fast` — the exact token-deletion fast path;
* :mod:`.importance` — :class:`ConceptClusterImportance`, drops, weights, maps;
* :mod:`.faithfulness`, :mod:`.baselines`, :mod:`.diagnosis`, :mod:`.covar`;
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
