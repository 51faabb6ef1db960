"""Concept models: CBMs, CEMs, post-hoc CBMs with CoAM, and open-vocabulary (CLIP) scoring.

The API the benchmark builds on::

    from concept_grounding.models import to_tensors, train_cbm, predict_concepts

    train = to_tensors(ds["train"], "cbm_112", image_size=64, label_source="class")
    cbm = train_cbm(train, mode="joint", concept_loss_weight=1.0, epochs=10, seed=0)
    probs = predict_concepts(cbm, test.images)          # (N, L) in [0, 1]
    logits = predict_classes(cbm, test.images)          # (N, K)

* :mod:`.data`: :func:`to_tensors` (schema -> tensors), :func:`toy_concept_dataset`.
* :mod:`.backbone`: :class:`SmallCNN`, :class:`SmallViT`, :func:`train_backbone`.
* :mod:`.cbm`: :class:`ConceptBottleneckModel`, :func:`train_cbm` (independent / sequential /
  joint, hard / soft bottleneck, per-concept).
* :mod:`.cem`: :class:`ConceptEmbeddingModel`, :func:`train_cem` (RandInt).
* :mod:`.concept_bank`: :func:`learn_cavs`, :class:`ConceptBank`; :mod:`.posthoc`: :class:`PostHocCBM`,
  :func:`train_posthoc_cbm`; :mod:`.coam`: CoAM maps and overlays.
* :mod:`.clip` (a package): :class:`ClipHandle` (the one CLIP handle), :func:`clip_group_scores`,
  :func:`load_clip`, :class:`WorldCLIP`, :func:`train_world_clip`.
* :mod:`.pixels`: :func:`normalize_pixels`, the ``[0, 1]`` pixel convention of the project's models.
* :mod:`.train_config`: :class:`TrainConfig`, the shared training knobs (no torch import).

The names (listed in ``__init__.pyi``) are loaded on first use through ``lazy_loader``, so
that the command line's parsers (built from :class:`TrainConfig`) do not wait for torch.

Every model is an ``nn.Module`` with huggingface_hub's ``PyTorchModelHubMixin``:
``save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` (safetensors + config.json).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
