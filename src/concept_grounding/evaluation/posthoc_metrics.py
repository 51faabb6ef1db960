"""Aysel et al.'s metrics of a post-hoc CBM on tensors: CGIM 1-3, concept existence, concept
location (:func:`aysel_metrics`), the Table 3 sweep over the CAV SVMs (:func:`cav_sweep`), and
the classifier fitted when a model comes without one (:func:`fit_missing_parts`).

The model and data entry points are :mod:`.posthoc`; the report is :mod:`.posthoc_report`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from ..models.posthoc import PostHocCBM

if TYPE_CHECKING:
    import datasets

__all__ = ["parts_at", "AyselResult", "CavSweep", "aysel_metrics", "cav_sweep", "fit_missing_parts"]


@torch.no_grad()
def _outputs(model: nn.Module, images: torch.Tensor, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Concept scores ``u`` ``(N, L)`` and class logits ``(N, K)`` in eval mode, batched, on
    the model's device (a user's backbone may hold no parameter the wrapper knows of)."""
    from .adapters import model_device

    was = model.training
    model.eval()
    device = model_device(model)
    try:
        outs = [model(images[i : i + batch_size].to(device)) for i in range(0, len(images), batch_size)]
    finally:
        model.train(was)
    return (
        torch.cat([o.concept_scores.cpu() for o in outs]).numpy(),
        torch.cat([o.class_logits.cpu() for o in outs]).numpy(),
    )


def parts_at(split: datasets.Dataset, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Part centres ``(N, P, 2)`` rescaled from each image's own size to ``size x size`` px,
    and visibility ``(N, P)``.

    Pixel centres sit at integer coordinates (the convention of
    :func:`~concept_grounding.metrics.concept_location.centre_pixels`), so a resize by
    ``s = size / W`` maps ``x`` to ``(x + 1/2) * s - 1/2``; an image already at ``size`` keeps
    its centres exactly.

    >>> from PIL import Image
    >>> split = {"part_xy": [[[0.0, 63.0]], [[1.0, 2.0]]], "part_visible": [[True], [True]],
    ...          "image": [Image.new("RGB", (64, 64)), Image.new("RGB", (4, 4))]}
    >>> parts_at(split, 4)[0].tolist()   # pixel 63 of 64 lies in pixel 3 of 4 (nearest centre); 4 px keep theirs
    [[[-0.46875, 3.46875]], [[1.0, 2.0]]]
    """
    xy = np.asarray(split["part_xy"], np.float32)
    sizes = np.array([im.size for im in split["image"]], np.float32)  # (N, 2) as (W, H)
    scale = (size / sizes)[:, None, :]
    return np.where(scale == 1, xy, (xy + 0.5) * scale - 0.5), np.asarray(split["part_visible"], bool)


@dataclass
class AyselResult:
    """Aysel et al.'s three analyses of one post-hoc CBM on one split.

    Attributes:
        cgim: :func:`~concept_grounding.metrics.concept_global_importance`'s dict (types 1-3,
            per concept and per class).
        existence: :func:`~concept_grounding.metrics.concept_existence`'s dict (``existence@l``).
        location: :func:`~concept_grounding.metrics.concept_location`'s dict (``location@l_alpha{a}``).
        class_accuracy: the classifier's accuracy on the split.
        concept_names: the ``L`` concepts; maps: CoAM ``(N, L, h, w)`` on the feature grid.
    """

    cgim: dict[str, Any]
    existence: dict[str, Any]
    location: dict[str, Any]
    class_accuracy: float
    concept_names: list[str]
    maps: np.ndarray = field(repr=False)
    existence_by_ranking: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    location_by_ranking: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    predictions: np.ndarray | None = field(default=None, repr=False)
    sweep: CavSweep | None = None

    def summary(self) -> dict[str, Any]:
        """Every scalar of the analyses (JSON-ready): Tables 1-2 for every ranking
        (``existence_by_ranking`` / ``location_by_ranking``), Table 3 (``sweep``) when run."""
        pick = lambda d: {k: v for k, v in d.items() if np.ndim(v) == 0}  # noqa: E731
        out = {
            "class_accuracy": self.class_accuracy,
            "cgim": pick(self.cgim),
            "existence": pick(self.existence),
            "location": pick(self.location),
            "concept_names": self.concept_names,
            "existence_by_ranking": {r: pick(d) for r, d in self.existence_by_ranking.items()},
            "location_by_ranking": {r: pick(d) for r, d in self.location_by_ranking.items()},
        }
        if self.sweep is not None:
            out["sweep"] = self.sweep.summary()
        return out


@dataclass
class CavSweep:
    """Aysel et al.'s Table 3: test accuracy of the post-hoc CBM rebuilt with each SVM
    regularisation ``C`` (the paper's lambda) and each ``N_p = N_n``, and of the model
    without a bottleneck.

    Attributes:
        rows: one dict per setting: ``C``, ``n``, ``accuracy`` (test), ``train_accuracy``.
        no_bottleneck_accuracy: test accuracy of a linear classifier on ``f(X)`` itself
            (the same elastic-net fit, :func:`~concept_grounding.models.fit_sparse_classifier`,
            on the pooled embeddings instead of ``u``; *decision*: the paper's "traditional
            model" is its backbone's own head, which a frozen, headless ``f`` does not keep).
    """

    rows: list[dict[str, float]]
    no_bottleneck_accuracy: float

    def summary(self) -> dict[str, Any]:
        return {"rows": self.rows, "no_bottleneck_accuracy": self.no_bottleneck_accuracy}

    def accuracy(self, C: float, n: int) -> float:
        """The test accuracy of one setting (``KeyError`` if it was not run)."""
        for row in self.rows:
            if row["C"] == C and row["n"] == n:
                return row["accuracy"]
        raise KeyError(f"no sweep row for C={C}, N_p=N_n={n}")


@torch.no_grad()
def aysel_metrics(
    model: nn.Module,
    images: torch.Tensor,
    labels: np.ndarray,
    image_concepts: np.ndarray,
    class_concepts: np.ndarray,
    part_xy: np.ndarray,
    part_visible: np.ndarray,
    *,
    batch_size: int = 64,
    rankings: Sequence[str] = ("theta_u", "theta", "u"),
    concept_parts: Sequence[Sequence[int | str]] | None = None,
) -> AyselResult:
    """CGIM 1-3, concept existence and concept location of a post-hoc CBM (module docstring),
    the last two for every ranking of Aysel et al.'s Tables 1-2 (``theta_u`` = theta x u-hat,
    ``theta``, ``u`` = u-hat), each on all images and on the correctly classified ones.

    Args:
        model: a :class:`~concept_grounding.models.PostHocCBM` (or any model with
            ``theta``, ``concept_names``, ``forward`` -> ``ConceptModelOutput``,
            ``concept_activation_maps``).
        images: ``(N, 3, S, S)`` in [0, 1]; labels ``(N,)`` class indices.
        image_concepts: ``(N, L)`` per-image 0/1 labels of the model's concepts (existence).
        class_concepts: ``(K, L)`` class-level 0/1 labels (CGIM's ``V`` is its transpose).
        part_xy, part_visible: ``(N, P, 2)`` part centres in pixels of the ``S x S`` image, ``(N, P)``.
        rankings: which local-importance rankings to score (``existence`` and ``location``
            of the result hold the first; ``*_by_ranking`` all of them).
        concept_parts: per concept, the parts it lives on (default: from the concept names, CUB's
            vocabulary; see :func:`~concept_grounding.metrics.concept_location.concept_part_table`).
    """
    from ..metrics import concept_existence, concept_global_importance, concept_location

    u, class_logits = _outputs(model, images, batch_size)
    predicted = class_logits.argmax(1)
    labels = np.asarray(labels)
    theta = model.theta.cpu().numpy()
    names = list(model.concept_names)
    top_l = tuple(l for l in (1, 3, 5) if l <= theta.shape[0])  # the paper's l, as far as L allows
    cgim = concept_global_importance(theta, np.asarray(class_concepts, float).T, u, predicted, labels)
    rankings = list(rankings)
    if not rankings:
        raise ValueError("rankings must name at least one of 'theta_u', 'theta', 'u'")
    existence_by = {
        r: concept_existence(theta, u, predicted, np.asarray(image_concepts), labels, top_l=top_l, ranking=r)
        for r in rankings
    }
    was = model.training
    model.eval()
    try:
        maps = torch.cat(
            [
                model.concept_activation_maps(images[i : i + batch_size], upsample=False).cpu()
                for i in range(0, len(images), batch_size)
            ]
        ).numpy()
    finally:
        model.train(was)
    size = images.shape[-1]
    location_by = {
        r: concept_location(
            maps,
            part_xy,
            part_visible,
            theta=theta,
            concept_scores=u,
            predictions=predicted,
            references=labels,
            **({"concept_names": names} if concept_parts is None else {"concept_parts": concept_parts}),
            image_size=(size, size),
            top_l=top_l,
            ranking=r,
        )
        for r in rankings
    }
    first = rankings[0]
    return AyselResult(
        cgim,
        existence_by[first],
        location_by[first],
        float((predicted == labels).mean()),
        names,
        maps,
        existence_by,
        location_by,
        predicted,
    )


def cav_sweep(
    model: PostHocCBM,
    train_images: torch.Tensor,
    train_concepts: np.ndarray,
    train_labels: np.ndarray,
    test_images: torch.Tensor,
    test_labels: np.ndarray,
    num_classes: int,
    *,
    Cs: Sequence[float] = (0.001, 0.01, 0.1, 1.0, 10.0),
    sizes: Sequence[int] = (50, 100),
    seed: int = 0,
    batch_size: int = 64,
    progress: bool = True,
) -> CavSweep:
    """Aysel et al.'s Table 3 on ``model``'s frozen backbone: for each SVM ``C`` (their lambda)
    and each ``N_p = N_n`` in ``sizes``, learn the CAVs on the training split
    (:func:`~concept_grounding.models.concept_bank.learn_cavs`), fit the sparse classifier on
    ``u`` (:func:`~concept_grounding.models.fit_sparse_classifier`, the model's own
    ``"dot"`` / ``"margin"`` score) and score the test split; plus the no-bottleneck baseline
    (:class:`CavSweep`). The backbone embeds each split once.

    Args:
        train_images, test_images: ``(N, 3, S, S)`` in [0, 1]; train_concepts ``(N, L)`` per-image
            0/1 labels of the model's concepts; train_labels, test_labels class indices.
    """
    from tqdm.auto import tqdm

    from ..models.concept_bank import bank_scores, embed_images, learn_cavs
    from ..models.posthoc import fit_sparse_classifier

    if not Cs or not sizes or min(Cs) <= 0 or min(sizes) < 1:
        raise ValueError(f"the sweep needs C > 0 and N_p = N_n >= 1, got C {list(Cs)} and N {list(sizes)}")
    from .adapters import model_device

    device = model_device(model)
    was = model.training
    model.eval()
    try:
        f_train = embed_images(model.backbone, train_images.to(device), batch_size).cpu()
        f_test = embed_images(model.backbone, test_images.to(device), batch_size).cpu()
    finally:
        model.train(was)
    y_train = torch.as_tensor(np.asarray(train_labels), dtype=torch.long)
    y_test = np.asarray(test_labels)
    names = tuple(model.concept_names or ())

    def accuracy(theta: torch.Tensor, bias: torch.Tensor, x: torch.Tensor, y: np.ndarray) -> float:
        return float(((x @ theta + bias).argmax(1).numpy() == y).mean())

    rows = []
    settings = [(float(c), int(n)) for n in sizes for c in Cs]
    for C, n in tqdm(settings, desc="Table 3 sweep", disable=not progress, leave=False):
        import warnings

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*no CAV.*")
            bank = learn_cavs(f_train, train_concepts, n, n, C, seed, names, progress=False)
        u_train = bank_scores(f_train, bank.vectors, bank.intercepts, model.score)
        u_test = bank_scores(f_test, bank.vectors, bank.intercepts, model.score)
        theta, bias = fit_sparse_classifier(u_train, y_train, num_classes, seed=seed)
        rows.append(
            {
                "C": C,
                "n": n,
                "accuracy": accuracy(theta, bias, u_test, y_test),
                "train_accuracy": accuracy(theta, bias, u_train, y_train.numpy()),
            }
        )
    theta, bias = fit_sparse_classifier(f_train, y_train, num_classes, seed=seed)
    return CavSweep(rows, accuracy(theta, bias, f_test, y_test))


def fit_missing_parts(
    model: PostHocCBM,
    train: datasets.Dataset,
    image_size: int,
    *,
    seed: int = 0,
    batch_size: int = 64,
    progress: bool = True,
) -> PostHocCBM:
    """Fit the classifier of a :class:`~concept_grounding.models.PostHocCBM` that has none, on the training split
    (elastic net, :func:`~concept_grounding.models.fit_sparse_classifier`)."""
    from ..models import fit_sparse_classifier
    from ..models.data import images_to_tensor

    if model.classifier is not None:
        return model
    labels = torch.as_tensor(np.asarray(train["label"]), dtype=torch.long)
    u = torch.from_numpy(_outputs(model, images_to_tensor(train["image"], image_size), batch_size)[0])
    theta, bias = fit_sparse_classifier(u, labels, len(train.features["label"].names), seed=seed)
    model.set_classifier(theta, bias)
    return model
