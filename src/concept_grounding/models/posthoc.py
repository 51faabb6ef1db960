"""Post-hoc CBMs (Yuksekgonul et al. 2023, as reproduced by Aysel et al.).

1. A frozen backbone ``f`` gives embeddings ``f(X) in R^d``.
2. Concept activation vectors (Kim et al. 2018): for concept ``j`` a linear SVM separates
   the embeddings of ``N_p`` images with the concept from ``N_n`` random images without
   it; its normal ``c_j`` is the CAV (:func:`~.concept_bank.learn_cavs`; paper:
   ``N_p = N_n = 100``, ``C = 1``). The ``L`` CAVs form the concept bank ``C`` (``L x d``,
   :class:`~.concept_bank.ConceptBank`).
3. Concept scores ``u = C f(X)`` (Aysel et al. Sec. 3; ``score="margin"`` instead uses
   Yuksekgonul et al.'s code's signed distance ``(c_j . f + b_j) / ||c_j||``).
4. A sparse linear classifier ``h(u) = theta^T u + b``, ``theta`` ``L x K``, trained with
   the elastic-net penalty of Yuksekgonul et al.
   (:func:`fit_sparse_classifier`): mean cross-entropy
   ``+ lam * (l1_ratio * |theta|_1 + (1 - l1_ratio) / 2 * |theta|_2^2)`` with their CUB
   values ``lam = 2e-4``, ``l1_ratio = 0.99``. They fit sklearn's one-vs-rest
   ``SGDClassifier`` (``solver="sklearn"`` does that); the default ``solver="fista"`` fits
   the multinomial (softmax) version of the same objective by accelerated proximal
   gradient, which is deterministic, fast and gives exact zeros.

CoAM maps come from :mod:`.coam` through :meth:`PostHocCBM.concept_activation_maps`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn

from .backbone import BackboneOutput, SmallCNN, SmallViT, backbone_config, build_backbone
from .base import HUB_KWARGS, ConceptModelMixin, ConceptModelOutput
from .coam import concept_activation_maps, upsample_maps
from .concept_bank import ConceptBank, bank_scores, embed_images, learn_cavs
from .data import training_tensors
from .train_config import TrainConfig, train_settings

__all__ = [
    "fit_sparse_classifier",
    "FeatureMapBackbone",
    "PostHocCBM",
    "train_posthoc_cbm",
]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------- sparse classifier
def _soft_threshold(w: torch.Tensor, t: float) -> torch.Tensor:
    return torch.sign(w) * torch.clamp(w.abs() - t, min=0.0)


def fit_sparse_classifier(
    scores: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
    lam: float = 2e-4,
    l1_ratio: float = 0.99,
    solver: Literal["fista", "sklearn"] = "fista",
    max_iter: int = 500,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Elastic-net logistic regression on concept scores (module docstring, step 4).

    The scores are standardised for the fit and the scaling is folded back, so the
    returned ``(theta, b)`` act on raw ``u``: ``logits = u @ theta + b``.

    Args:
        scores: ``u`` ``(N, L)``.
        labels: ``(N,)`` class indices in ``[0, num_classes)``.
        lam, l1_ratio: the penalty ``lam * (l1_ratio |theta|_1 + (1 - l1_ratio)/2 |theta|_2^2)``.
        solver: ``"fista"`` (multinomial) or ``"sklearn"`` (``SGDClassifier``, one-vs-rest,
            as Yuksekgonul et al.). Classes absent from ``labels`` get bias -1e4 there.

    Returns:
        ``theta`` ``(L, K)`` and ``b`` ``(K,)``.
    """
    u = scores.detach().double()
    y = labels.detach().long()
    n, L = u.shape
    mean, std = u.mean(0), u.std(0, unbiased=False).clamp_min(1e-8)
    z = (u - mean) / std
    if solver == "sklearn":
        from sklearn.linear_model import SGDClassifier

        clf = SGDClassifier(
            loss="log_loss",
            penalty="elasticnet",
            alpha=lam,
            l1_ratio=l1_ratio,
            max_iter=max_iter * 20,
            random_state=seed,
            tol=1e-6,
        )
        clf.fit(z.numpy(), y.numpy())
        w = torch.zeros(L, num_classes, dtype=torch.float64)
        b = torch.full((num_classes,), -1e4, dtype=torch.float64)
        coef, inter = torch.as_tensor(clf.coef_), torch.as_tensor(clf.intercept_)
        classes = torch.as_tensor(clf.classes_).long()
        if len(classes) == 2:  # sklearn keeps one vector for two classes: softmax([0, z]) = sigmoid(z)
            w[:, classes[1]], b[classes[0]], b[classes[1]] = coef[0], 0.0, inter[0]
        else:
            w[:, classes], b[classes] = coef.T, inter
    elif solver == "fista":
        onehot = torch.nn.functional.one_hot(y, num_classes).double()
        seen = onehot.sum(0) > 0
        lipschitz = 0.5 * (torch.linalg.matrix_norm(z, 2) ** 2 + n) / n + lam * (1 - l1_ratio)
        step = 1.0 / float(lipschitz)
        w = torch.zeros(L, num_classes, dtype=torch.float64)
        b = torch.zeros(num_classes, dtype=torch.float64)
        wy, by, t = w.clone(), b.clone(), 1.0
        for _ in range(max_iter):
            logits = z @ wy + by
            logits[:, ~seen] = -1e4
            g = (torch.softmax(logits, 1) - onehot) / n
            w_new = _soft_threshold(wy - step * (z.T @ g + lam * (1 - l1_ratio) * wy), step * lam * l1_ratio)
            b_new = by - step * g.sum(0)
            t_new = (1 + (1 + 4 * t * t) ** 0.5) / 2
            wy = w_new + (t - 1) / t_new * (w_new - w)
            by = b_new + (t - 1) / t_new * (b_new - b)
            converged = float((w_new - w).abs().max()) < 1e-7
            w, b, t = w_new, b_new, t_new
            if converged:
                break
        b = torch.where(seen, b, torch.full_like(b, -1e4))
    else:
        raise ValueError(f"solver must be 'fista' or 'sklearn', got {solver!r}")
    theta = w / std[:, None]
    bias = b - (mean / std) @ w
    return theta.float(), bias.float()


# ------------------------------------------------------------------------ model
class FeatureMapBackbone(nn.Module):
    """Any backbone as a post-hoc CBM's: ``backbone(normalised images)`` gives a feature map
    ``E`` ``(B, d, h, w)``; ``pooled`` is its global average (Aysel et al.'s ``f(x)``).

    Args:
        backbone: images ``(B, 3, H, W)`` (after ``mean`` / ``std``) -> the map, or a structured
            output that ``pick`` (or, by default, its ``features`` attribute) turns into the map.
        embed_dim: ``d``.
        mean, std: per-channel normalisation applied to [0, 1] images (default none).
    """

    def __init__(
        self,
        backbone: Callable[[torch.Tensor], Any],
        embed_dim: int,
        *,
        pick: Callable[[Any], torch.Tensor] | None = None,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
    ) -> None:
        super().__init__()
        self.trunk, self.embed_dim, self.pick = backbone, int(embed_dim), pick
        self.register_buffer("mean", torch.tensor(mean or (0.0, 0.0, 0.0)).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std or (1.0, 1.0, 1.0)).view(1, 3, 1, 1), persistent=False)

    def forward(self, images: torch.Tensor) -> BackboneOutput:
        out = self.trunk((images - self.mean) / self.std)
        if self.pick is not None:
            features = self.pick(out)
        elif isinstance(out, torch.Tensor):
            features = out
        elif getattr(out, "features", None) is not None:
            features = out.features  # the project's BackboneOutput
        else:
            raise ValueError(
                f"the backbone returns a {type(out).__name__}: declare which part is the feature map "
                "with features= (an index or a key)"
            )
        if features.ndim != 4 or features.shape[1] != self.embed_dim:
            raise ValueError(
                f"the feature map is {tuple(features.shape)}; expected (B, d={self.embed_dim}, h, w) "
                "to match the concept vectors"
            )
        return BackboneOutput(features.mean(dim=(2, 3)), features, tuple(features.shape[-2:]))


class PostHocCBM(nn.Module, ConceptModelMixin, PyTorchModelHubMixin, **HUB_KWARGS, tags=["post-hoc-cbm"]):
    """Backbone ``f`` + concept bank ``C`` + linear classifier ``h`` (module docstring).

    ``forward`` gives ``concept_scores = u`` (what ``h`` reads), ``concept_logits = u + b_svm``
    (the SVM decision values; ``concept_probs = sigmoid`` of them, > 0.5 where the CAV's
    SVM says "present") and ``class_logits = h(u)``. ``classifier.weight`` is ``theta^T``
    (``K x L``); :attr:`theta` returns ``theta`` ``(L, K)`` for CGIM / CEM.

    Args:
        num_concepts, num_classes: ``L``, ``K`` (``K = 0``: no classifier yet, see :meth:`set_classifier`).
        backbone: the project backbone's config (weights are in the state dict), or any
            module returning a :class:`~.backbone.BackboneOutput` (e.g. :class:`FeatureMapBackbone`
            around your own trunk; such a model is not saved with ``save_pretrained``).
        concept_names: ``L`` attribute names.
        score: ``"dot"`` (``u = C f``) or ``"margin"`` (``(C f + b) / ||c||``).
    """

    def __init__(
        self,
        num_concepts: int,
        num_classes: int,
        backbone: str | dict[str, Any] | nn.Module | None = None,
        concept_names: Sequence[str] | None = None,
        score: Literal["dot", "margin"] = "dot",
    ) -> None:
        super().__init__()
        self._init_concepts(num_concepts, max(int(num_classes), 1), concept_names)
        self.num_classes = int(num_classes)
        if score not in ("dot", "margin"):
            raise ValueError(f"score must be 'dot' or 'margin', got {score!r}")
        self.score = score
        self.backbone = backbone if isinstance(backbone, nn.Module) else build_backbone(backbone_config(backbone))
        d = self.backbone.embed_dim
        self.register_buffer("concept_vectors", torch.zeros(self.num_concepts, d))
        self.register_buffer("concept_intercepts", torch.zeros(self.num_concepts))
        self.classifier = nn.Linear(self.num_concepts, self.num_classes) if self.num_classes else None

    @property
    def theta(self) -> torch.Tensor:
        """``theta`` ``(L, K)``: the classifier's weights, global importance of concept ``j`` for class ``k``."""
        if self.classifier is None:
            raise ValueError("this post-hoc CBM has no classifier yet (pass theta= or call set_classifier)")
        return self.classifier.weight.detach().T

    def set_classifier(self, theta: torch.Tensor | np.ndarray, bias: torch.Tensor | np.ndarray | None = None) -> None:
        """``logits = u @ theta + bias``; ``theta`` ``(L, K)``, ``bias`` ``(K,)`` (default 0)."""
        theta = torch.as_tensor(np.asarray(theta), dtype=torch.float32)
        if theta.ndim != 2 or theta.shape[0] != self.num_concepts:
            raise ValueError(f"theta must be (L={self.num_concepts}, K), got {tuple(theta.shape)}")
        layer = nn.Linear(theta.shape[0], theta.shape[1]).to(self.concept_vectors.device)
        with torch.no_grad():
            layer.weight.copy_(theta.T)
            layer.bias.copy_(torch.zeros(theta.shape[1]) if bias is None else torch.as_tensor(np.asarray(bias)))
        self.classifier, self.num_classes = layer, int(theta.shape[1])

    @property
    def concept_bank(self) -> ConceptBank:
        return ConceptBank(
            self.concept_vectors.clone(), self.concept_intercepts.clone(), tuple(self.concept_names or ())
        )

    def set_concept_bank(self, bank: ConceptBank) -> None:
        """Copy a bank's CAVs in (``ValueError`` if its size does not match)."""
        if tuple(bank.vectors.shape) != tuple(self.concept_vectors.shape):
            raise ValueError(
                f"concept bank is {tuple(bank.vectors.shape)}, the model needs {tuple(self.concept_vectors.shape)}"
            )
        if bank.names and self.concept_names:
            self.check_concepts(bank.num_concepts, bank.names, "concept bank")
        self.concept_vectors.copy_(bank.vectors)
        self.concept_intercepts.copy_(bank.intercepts)

    def concept_scores(self, pooled: torch.Tensor) -> torch.Tensor:
        """``u`` ``(B, L)`` from pooled embeddings ``(B, d)``."""
        return bank_scores(pooled, self.concept_vectors, self.concept_intercepts, self.score)

    def forward(self, images: torch.Tensor) -> ConceptModelOutput:
        out = self.backbone(images)
        u = self.concept_scores(out.pooled)
        logits = u + self.concept_intercepts if self.score == "dot" else u
        classes = self.classifier(u) if self.classifier is not None else torch.zeros(len(u), 0, device=u.device)
        return ConceptModelOutput(logits, torch.sigmoid(logits), classes, u, out.pooled, out.features)

    @torch.no_grad()
    def concept_activation_maps(self, images: torch.Tensor, upsample: bool = True) -> torch.Tensor:
        """CoAM ``(B, L, H, W)`` (``upsample``) or on the feature grid ``(B, L, h, w)`` (Aysel et al. Eq. 6)."""
        was = self.training
        self.eval()
        try:
            out = self.backbone(images)
        finally:
            self.train(was)
        maps = concept_activation_maps(out.features, self.concept_vectors, out.grid_size)
        return upsample_maps(maps, tuple(images.shape[-2:])) if upsample else maps


def train_posthoc_cbm(
    backbone: SmallCNN | SmallViT,
    train_tensors,
    *,
    n_pos: int = 100,
    n_neg: int = 100,
    C: float = 1.0,
    lam: float = 2e-4,
    l1_ratio: float = 0.99,
    solver: Literal["fista", "sklearn"] = "fista",
    score: Literal["dot", "margin"] = "dot",
    concept_bank: ConceptBank | None = None,
    seed: int | None = None,
    batch_size: int | None = None,
    progress: bool | None = None,
    train: TrainConfig | None = None,
) -> PostHocCBM:
    """Build a :class:`PostHocCBM` on a trained, frozen ``backbone`` (e.g. from :func:`~.backbone.train_backbone`).

    Embeds the training images once (the embedding cache), learns the CAVs
    (:func:`learn_cavs`, unless a ``concept_bank`` is given), and fits the sparse classifier
    on ``u`` (:func:`fit_sparse_classifier`). ``model.history`` holds the bank's
    per-concept SVM training accuracy and the classifier's training accuracy and sparsity.
    ``seed`` (default 0), ``batch_size`` (of the embedding, default 256), ``progress`` (default
    ``True``), or ``train``: a :class:`~.training.TrainConfig` instead of them (a knob given both
    ways is refused; nothing here trains by epochs, nor uses its ``lr``).
    """
    knobs = train_settings(train, seed=seed, batch_size=batch_size, progress=progress)
    seed, batch_size, progress = knobs.seed, knobs.batch_size or 256, knobs.progress
    images, concepts, labels, names, num_classes = training_tensors(train_tensors)
    embeddings = embed_images(backbone, images, batch_size)
    if concept_bank is None:
        concept_bank = learn_cavs(embeddings, concepts, n_pos, n_neg, C, seed, names, progress=progress)
    elif concept_bank.num_concepts != concepts.shape[1]:
        raise ValueError(f"concept_bank has {concept_bank.num_concepts} concepts, the data {concepts.shape[1]}")
    model = PostHocCBM(concepts.shape[1], num_classes, backbone.get_config(), list(names) or None, score)
    model.backbone.load_state_dict(backbone.state_dict())
    model.set_concept_bank(concept_bank)
    with torch.no_grad():
        u = model.concept_scores(embeddings)
        theta, bias = fit_sparse_classifier(u, labels, num_classes, lam, l1_ratio, solver, seed=seed)
        model.classifier.weight.copy_(theta.T)
        model.classifier.bias.copy_(bias)
        accuracy = float((model.classifier(u).argmax(1) == labels).float().mean())
    model.history = {
        "cav_train_accuracy": concept_bank.train_accuracy,
        "train_accuracy": accuracy,
        "sparsity": float((theta == 0).float().mean()),
    }
    return model.eval()
