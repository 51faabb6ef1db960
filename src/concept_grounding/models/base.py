"""What every concept model shares: its output, its checks, and batched inference.

All concept models (:class:`~.cbm.ConceptBottleneckModel`,
:class:`~.cem.ConceptEmbeddingModel`, :class:`~.posthoc.PostHocCBM`) return a
:class:`ConceptModelOutput` from ``forward(images)`` and carry ``num_concepts``,
``num_classes`` and (optionally) ``concept_names``; :func:`predict_concepts` and
:func:`predict_classes` work on any of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ..vocabulary import Vocabulary

__all__ = ["ConceptModelOutput", "ConceptModelMixin", "predict_concepts", "predict_classes", "predict", "seeded"]

#: keyword arguments every model class passes to ``PyTorchModelHubMixin``.
HUB_KWARGS = dict(library_name="concept-grounding", repo_url="https://github.com/concept-grounding/concept-grounding")


@dataclass
class ConceptModelOutput:
    """Output of a concept model's ``forward``.

    Attributes:
        concept_logits: ``(B, L)`` logits of concept presence (``sigmoid`` gives ``concept_probs``).
        concept_probs: ``(B, L)`` predicted probability that each concept is present.
        class_logits: ``(B, K)`` class logits.
        concept_scores: ``(B, L)`` what the label predictor reads (CBM: soft or hard
            probabilities; CEM: probabilities; post-hoc CBM: ``u = C f(x)``).
        embeddings: ``(B, d)`` pooled backbone embeddings.
        features: pre-pooling features, ``(B, d, h, w)`` for a CNN, ``(B, N, d)`` for a ViT.
    """

    concept_logits: torch.Tensor
    concept_probs: torch.Tensor
    class_logits: torch.Tensor
    concept_scores: torch.Tensor | None = None
    embeddings: torch.Tensor | None = None
    features: torch.Tensor | None = None


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run a block with torch's global RNG seeded to ``seed``, restoring the outer state after."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


class ConceptModelMixin:
    """Checks shared by the concept models (mixed into ``nn.Module`` subclasses)."""

    num_concepts: int
    num_classes: int
    concept_names: list[str] | None

    def _init_concepts(self, num_concepts: int, num_classes: int, concept_names: Sequence[str] | None) -> None:
        """Set and check ``num_concepts``, ``num_classes`` and ``concept_names``."""
        self.num_concepts, self.num_classes = int(num_concepts), int(num_classes)
        self.concept_names = list(concept_names) if concept_names is not None else None
        self._validate_names()

    def _validate_names(self) -> None:
        if self.num_concepts < 1:
            raise ValueError(f"num_concepts must be >= 1, got {self.num_concepts}")
        if self.num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {self.num_classes}")
        if self.concept_names is not None and len(self.concept_names) != self.num_concepts:
            raise ValueError(f"concept_names has {len(self.concept_names)} names but num_concepts={self.num_concepts}")

    def check_concepts(self, num_concepts: int, concept_names: Sequence[str] | None = None, what: str = "data") -> None:
        """Raise ``ValueError`` unless ``what`` has this model's concepts (count, and names if both know them)."""
        if int(num_concepts) != self.num_concepts:
            raise ValueError(
                f"{type(self).__name__} predicts {self.num_concepts} concepts but the {what} has "
                f"{num_concepts}; pass the same concept_indices the model was trained with"
            )
        if concept_names and self.concept_names and list(concept_names) != list(self.concept_names):
            diff = [(a, b) for a, b in zip(self.concept_names, concept_names) if a != b][:3]
            raise ValueError(f"the {what}'s concept names differ from the model's, e.g. (model, {what}) = {diff}")

    def check_vocabulary(self, vocab: Vocabulary) -> tuple[int, ...]:
        """0-based vocabulary indices of the model's concepts; ``ValueError`` if any name is unknown."""
        if self.concept_names is None:
            raise ValueError(f"this {type(self).__name__} has no concept_names to match against a vocabulary")
        unknown = [n for n in self.concept_names if n not in vocab.attributes]
        if unknown:
            raise ValueError(f"{len(unknown)} concept name(s) are not in the vocabulary, e.g. {unknown[:3]}")
        return tuple(vocab.attribute_index(n) for n in self.concept_names)

    def check_data(self, tensors) -> None:
        """``check_concepts`` against a :class:`~.data.ConceptTensors` and its class count."""
        self.check_concepts(tensors.num_concepts, tensors.concept_names, "dataset")
        if len(tensors) and int(tensors.labels.max()) >= self.num_classes:
            raise ValueError(
                f"dataset has label {int(tensors.labels.max())} but the model has num_classes={self.num_classes}"
            )


def _check_images(images: torch.Tensor) -> torch.Tensor:
    if not isinstance(images, torch.Tensor) or images.ndim != 4 or images.shape[1] != 3:
        shape = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
        raise ValueError(f"images must be a float tensor (N, 3, H, W) in [0, 1], got {shape}")
    return images.float()


@torch.no_grad()
def predict(model: nn.Module, images: torch.Tensor, batch_size: int = 256) -> ConceptModelOutput:
    """Batched ``model(images)`` in eval mode (the mode is restored after), on the model's device.

    Returns a :class:`ConceptModelOutput` with ``concept_logits``, ``concept_probs``,
    ``class_logits`` and ``concept_scores`` concatenated over batches (on CPU).
    """
    images = _check_images(images)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    parts: list[ConceptModelOutput] = []
    try:
        for start in range(0, images.shape[0], batch_size):
            out = model(images[start : start + batch_size].to(device))
            parts.append(out)
    finally:
        model.train(was_training)
    cat = lambda name: torch.cat([getattr(p, name).cpu() for p in parts]) if parts else torch.empty(0)  # noqa: E731
    return ConceptModelOutput(
        concept_logits=cat("concept_logits"),
        concept_probs=cat("concept_probs"),
        class_logits=cat("class_logits"),
        concept_scores=cat("concept_scores") if parts and parts[0].concept_scores is not None else None,
    )


def predict_concepts(model: nn.Module, images: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """``(N, L)`` predicted concept probabilities of any concept model for images ``(N, 3, H, W)`` in [0, 1].

    SUB's binary rule (docs/sub_accuracy.md) reads these: present iff probability > 0.5. For a post-hoc
    CBM the probability is ``sigmoid`` of the CAV's SVM decision value ``c_j . f(x) + b_j``,
    so > 0.5 exactly where the SVM says "present".
    """
    return predict(model, images, batch_size).concept_probs


def predict_classes(model: nn.Module, images: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """``(N, K)`` class logits of any concept model for images ``(N, 3, H, W)`` in [0, 1]."""
    return predict(model, images, batch_size).class_logits
