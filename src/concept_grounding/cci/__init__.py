"""Concept Cluster Importance (CCI) for CLIP, faithfulness curves, error diagnosis, COVAR.

CVPR 2026 "Concept Regions Matter: Benchmarking CLIP with a New Cluster-Importance
Approach"; docs/cci.md. Sub-modules import torch lazily, so importing this package is
cheap.

* :mod:`.attention` — the key mask, multi-head attention, and the ``"cci_cluster_mask"``
  function registered in transformers' ``AttentionInterface``;
* :mod:`.backends` — adapters for transformers CLIP and open_clip ViT towers;
* :mod:`.masking` — :class:`ClusterMask`, the model's own forward with keys cut out (the reference);
* :mod:`.clusters` — deterministic batched k-means;
* :mod:`.fast` — the exact token-deletion fast path;
* :mod:`.importance` — :class:`ConceptClusterImportance`, drops, weights, maps;
* :mod:`.faithfulness`, :mod:`.baselines`, :mod:`.diagnosis`, :mod:`.covar`;
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ConceptClusterImportance": ".importance",
    "CCIOutput": ".importance",
    "ClusterEmbeddings": ".importance",
    "cluster_weights": ".importance",
    "importance_map": ".importance",
    "similarity_drops": ".importance",
    "ClusterMask": ".masking",
    "get_backend": ".backends",
    "kmeans": ".clusters",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
