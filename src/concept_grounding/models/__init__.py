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
* :mod:`.train_config`: :class:`TrainConfig`, the shared training knobs (no torch import).

The names are loaded on first use, so that the command line's parsers (built from
:class:`TrainConfig`) do not wait for torch.

Every model is an ``nn.Module`` with huggingface_hub's ``PyTorchModelHubMixin``:
``save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` (safetensors + config.json).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

#: public name -> the submodule that defines it. Loaded on first use (PEP 562), so that
#: :mod:`.train_config` imports without torch (the command line builds its parsers from it).
_LAZY = {
    **dict.fromkeys(("BackboneOutput", "SmallCNN", "SmallViT", "build_backbone", "train_backbone"), ".backbone"),
    **dict.fromkeys(("ConceptModelOutput", "predict", "predict_classes", "predict_concepts"), ".base"),
    **dict.fromkeys(("ConceptBottleneckModel", "train_cbm"), ".cbm"),
    **dict.fromkeys(("ConceptEmbeddingModel", "train_cem"), ".cem"),
    **dict.fromkeys(("ClipHandle", "WordTokenizer", "WorldCLIP", "attribute_prompt", "clip_group_predict",
                     "clip_group_scores", "group_prompts", "load_clip", "train_world_clip"), ".clip"),
    **dict.fromkeys(("concept_activation_maps", "overlay_heatmap", "save_coam_gallery", "upsample_maps"), ".coam"),
    **dict.fromkeys(("ConceptTensors", "to_tensors", "toy_concept_dataset"), ".data"),
    **dict.fromkeys(("ConceptBank", "PostHocCBM", "embed_images", "fit_sparse_classifier", "learn_cavs",
                     "train_posthoc_cbm"), ".posthoc"),
    **dict.fromkeys(("TrainHistory", "fit"), ".training"),
    "TrainConfig": ".train_config",
}

if TYPE_CHECKING:
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
    from .train_config import TrainConfig

__all__ = [
    "BackboneOutput", "SmallCNN", "SmallViT", "build_backbone", "train_backbone",
    "ConceptModelOutput", "predict", "predict_classes", "predict_concepts",
    "ConceptBottleneckModel", "train_cbm", "ConceptEmbeddingModel", "train_cem",
    "ClipHandle", "WordTokenizer", "WorldCLIP", "attribute_prompt", "clip_group_predict", "clip_group_scores",
    "group_prompts", "load_clip", "train_world_clip",
    "concept_activation_maps", "overlay_heatmap", "save_coam_gallery", "upsample_maps",
    "ConceptTensors", "to_tensors", "toy_concept_dataset",
    "ConceptBank", "PostHocCBM", "embed_images", "fit_sparse_classifier", "learn_cavs", "train_posthoc_cbm",
    "TrainHistory", "fit", "TrainConfig",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
