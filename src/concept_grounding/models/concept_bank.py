"""Concept banks: CAVs learnt by linear SVMs on backbone embeddings, and the concept scores
they give (post-hoc CBM steps 2-3 in :mod:`.posthoc`; docs/concept_metrics.md)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

__all__ = ["ConceptBank", "learn_cavs", "embed_images", "bank_scores"]


@dataclass
class ConceptBank:
    """``L`` CAVs: ``vectors`` ``(L, d)``, SVM ``intercepts`` ``(L,)``, ``names``, and each SVM's
    training accuracy ``train_accuracy`` ``(L,)`` (NaN where a concept had no positives or
    negatives and got a zero vector). Saved as one safetensors file, names in its metadata."""

    vectors: torch.Tensor
    intercepts: torch.Tensor
    names: tuple[str, ...] = ()
    train_accuracy: torch.Tensor | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2:
            raise ValueError(f"vectors must be (L, d), got {tuple(self.vectors.shape)}")
        if self.intercepts.shape != (self.vectors.shape[0],):
            raise ValueError(f"intercepts must be (L={self.vectors.shape[0]},), got {tuple(self.intercepts.shape)}")
        if self.names and len(self.names) != self.vectors.shape[0]:
            raise ValueError(f"{len(self.names)} names for {self.vectors.shape[0]} concept vectors")
        if self.train_accuracy is None:
            self.train_accuracy = torch.full((self.vectors.shape[0],), float("nan"))

    @property
    def num_concepts(self) -> int:
        return int(self.vectors.shape[0])

    def scores(self, embeddings: torch.Tensor) -> torch.Tensor:
        """``u = C f(X)``: embeddings ``(N, d)`` -> ``(N, L)``."""
        return embeddings @ self.vectors.T.to(embeddings.dtype)

    def save(self, path: str | Path) -> Path:
        """Write a ``.safetensors`` file (tensors + JSON metadata; never pickle)."""
        from safetensors.torch import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {
            "format": "concept-grounding/concept-bank",
            "names": json.dumps(list(self.names)),
            "metadata": json.dumps(self.metadata),
        }
        save_file(
            {
                "vectors": self.vectors.contiguous(),
                "intercepts": self.intercepts.contiguous(),
                "train_accuracy": self.train_accuracy.contiguous(),
            },
            str(path),
            metadata=meta,
        )
        return path

    @classmethod
    def load(cls, path: str | Path) -> ConceptBank:
        """Read a file written by :meth:`save`."""
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            if meta.get("format") != "concept-grounding/concept-bank":
                raise ValueError(f"{path} is not a concept bank written by ConceptBank.save")
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
        return cls(
            tensors["vectors"],
            tensors["intercepts"],
            tuple(json.loads(meta["names"])),
            tensors["train_accuracy"],
            json.loads(meta.get("metadata", "{}")),
        )


def learn_cavs(
    embeddings: torch.Tensor | np.ndarray,
    concepts: torch.Tensor | np.ndarray,
    n_pos: int = 100,
    n_neg: int = 100,
    C: float = 1.0,
    seed: int = 0,
    concept_names: Sequence[str] = (),
    max_iter: int = 10000,
    progress: bool = True,
) -> ConceptBank:
    """One linear-SVM CAV per concept (Kim et al. 2018; Aysel et al. Sec. 3).

    Args:
        embeddings: ``(N, d)`` backbone embeddings ``f(X)``.
        concepts: ``(N, L)`` concept labels; > 0.5 counts as present.
        n_pos, n_neg: ``N_p`` positives and ``N_n`` negatives drawn at random (all of
            them when fewer exist).
        C: the SVM's regularisation parameter (``sklearn.svm.LinearSVC(C=C)``).
        seed: seeds the sampling and the solver.

    Returns:
        :class:`ConceptBank` with ``vectors = coef_`` and ``intercepts = intercept_``. A concept
        with no positive or no negative example gets a zero vector, an intercept of -1 / +1
        (always absent / present) and a warning.
    """
    from sklearn.svm import LinearSVC
    from tqdm.auto import tqdm

    x = np.asarray(embeddings.detach().cpu() if isinstance(embeddings, torch.Tensor) else embeddings, dtype=np.float64)
    y = np.asarray(concepts.detach().cpu() if isinstance(concepts, torch.Tensor) else concepts) > 0.5
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"embeddings (N, d) and concepts (N, L) must share N, got {x.shape} and {y.shape}")
    if n_pos < 1 or n_neg < 1 or C <= 0:
        raise ValueError(f"need n_pos >= 1, n_neg >= 1 and C > 0, got {n_pos}, {n_neg}, {C}")
    rng = np.random.default_rng(seed)
    L, d = y.shape[1], x.shape[1]
    vectors, intercepts, accuracy = np.zeros((L, d)), np.zeros(L), np.full(L, np.nan)
    skipped: list = []
    for j in tqdm(range(L), desc="CAVs", disable=not progress, leave=False):
        pos, neg = np.flatnonzero(y[:, j]), np.flatnonzero(~y[:, j])
        if len(pos) == 0 or len(neg) == 0:
            skipped.append(concept_names[j] if concept_names else j)
            intercepts[j] = -1.0 if len(pos) == 0 else 1.0
            continue
        pos = rng.choice(pos, min(n_pos, len(pos)), replace=False)
        neg = rng.choice(neg, min(n_neg, len(neg)), replace=False)
        xs = np.concatenate([x[pos], x[neg]])
        ys = np.concatenate([np.ones(len(pos)), np.zeros(len(neg))])
        svm = LinearSVC(C=C, max_iter=max_iter, random_state=seed)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*converge.*")
            svm.fit(xs, ys)
        vectors[j], intercepts[j], accuracy[j] = svm.coef_[0], svm.intercept_[0], svm.score(xs, ys)
    if skipped:
        warnings.warn(
            f"{len(skipped)} concept(s) have no positive or no negative image, so no CAV "
            f"(zero vector): {skipped[:5]}{' ...' if len(skipped) > 5 else ''}",
            stacklevel=2,
        )
    meta = {"n_pos": int(n_pos), "n_neg": int(n_neg), "C": float(C), "seed": int(seed)}
    return ConceptBank(
        torch.tensor(vectors, dtype=torch.float32),
        torch.tensor(intercepts, dtype=torch.float32),
        tuple(concept_names),
        torch.tensor(accuracy, dtype=torch.float32),
        meta,
    )


@torch.no_grad()
def embed_images(backbone: nn.Module, images: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """Pooled embeddings ``(N, d)`` of images ``(N, 3, H, W)`` (eval mode, no grad)."""
    was = backbone.training
    backbone.eval()
    try:
        return torch.cat([backbone(images[i : i + batch_size]).pooled for i in range(0, len(images), batch_size)])
    finally:
        backbone.train(was)


def bank_scores(
    pooled: torch.Tensor, vectors: torch.Tensor, intercepts: torch.Tensor, score: Literal["dot", "margin"] = "dot"
) -> torch.Tensor:
    """Concept scores ``u`` ``(B, L)`` of pooled embeddings ``(B, d)`` under CAVs ``(L, d)``:
    ``"dot"`` ``u = C f(X)`` (Aysel et al. Sec. 3), ``"margin"`` ``(C f(X) + b) / ||c_j||``."""
    u = pooled @ vectors.T.to(pooled.dtype)
    if score == "margin":
        u = (u + intercepts.to(pooled.dtype)) / vectors.norm(dim=1).clamp_min(1e-12).to(pooled.dtype)
    return u
