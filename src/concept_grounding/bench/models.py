"""Training of the bench's concept models, one function per kind, shared by the bench runner
and the Space (which trains the same models on a smaller :class:`~.training.TrainConfig`
when no bench run was saved)."""

from __future__ import annotations

from typing import Any

from ..models.training import TrainConfig
from .config import MODEL_VARIANTS

__all__ = ["train_variant", "train_posthoc"]


def train_variant(
    name: str,
    tensors: Any,
    train: TrainConfig,
    *,
    concept_loss_weight: float = 1.0,
    backbone: str | dict[str, Any] = "cnn",
    cache: dict | None = None,
) -> Any:
    """Train the Table 1 model ``name`` (a key of :data:`~.config.MODEL_VARIANTS`).

    Args:
        tensors: :class:`~concept_grounding.models.data.ConceptTensors` with the variant's
            labels (class-level or per-image concepts, as ``MODEL_VARIANTS[name].labels`` says).
        train: epochs, seed and (optionally) batch size / learning rate.
        concept_loss_weight: ``lambda`` of joint CBMs and CEMs.
        backbone: backbone config (:func:`~concept_grounding.models.backbone.build_backbone`).
        cache: shared between calls of one run: an independent CBM's concept predictor is
            kept under ``("concepts", labels)`` and a sequential CBM reuses it, as Koh et al. do.

    Returns:
        The trained model in eval mode.
    """
    from ..models import train_cbm, train_cem

    if name not in MODEL_VARIANTS:
        raise ValueError(f"model variant {name!r} is unknown; known: {list(MODEL_VARIANTS)}")
    spec = MODEL_VARIANTS[name]
    cache = {} if cache is None else cache
    common = dict(train=train, backbone=backbone)
    if spec.family == "cem":
        return train_cem(tensors, concept_loss_weight=concept_loss_weight, **common)
    reuse = cache.get(("concepts", spec.labels)) if spec.mode == "sequential" else None
    model = train_cbm(
        tensors,
        mode=spec.mode,
        concept_loss_weight=concept_loss_weight,
        bottleneck=spec.bottleneck,
        per_concept=spec.per_concept,
        concept_model=reuse,
        **common,
    )
    if spec.mode == "independent" and not spec.per_concept:
        cache[("concepts", spec.labels)] = model
    return model


def train_posthoc(
    class_tensors: Any,
    image_tensors: Any,
    train: TrainConfig,
    *,
    backbone: str | dict[str, Any] = "cnn",
    **cav_options: Any,
) -> Any:
    """A post-hoc CBM (Yuksekgonul et al.): a black-box backbone trained on the class labels
    of ``class_tensors`` (``train.epochs``), then CAVs and a sparse classifier learned from
    the per-image concepts of ``image_tensors``. ``cav_options`` go to
    :func:`~concept_grounding.models.posthoc.train_posthoc_cbm` (``n_pos``, ``n_neg``, ...)."""
    from ..models import train_backbone, train_posthoc_cbm

    net = train_backbone(class_tensors, backbone, train=train)
    return train_posthoc_cbm(net, image_tensors, train=train, **cav_options)
