from .backbone import BackboneOutput, SmallCNN, SmallViT, build_backbone, train_backbone
from .base import ConceptModelOutput, predict, predict_classes, predict_concepts
from .cbm import ConceptBottleneckModel, train_cbm
from .cem import ConceptEmbeddingModel, train_cem
from .clip import (
    ClipHandle,
    WordTokenizer,
    WorldCLIP,
    attribute_prompt,
    clip_group_predict,
    clip_group_scores,
    group_prompts,
    load_clip,
    train_world_clip,
)
from .coam import concept_activation_maps, overlay_heatmap, save_coam_gallery, upsample_maps
from .concept_bank import ConceptBank, embed_images, learn_cavs
from .data import ConceptTensors, to_tensors, toy_concept_dataset
from .posthoc import PostHocCBM, fit_sparse_classifier, train_posthoc_cbm
from .train_config import TrainConfig
from .training import TrainHistory, fit
