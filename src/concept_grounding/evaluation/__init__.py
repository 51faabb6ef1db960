"""Bring your own model: SUB accuracy and the Aysel et al. analysis for models trained elsewhere.

* :mod:`.adapters`: :class:`BinaryConceptModel` (any callable -> ``(N, C)`` concept logits /
  probabilities), :class:`OpenVocabularyModel` (one CLIP handle: model, tokenizer,
  preprocessing), :func:`as_sub_model`.
* :mod:`.concepts`: concept names as CUB-312 names, the 112 of Koh et al. by index, or SUB's.
* :mod:`.preprocessing`: a torchvision transform, an HF image processor, or size + mean / std.
* :mod:`.loading`: ``--model`` strings (saved folders, ``file.py:factory``, CLIP names).
* :mod:`.sub`: :func:`evaluate_sub` -> :class:`SubEvaluation` (s+, s-, chance, breakdowns,
  report folder), batched, sharded under ``accelerate launch``.
* :mod:`.posthoc`: :func:`analyse_posthoc`: CGIM 1-3, concept existence and concept
  location with CoAM maps for any backbone with a spatial feature map plus a CAV matrix
  (the metrics in :mod:`.posthoc_metrics`, the report in :mod:`.posthoc_report`).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
