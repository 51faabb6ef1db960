"""Concept Bottleneck Models (Koh et al. 2020) and the per-concept CBM (Heidemann et al. 2023).

``x -> g(f(x))``: the concept predictor ``f`` (backbone + linear head) gives concept logits
``(B, L)``; the label predictor ``g`` reads the bottleneck ``c_hat = sigmoid(logits)``
(``bottleneck="soft"``) or its 0/1 threshold at 0.5 (``"hard"``; a straight-through
estimator in joint training) and gives class logits ``(B, K)``.

Training (:func:`train_cbm`: independent, sequential or joint, Koh et al. Sec. 3; hard or soft
targets; ``per_concept=True`` for Heidemann et al.'s per-concept CBM, which SUB evaluates): docs/bench.md,
"The concept models".
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Literal

import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn
from torch.nn import functional as F

from .backbone import backbone_config, build_backbone
from .base import HUB_KWARGS, ConceptModelMixin, ConceptModelOutput, seeded
from .data import ConceptTensors, training_tensors
from .train_config import TrainConfig, train_settings
from .training import TrainHistory, fit, random_hflip

__all__ = ["ConceptBottleneckModel", "train_cbm"]

CBM_MODES = ("independent", "sequential", "joint")


def _label_predictor(num_concepts: int, num_classes: int, hidden: int) -> nn.Module:
    if hidden <= 0:
        return nn.Linear(num_concepts, num_classes)
    return nn.Sequential(nn.Linear(num_concepts, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


class ConceptBottleneckModel(
    nn.Module, ConceptModelMixin, PyTorchModelHubMixin, **HUB_KWARGS, tags=["concept-bottleneck-model"]
):
    """A CBM: images ``(B, 3, H, W)`` in [0, 1] -> :class:`~.base.ConceptModelOutput`.

    Args:
        num_concepts: ``L``.
        num_classes: ``K``.
        backbone: backbone config (``"cnn"``, ``"vit"`` or a dict, see :func:`~.backbone.build_backbone`).
        concept_names: the ``L`` attribute names (checked against data and vocabulary).
        per_concept: one weight-independent CNN per concept (Heidemann et al.); then
            ``backbone`` must be a CNN (its strides are kept) and every concept's CNN has
            ``per_concept_channels`` channels per layer on the input downsampled by
            ``per_concept_downsample``. With the defaults it costs about ``L / 10`` times the
            shared CNN's time per image.
        bottleneck: ``"soft"`` (probabilities) or ``"hard"`` (0/1) into the label predictor.
        label_hidden: hidden width of the label predictor; 0 = linear (Koh et al.'s choice on CUB).
        training_mode: how it was (or will be) trained, one of :data:`CBM_MODES` (recorded in the config).
        concept_loss_weight: ``lambda`` of joint training (recorded in the config).
        per_concept_channels: channels of each concept's CNN (``per_concept`` only).
        per_concept_downsample: each concept's CNN sees the image average-pooled by this
            factor (``per_concept`` only; 2 = a quarter of the pixels, what makes ``L`` CNNs
            affordable on a CPU).
    """

    def __init__(
        self,
        num_concepts: int,
        num_classes: int,
        backbone: str | dict[str, Any] | None = None,
        concept_names: Sequence[str] | None = None,
        per_concept: bool = False,
        bottleneck: Literal["soft", "hard"] = "soft",
        label_hidden: int = 0,
        training_mode: Literal["independent", "sequential", "joint"] = "joint",
        concept_loss_weight: float = 1.0,
        per_concept_channels: Sequence[int] = (4, 4, 8, 8),
        per_concept_downsample: int = 2,
    ) -> None:
        super().__init__()
        self._init_concepts(num_concepts, num_classes, concept_names)
        if bottleneck not in ("soft", "hard"):
            raise ValueError(f"bottleneck must be 'soft' or 'hard', got {bottleneck!r}")
        if training_mode not in CBM_MODES:
            raise ValueError(f"training_mode must be one of {CBM_MODES}, got {training_mode!r}")
        self.bottleneck, self.per_concept = bottleneck, bool(per_concept)
        self.training_mode, self.concept_loss_weight = training_mode, float(concept_loss_weight)
        config = backbone_config(backbone)
        if self.per_concept:
            if config["kind"] != "cnn":
                raise ValueError("per_concept=True needs a CNN backbone (one grouped-conv group per concept)")
            channels = [int(c) * self.num_concepts for c in per_concept_channels]
            strides = list(config["strides"])
            if len(strides) != len(channels):
                raise ValueError(
                    f"per_concept_channels {list(per_concept_channels)} must have one entry per "
                    f"backbone layer ({len(strides)})"
                )
            config = {
                **config,
                "channels": channels,
                "strides": strides,
                "groups": self.num_concepts,
                "downsample": int(per_concept_downsample),
            }
        self.backbone = build_backbone(config)
        d = self.backbone.embed_dim
        if self.per_concept:
            width = d // self.num_concepts
            self.concept_weight = nn.Parameter(torch.randn(self.num_concepts, width) / width**0.5)
            self.concept_bias = nn.Parameter(torch.zeros(self.num_concepts))
        else:
            self.concept_head = nn.Linear(d, self.num_concepts)
        self.label_predictor = _label_predictor(self.num_concepts, self.num_classes, int(label_hidden))

    # ------------------------------------------------------------------ parts
    def concept_parameters(self) -> list[nn.Parameter]:
        """Parameters of the concept predictor ``f`` (backbone + concept head)."""
        head = [self.concept_weight, self.concept_bias] if self.per_concept else list(self.concept_head.parameters())
        return list(self.backbone.parameters()) + head

    def concept_logits_from_embeddings(self, pooled: torch.Tensor) -> torch.Tensor:
        """pooled ``(B, d)`` -> concept logits ``(B, L)``; per concept only its own group's channels."""
        if self.per_concept:
            grouped = pooled.reshape(pooled.shape[0], self.num_concepts, -1)
            return torch.einsum("blc,lc->bl", grouped, self.concept_weight) + self.concept_bias
        return self.concept_head(pooled)

    def bottleneck_scores(self, concept_probs: torch.Tensor) -> torch.Tensor:
        """What ``g`` reads: probabilities (soft) or 0/1 with straight-through gradients (hard)."""
        if self.bottleneck == "soft":
            return concept_probs
        hard = (concept_probs > 0.5).to(concept_probs.dtype)
        return concept_probs + (hard - concept_probs).detach()

    def forward(
        self,
        images: torch.Tensor,
        concepts: torch.Tensor | None = None,
        intervention_mask: torch.Tensor | None = None,
    ) -> ConceptModelOutput:
        """images ``(B, 3, H, W)`` -> output. With ``concepts`` ``(B, L)`` and a boolean
        ``intervention_mask`` ``(B, L)``, the masked concept probabilities are replaced by
        the given values before ``g`` (a test-time intervention, Koh et al. Sec. 6)."""
        out = self.backbone(images)
        logits = self.concept_logits_from_embeddings(out.pooled)
        probs = torch.sigmoid(logits)
        g_input = probs
        if intervention_mask is not None:
            if concepts is None:
                raise ValueError("intervention_mask needs the concepts to intervene with")
            g_input = torch.where(intervention_mask.bool(), concepts.to(probs.dtype), probs)
        scores = self.bottleneck_scores(g_input)
        return ConceptModelOutput(logits, probs, self.label_predictor(scores), scores, out.pooled, out.features)


# ---------------------------------------------------------------------- training
def concept_bce(logits: torch.Tensor, concepts: torch.Tensor) -> torch.Tensor:
    """``sum_j BCE(logits_j, c_j)`` averaged over the batch: logits, concepts ``(B, L)`` -> scalar
    (Koh et al.'s ``sum_j L_Cj``; concepts may be soft, in [0, 1])."""
    return F.binary_cross_entropy_with_logits(logits, concepts, reduction="sum") / max(int(logits.shape[0]), 1)


def _train_concept_predictor(model: ConceptBottleneckModel, images, concepts, **kw) -> TrainHistory:
    def loss(batch):
        out = model.backbone(batch[0])
        return concept_bce(model.concept_logits_from_embeddings(out.pooled), batch[1])

    return fit(loss, model.concept_parameters(), (images, concepts), module=model, desc="CBM concepts", **kw)


@torch.no_grad()
def _predicted_probs(model: ConceptBottleneckModel, images: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    model.eval()
    parts = [
        torch.sigmoid(model.concept_logits_from_embeddings(model.backbone(images[i : i + batch_size]).pooled))
        for i in range(0, images.shape[0], batch_size)
    ]
    return torch.cat(parts)


def _train_label_predictor(model: ConceptBottleneckModel, inputs, labels, **kw) -> TrainHistory:
    def loss(batch):
        return F.cross_entropy(model.label_predictor(model.bottleneck_scores(batch[0])), batch[1])

    return fit(
        loss,
        model.label_predictor.parameters(),
        (inputs, labels),
        module=model.label_predictor,
        desc="CBM labels",
        **kw,
    )


def train_cbm(
    train_tensors: ConceptTensors,
    mode: Literal["independent", "sequential", "joint"] = "joint",
    concept_loss_weight: float = 1.0,
    epochs: int | None = None,
    seed: int | None = None,
    *,
    backbone: str | dict[str, Any] | None = None,
    per_concept: bool = False,
    per_concept_channels: Sequence[int] = (4, 4, 8, 8),
    per_concept_downsample: int = 2,
    bottleneck: Literal["soft", "hard"] = "soft",
    label_hidden: int = 0,
    label_epochs: int | None = None,
    concept_model: ConceptBottleneckModel | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
    label_lr: float = 1e-2,
    schedule: str = "onecycle",
    augment: bool = True,
    weight_decay: float = 0.0,
    val_tensors: ConceptTensors | None = None,
    patience: int | None = None,
    progress: bool | None = None,
    train: TrainConfig | None = None,
) -> ConceptBottleneckModel:
    """Train a :class:`ConceptBottleneckModel` in one of Koh et al.'s three ways.

    Args:
        train_tensors: :class:`~.data.ConceptTensors` (images, concepts ``(N, L)``, labels).
        mode: ``"independent"``, ``"sequential"`` or ``"joint"`` (module docstring).
        concept_loss_weight: ``lambda`` in ``CE + lambda * BCE`` (joint only).
        epochs: epochs of the image-side training (concept predictor, or everything for joint;
            default 10).
        seed: seeds initialisation and shuffling (default 0).
        backbone, per_concept, per_concept_channels, per_concept_downsample, bottleneck, label_hidden: see
            :class:`ConceptBottleneckModel`.
        label_epochs: epochs of the label predictor alone (independent / sequential;
            default ``max(30, 3 * epochs)``, cheap: it trains on cached concept vectors).
        concept_model: a trained CBM whose concept predictor is reused (copied, not retrained)
            for independent / sequential training.
        batch_size, lr, weight_decay: of the image-side training (Adam; batch 32 by default; ``lr``
            is the peak rate; default 3e-3, or 3e-2 for ``per_concept``, whose many tiny CNNs learn
            slowly otherwise).
        label_lr: constant Adam rate of the label predictor alone.
        schedule: learning-rate schedule of the image-side training (see :func:`~.training.fit`).
        augment: random horizontal flips of the training images (:func:`~.training.random_hflip`).
        val_tensors, patience: early stopping on the validation loss.
        progress: show tqdm bars (default ``True``).
        train: a :class:`~.training.TrainConfig` instead of the loose ``epochs``, ``seed``,
            ``batch_size``, ``lr`` and ``progress`` (a knob given both ways is refused).

    Returns:
        The trained model in eval mode; ``model.history`` maps stage -> :class:`~.training.TrainHistory`.
    """
    if mode not in CBM_MODES:
        raise ValueError(f"mode must be one of {CBM_MODES}, got {mode!r}")
    knobs = train_settings(train, epochs=epochs, seed=seed, batch_size=batch_size, lr=lr, progress=progress)
    epochs, seed, batch_size, lr, progress = knobs.epochs, knobs.seed, knobs.batch_size or 32, knobs.lr, knobs.progress
    if concept_loss_weight < 0:
        raise ValueError(f"concept_loss_weight must be >= 0, got {concept_loss_weight}")
    images, concepts, labels, names, num_classes = training_tensors(train_tensors)
    names = list(names) or None
    common = dict(batch_size=batch_size, seed=seed, progress=progress)
    if lr is None:
        lr = 3e-2 if per_concept and concept_model is None else 3e-3
    image_side = dict(schedule=schedule, augment=random_hflip if augment else None, weight_decay=weight_decay)
    history: dict[str, TrainHistory] = {}

    if concept_model is not None:
        if mode == "joint":
            raise ValueError("concept_model can only be reused for independent or sequential training")
        concept_model.check_data(train_tensors) if isinstance(
            train_tensors, ConceptTensors
        ) else concept_model.check_concepts(concepts.shape[1])
        model = copy.deepcopy(concept_model)
        with seeded(seed):
            model.label_predictor = _label_predictor(model.num_concepts, num_classes, label_hidden)
        model.num_classes, model.training_mode, model.bottleneck = num_classes, mode, bottleneck
        model._hub_mixin_config = {
            **getattr(model, "_hub_mixin_config", {}),
            "num_classes": num_classes,
            "training_mode": mode,
            "bottleneck": bottleneck,
            "label_hidden": label_hidden,
        }
        history.update(getattr(concept_model, "history", {}) or {})
        history.pop("labels", None)
    else:
        with seeded(seed):
            model = ConceptBottleneckModel(
                concepts.shape[1],
                num_classes,
                backbone_config(backbone, image_size=images.shape[-1]),
                names,
                per_concept,
                bottleneck,
                label_hidden,
                mode,
                concept_loss_weight,
                list(per_concept_channels),
                per_concept_downsample,
            )
    val_fn = None
    if val_tensors is not None:
        model.check_data(val_tensors)
        v_images, v_concepts, v_labels = tuple(val_tensors)

    if mode == "joint":

        def loss(batch):
            out = model(batch[0])
            return F.cross_entropy(out.class_logits, batch[2]) + concept_loss_weight * concept_bce(
                out.concept_logits, batch[1]
            )

        if val_tensors is not None:
            val_fn = lambda: float(loss((v_images, v_concepts, v_labels)))  # noqa: E731
        history["joint"] = fit(
            loss,
            model.parameters(),
            (images, concepts, labels),
            epochs=epochs,
            lr=lr,
            module=model,
            val_fn=val_fn,
            patience=patience,
            desc="CBM joint",
            **common,
            **image_side,
        )
    else:
        if concept_model is None:
            if val_tensors is not None:

                def val_fn() -> float:
                    return float(
                        concept_bce(model.concept_logits_from_embeddings(model.backbone(v_images).pooled), v_concepts)
                    )

            history["concepts"] = _train_concept_predictor(
                model, images, concepts, epochs=epochs, lr=lr, val_fn=val_fn, patience=patience, **common, **image_side
            )
        inputs = concepts if mode == "independent" else _predicted_probs(model, images)
        history["labels"] = _train_label_predictor(
            model, inputs, labels, lr=label_lr, epochs=label_epochs or max(30, 3 * epochs), **common
        )
    model.history = history
    return model.eval()
