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
* :mod:`.posthoc`: :func:`learn_cavs`, :class:`ConceptBank`, :class:`PostHocCBM`,
  :func:`train_posthoc_cbm`; :mod:`.coam`: CoAM maps and overlays.
* :mod:`.clip` (a package): :class:`ClipHandle` (the one CLIP handle), :func:`clip_group_scores`,
  :func:`load_clip`, :class:`WorldCLIP`, :func:`train_world_clip`.
* :mod:`.pixels`: :func:`normalize_pixels`, the ``[0, 1]`` pixel convention of the project's models.

Every model is an ``nn.Module`` with huggingface_hub's ``PyTorchModelHubMixin``:
``save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` (safetensors + config.json).
"""

from .backbone import BackboneOutput, SmallCNN, SmallViT, build_backbone, train_backbone
from .base import ConceptModelOutput, predict, predict_classes, predict_concepts
from .cbm import ConceptBottleneckModel, train_cbm
from .cem import ConceptEmbeddingModel, train_cem
from .clip import (ClipHandle, WordTokenizer, WorldCLIP, attribute_prompt, clip_group_predict, clip_group_scores,
                   group_prompts, load_clip, train_world_clip)
from .coam import concept_activation_maps, overlay_heatmap, save_coam_gallery, upsample_maps
from .data import ConceptTensors, to_tensors, toy_concept_dataset
from .posthoc import ConceptBank, PostHocCBM, embed_images, fit_sparse_classifier, learn_cavs, train_posthoc_cbm
from .training import TrainHistory, fit

__all__ = [
    "BackboneOutput", "SmallCNN", "SmallViT", "build_backbone", "train_backbone",
    "ConceptModelOutput", "predict", "predict_classes", "predict_concepts",
    "ConceptBottleneckModel", "train_cbm", "ConceptEmbeddingModel", "train_cem",
    "ClipHandle", "WordTokenizer", "WorldCLIP", "attribute_prompt", "clip_group_predict", "clip_group_scores",
    "group_prompts", "load_clip", "train_world_clip",
    "concept_activation_maps", "overlay_heatmap", "save_coam_gallery", "upsample_maps",
    "ConceptTensors", "to_tensors", "toy_concept_dataset",
    "ConceptBank", "PostHocCBM", "embed_images", "fit_sparse_classifier", "learn_cavs", "train_posthoc_cbm",
    "TrainHistory", "fit",
]
