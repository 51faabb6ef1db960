"""Concept Embedding Models (Zarlenga et al. 2022, "Concept Embedding Models", NeurIPS).

For each concept ``j`` the backbone embedding ``h = f(x)`` ``(B, d)`` gives two embeddings
``c_j^+ = LeakyReLU(W_j^+ h + b_j^+)`` and ``c_j^- = LeakyReLU(W_j^- h + b_j^-)`` of size
``m``; a scoring function ``s`` shared by all concepts gives the probability
``p_j = sigmoid(s([c_j^+; c_j^-]))``; the concept's embedding is the mixture
``c_j = p_j c_j^+ + (1 - p_j) c_j^-`` (Zarlenga et al. Eq. 1), and the label predictor
reads the concatenation ``[c_1, ..., c_L]`` ``(B, L m)``.

Loss: ``CE(y_hat, y) + alpha * sum_j BCE(p_j, c_j)`` (``alpha = concept_loss_weight``; the
concept term sums over concepts as in the joint CBM, :func:`~.cbm.concept_bce`). Training uses
Adam with a one-cycle schedule and random horizontal flips, as the CBMs. RandInt
(Sec. 3): during training each ``p_j`` is replaced by the true concept label with
probability ``intervention_prob``, which teaches the model to respond to interventions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn
from torch.nn import functional as F

from .backbone import backbone_config, build_backbone
from .base import HUB_KWARGS, ConceptModelMixin, ConceptModelOutput, seeded
from .cbm import concept_bce
from .data import ConceptTensors, training_tensors
from .train_config import TrainConfig, train_settings
from .training import fit, random_hflip

__all__ = ["ConceptEmbeddingModel", "train_cem"]


class ConceptEmbeddingModel(
    nn.Module, ConceptModelMixin, PyTorchModelHubMixin, **HUB_KWARGS, tags=["concept-embedding-model"]
):
    """A CEM: images ``(B, 3, H, W)`` in [0, 1] -> :class:`~.base.ConceptModelOutput`.

    Args:
        num_concepts: ``L``.
        num_classes: ``K``.
        backbone: backbone config (``"cnn"``, ``"vit"`` or a dict).
        concept_names: the ``L`` attribute names.
        embedding_size: ``m``, the size of each of the two embeddings per concept
            (Zarlenga et al. use 16).
        concept_loss_weight: ``alpha`` of the training loss (recorded in the config).
        intervention_prob: RandInt's ``p_int`` (0 disables RandInt; the paper uses 0.25).
    """

    def __init__(
        self,
        num_concepts: int,
        num_classes: int,
        backbone: str | dict[str, Any] | None = None,
        concept_names: Sequence[str] | None = None,
        embedding_size: int = 16,
        concept_loss_weight: float = 1.0,
        intervention_prob: float = 0.25,
    ) -> None:
        super().__init__()
        self._init_concepts(num_concepts, num_classes, concept_names)
        if not 0.0 <= intervention_prob <= 1.0:
            raise ValueError(f"intervention_prob must be in [0, 1], got {intervention_prob}")
        if embedding_size < 1:
            raise ValueError(f"embedding_size must be >= 1, got {embedding_size}")
        self.embedding_size = int(embedding_size)
        self.concept_loss_weight, self.intervention_prob = float(concept_loss_weight), float(intervention_prob)
        self.backbone = build_backbone(backbone_config(backbone))
        self.embedding_generator = nn.Linear(self.backbone.embed_dim, 2 * self.num_concepts * self.embedding_size)
        self.scoring = nn.Linear(2 * self.embedding_size, 1)
        self.label_predictor = nn.Linear(self.num_concepts * self.embedding_size, self.num_classes)

    def concept_embeddings(self, pooled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """pooled ``(B, d)`` -> ``(c_plus, c_minus)``, each ``(B, L, m)``."""
        both = F.leaky_relu(self.embedding_generator(pooled))
        both = both.view(pooled.shape[0], self.num_concepts, 2, self.embedding_size)
        return both[:, :, 0], both[:, :, 1]

    def forward(
        self,
        images: torch.Tensor,
        concepts: torch.Tensor | None = None,
        intervention_mask: torch.Tensor | None = None,
    ) -> ConceptModelOutput:
        """images ``(B, 3, H, W)`` -> output. ``concepts`` ``(B, L)`` with a boolean
        ``intervention_mask`` ``(B, L)`` replaces the masked ``p_j`` by the given values
        (a test-time intervention; RandInt draws the mask itself in training)."""
        out = self.backbone(images)
        c_plus, c_minus = self.concept_embeddings(out.pooled)
        logits = self.scoring(torch.cat([c_plus, c_minus], dim=-1)).squeeze(-1)
        probs = torch.sigmoid(logits)
        mix_probs = probs
        if intervention_mask is not None:
            if concepts is None:
                raise ValueError("intervention_mask needs the concepts to intervene with")
            mix_probs = torch.where(intervention_mask.bool(), concepts.to(probs.dtype), probs)
        mixed = mix_probs.unsqueeze(-1) * c_plus + (1 - mix_probs.unsqueeze(-1)) * c_minus
        class_logits = self.label_predictor(mixed.flatten(1))
        return ConceptModelOutput(logits, probs, class_logits, mix_probs, out.pooled, out.features)


def train_cem(
    train_tensors: ConceptTensors,
    concept_loss_weight: float = 1.0,
    epochs: int | None = None,
    seed: int | None = None,
    *,
    backbone: str | dict[str, Any] | None = None,
    embedding_size: int = 16,
    intervention_prob: float = 0.25,
    batch_size: int | None = None,
    lr: float | None = None,
    schedule: str = "onecycle",
    augment: bool = True,
    weight_decay: float = 0.0,
    val_tensors: ConceptTensors | None = None,
    patience: int | None = None,
    progress: bool | None = None,
    train: TrainConfig | None = None,
) -> ConceptEmbeddingModel:
    """Train a :class:`ConceptEmbeddingModel` jointly with RandInt (module docstring).

    ``batch_size`` (default 32), ``lr`` (peak, default 3e-3), ``schedule``, ``weight_decay``: see
    :func:`~.training.fit`; ``epochs`` default 10, ``seed`` 0, ``progress`` ``True``;
    ``augment``: random horizontal flips of the training images; ``train``: a
    :class:`~.training.TrainConfig` instead of the loose ``epochs``, ``seed``, ``batch_size``,
    ``lr`` and ``progress`` (a knob given both ways is refused). Returns the model in eval mode;
    ``model.history["joint"]`` is its :class:`~.training.TrainHistory`.
    """
    knobs = train_settings(train, epochs=epochs, seed=seed, batch_size=batch_size, lr=lr, progress=progress)
    epochs, seed, progress = knobs.epochs, knobs.seed, knobs.progress
    batch_size, lr = knobs.batch_size or 32, 3e-3 if knobs.lr is None else knobs.lr
    if concept_loss_weight < 0:
        raise ValueError(f"concept_loss_weight must be >= 0, got {concept_loss_weight}")
    images, concepts, labels, names, num_classes = training_tensors(train_tensors)
    names = list(names) or None
    with seeded(seed):
        model = ConceptEmbeddingModel(
            concepts.shape[1],
            num_classes,
            backbone_config(backbone, image_size=images.shape[-1]),
            names,
            embedding_size,
            concept_loss_weight,
            intervention_prob,
        )

    def loss(batch, randint: bool = True):
        mask = None
        if randint and model.intervention_prob > 0:
            mask = torch.rand(batch[1].shape) < model.intervention_prob
        out = model(batch[0], batch[1], mask)
        return F.cross_entropy(out.class_logits, batch[2]) + concept_loss_weight * concept_bce(
            out.concept_logits, batch[1]
        )

    val_fn = None
    if val_tensors is not None:
        model.check_data(val_tensors)
        val_fn = lambda: float(loss(tuple(val_tensors), randint=False))  # noqa: E731
    model.history = {
        "joint": fit(
            loss,
            model.parameters(),
            (images, concepts, labels),
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            module=model,
            val_fn=val_fn,
            patience=patience,
            desc="CEM",
            progress=progress,
            schedule=schedule,
            augment=random_hflip if augment else None,
            weight_decay=weight_decay,
        )
    }
    return model.eval()
