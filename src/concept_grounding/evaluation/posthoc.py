"""Aysel et al.'s analysis of any post-hoc CBM: CGIM 1-3, concept existence, concept location.

A post-hoc CBM (Yuksekgonul et al.; :mod:`concept_grounding.models.posthoc`) is a backbone
``f`` with a spatial feature map ``E`` (pooled by global averaging into ``f(x)``), a concept
bank ``C`` (``L x d`` CAVs) and a linear classifier ``theta`` on ``u = C f(x)``. Bring it as

* the project's :class:`~concept_grounding.models.PostHocCBM` (e.g. a ``bench`` run's
  ``models/posthoc-cbm``), or
* the same class over your backbone, built by :func:`feature_map_posthoc_cbm` (any callable
  returning the ``(B, d, h, w)`` map, or a tuple / dict / dataclass holding it), your CAV
  matrix and your classifier (or none: fitted on the training split with
  :func:`~concept_grounding.models.fit_sparse_classifier`).

:func:`aysel_metrics` then computes, with the metric functions the bench uses,
CGIM types 1-3 (:func:`~concept_grounding.metrics.concept_global_importance`), concept
existence (:func:`~concept_grounding.metrics.concept_existence`) and concept location with
CoAM maps (:func:`~concept_grounding.models.coam.concept_activation_maps`,
:func:`~concept_grounding.metrics.concept_location`) on a split with per-image labels and
part locations (CUB's test split through :func:`~concept_grounding.loaders.load_cub`).
:func:`analyse_posthoc` does it from a CUB folder and writes the report.

The metrics on tensors live in :mod:`.posthoc_metrics`, the report folder in :mod:`.posthoc_report`;
their public names are importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from ..models.posthoc import PostHocCBM
from ..vocabulary import Vocabulary, load_vocabulary
from .adapters import pick_output
from .concepts import resolve_concept_names
from .posthoc_metrics import AyselResult, CavSweep, aysel_metrics, cav_sweep, fit_missing_parts, parts_at
from .posthoc_report import RANKING_LABELS, upsample_for, write_aysel_report

if TYPE_CHECKING:
    import datasets

__all__ = [
    "feature_map_posthoc_cbm",
    "imagenet_posthoc_cbm",
    "analyse_posthoc",
    "aysel_analysis",
    "AyselAnalysis",
    "aysel_metrics",
    "cav_sweep",
    "AyselResult",
    "CavSweep",
    "default_concept_columns",
    "train_default_posthoc",
    "parts_at",
    "fit_missing_parts",
    "write_aysel_report",
    "upsample_for",
    "RANKING_LABELS",
]


def feature_map_posthoc_cbm(
    backbone: Callable[[torch.Tensor], Any],
    concept_vectors: torch.Tensor | np.ndarray,
    concept_names: Sequence[str | int] | str,
    *,
    concept_intercepts: torch.Tensor | np.ndarray | None = None,
    theta: torch.Tensor | np.ndarray | None = None,
    bias: torch.Tensor | np.ndarray | None = None,
    features: str | int | None = None,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    resolve_names: bool = True,
) -> PostHocCBM:
    """A :class:`~concept_grounding.models.PostHocCBM` over a user's backbone (module docstring),
    through :class:`~concept_grounding.models.posthoc.FeatureMapBackbone`.

    Args:
        backbone: images ``(B, 3, H, W)`` (after ``mean`` / ``std``) -> feature map ``(B, d, h, w)``
            (or a structured output; ``features`` picks it, see :func:`~.adapters.pick_output`).
        concept_vectors: ``C`` ``(L, d)``; ``concept_intercepts`` ``(L,)`` the CAV SVMs' biases
            (concept probabilities are ``sigmoid(c_j . f + b_j)``; default 0).
        concept_names: the ``L`` concepts (see :func:`~.concepts.resolve_concept_names`; with
            ``resolve_names=False`` kept as given: concepts of your own, not CUB's).
        theta, bias: classifier ``logits = u @ theta + bias``, ``theta`` ``(L, K)``; set later
            with :meth:`~concept_grounding.models.PostHocCBM.set_classifier` when ``None``.
        mean, std: per-channel normalisation applied to [0, 1] images before ``backbone``.
    """
    from ..models.concept_bank import ConceptBank
    from ..models.posthoc import FeatureMapBackbone

    vectors = torch.as_tensor(np.asarray(concept_vectors), dtype=torch.float32)
    if vectors.ndim != 2:
        raise ValueError(f"concept_vectors must be (L, d), got {tuple(vectors.shape)}")
    names = list(resolve_concept_names(concept_names)) if resolve_names else [str(n) for n in concept_names]
    if len(names) != vectors.shape[0]:
        raise ValueError(f"{len(names)} concept_names for {vectors.shape[0]} concept vectors")
    intercepts = (
        torch.zeros(len(names))
        if concept_intercepts is None
        else torch.as_tensor(np.asarray(concept_intercepts), dtype=torch.float32)
    )
    if intercepts.shape != (len(names),):
        raise ValueError(f"concept_intercepts must be (L={len(names)},), got {tuple(intercepts.shape)}")
    pick = None if features is None else (lambda out: pick_output(out, features))
    trunk = FeatureMapBackbone(backbone, vectors.shape[1], pick=pick, mean=mean, std=std)
    model = PostHocCBM(len(names), 0, trunk, names)
    model.set_concept_bank(ConceptBank(vectors, intercepts, tuple(names)))
    if theta is not None:
        model.set_classifier(theta, bias)
    return model


# ------------------------------------------------------------------------ from CUB
def _concept_columns(model: nn.Module, vocab: Vocabulary) -> list[int]:
    names = getattr(model, "concept_names", None)
    if not names:
        raise ValueError(f"{type(model).__name__} does not record its concept_names")
    return vocab.attribute_indices(list(names))


def default_concept_columns(train: datasets.Dataset, vocab: Vocabulary) -> list[int]:
    """Koh et al.'s CBM-112 attributes (Aysel et al.'s concept set) that the training split
    has both with and without in its per-image labels (a CAV needs both); on the world, the
    ones it renders."""
    labels = np.asarray(train["attributes"], np.uint8)
    seen, missing = labels.any(axis=0), (labels == 0).any(axis=0)
    columns = [int(i) for i in vocab.cbm_112 if seen[i] and missing[i]]
    if not columns:
        raise ValueError("the training split has no CBM-112 attribute both present and absent: no CAV can be learned")
    return columns


def train_default_posthoc(
    train: datasets.Dataset,
    columns: Sequence[int],
    image_size: int,
    *,
    epochs: int = 8,
    n_pos: int = 100,
    n_neg: int = 100,
    C: float = 1.0,
    backbone: str | dict[str, Any] = "cnn",
    seed: int = 0,
    progress: bool = True,
) -> PostHocCBM:
    """A post-hoc CBM as Aysel et al. build theirs, for ``analyse`` without ``--model``: a
    backbone trained on the class labels (:func:`~concept_grounding.models.train_backbone`),
    then CAVs (paper: ``N_p = N_n = 100``, ``C = 1``) on the per-image labels of ``columns``
    and the sparse classifier (:func:`~concept_grounding.models.train_posthoc_cbm`)."""
    from ..models import to_tensors, train_backbone, train_posthoc_cbm

    tensors = to_tensors(train, list(columns), image_size, "image")
    net = train_backbone(tensors, backbone, epochs=epochs, seed=seed, progress=progress)
    return train_posthoc_cbm(net, tensors, n_pos=n_pos, n_neg=n_neg, C=C, seed=seed, progress=progress)


def imagenet_posthoc_cbm(
    classifier: Any,
    train: datasets.Dataset,
    columns: Sequence[int],
    concept_names: Sequence[str],
    image_size: int = 224,
    *,
    n_pos: int = 100,
    n_neg: int = 100,
    C: float = 1.0,
    seed: int = 0,
    batch_size: int = 64,
    progress: bool = True,
) -> PostHocCBM:
    """A post-hoc CBM on a trained ImageNet classifier's last feature map
    (:class:`~concept_grounding.models.imagenet.ImageNetClassifier`, e.g. EfficientNet-Lite0's
    ``(B, 1280, 7, 7)``), frozen: CAVs (:func:`~concept_grounding.models.concept_bank.learn_cavs`,
    paper ``N_p = N_n = 100``, ``C = 1``) on the pooled features of ``train`` with its
    ``attributes[:, columns]`` labels, inputs normalised as the classifier's, ``(x - 0.5) / 0.5``.
    The classifier on ``u`` is fitted later (:func:`fit_missing_parts`, in :func:`aysel_analysis`)."""
    from ..models.concept_bank import embed_images, learn_cavs
    from ..models.data import images_to_tensor
    from ..models.posthoc import FeatureMapBackbone

    half = (0.5, 0.5, 0.5)
    maps = classifier.feature_maps
    images = images_to_tensor(train["image"], image_size).to(classifier.device)
    dim = int(maps(torch.zeros(1, 3, image_size, image_size, device=classifier.device)).shape[1])
    pooled = embed_images(
        FeatureMapBackbone(maps, dim, mean=half, std=half).to(classifier.device), images, batch_size
    ).cpu()
    concepts = np.asarray(train["attributes"], np.uint8)[:, list(columns)]
    bank = learn_cavs(pooled, concepts, n_pos, n_neg, C, seed, tuple(concept_names), progress=progress)
    return feature_map_posthoc_cbm(
        maps,
        bank.vectors,
        list(concept_names),
        concept_intercepts=bank.intercepts,
        mean=half,
        std=half,
        resolve_names=False,
    )


@dataclass
class AyselAnalysis:
    """An :class:`AyselResult` with the test split it was computed on: what
    :func:`write_aysel_report` draws and tabulates.

    Attributes:
        result: the analyses.
        model: the analysed model (its ``theta`` draws the class-wise maps).
        images: ``(N, 3, S, S)`` test images in [0, 1]; labels: ``(N,)`` their classes.
        class_names: the split's class names; image_concepts: ``(N, L)`` per-image truth of the
            ``L`` concepts (the galleries' check / cross marks).
    """

    result: AyselResult
    model: nn.Module = field(repr=False)
    images: torch.Tensor = field(repr=False)
    labels: np.ndarray = field(repr=False)
    class_names: list[str] = field(repr=False)
    image_concepts: np.ndarray | None = field(default=None, repr=False)

    def write(self, out: str | Path, *, coam_threshold: float = 0.5, seed: int = 0) -> Path:
        """The report folder under ``out`` (:func:`write_aysel_report`); returns ``out``."""
        return write_aysel_report(
            self.result,
            self.model,
            self.images,
            self.labels,
            self.class_names,
            Path(out),
            image_concepts=self.image_concepts,
            coam_threshold=coam_threshold,
            seed=seed,
        )


def analyse_posthoc(
    model: nn.Module,
    cub: datasets.DatasetDict,
    out: str | Path | None = None,
    *,
    image_size: int = 224,
    max_images: int | None = None,
    batch_size: int = 64,
    vocab: Vocabulary | None = None,
    progress: bool = True,
    sweep: bool = False,
    sweep_Cs: Sequence[float] = (0.001, 0.01, 0.1, 1.0, 10.0),
    sweep_sizes: Sequence[int] = (50, 100),
    coam_threshold: float = 0.5,
    seed: int = 0,
) -> AyselResult:
    """Aysel et al.'s analysis of ``model`` on CUB's test split (``load_cub(root)``, or the
    world's :func:`~concept_grounding.world.dataset.world_dataset_dict`); with ``out``,
    writes ``results.json``, ``report.md`` (Tables 1-3 and 6-8), ``cgim_per_concept.csv``,
    ``cgim_per_class.csv``, ``cgim_histograms.png`` (Fig. 2), ``coam_gallery.png`` (Fig. 3),
    ``coam_class_maps.png`` (Fig. 4) and ``coam_binary.png`` (Algorithm 2's binary branch).

    A post-hoc CBM without a classifier gets one fitted on the train split first.
    ``max_images`` keeps the first test images only (a quick look). ``sweep`` (a
    :class:`~concept_grounding.models.PostHocCBM` only) adds Table 3 (:func:`cav_sweep`).
    The computation is :func:`aysel_analysis`; the report :meth:`AyselAnalysis.write`.
    """
    analysis = aysel_analysis(
        model,
        cub,
        image_size=image_size,
        max_images=max_images,
        batch_size=batch_size,
        vocab=vocab,
        progress=progress,
        sweep=sweep,
        sweep_Cs=sweep_Cs,
        sweep_sizes=sweep_sizes,
        seed=seed,
    )
    if out is not None:
        analysis.write(out, coam_threshold=coam_threshold, seed=seed)
    return analysis.result


def aysel_analysis(
    model: nn.Module,
    cub: datasets.DatasetDict,
    *,
    image_size: int = 224,
    max_images: int | None = None,
    batch_size: int = 64,
    vocab: Vocabulary | None = None,
    progress: bool = True,
    sweep: bool = False,
    sweep_Cs: Sequence[float] = (0.001, 0.01, 0.1, 1.0, 10.0),
    sweep_sizes: Sequence[int] = (50, 100),
    seed: int = 0,
    concept_columns: Sequence[int] | None = None,
    concept_parts: Sequence[Sequence[int | str]] | None = None,
) -> AyselAnalysis:
    """The computation of :func:`analyse_posthoc` (same arguments, nothing written): the
    analyses with the test images, labels, class names and per-image concepts the report needs.

    ``concept_columns``: the model's concepts' columns in the splits' ``attributes`` (default: by
    name in ``vocab``); ``concept_parts``: see :func:`aysel_metrics` (e.g. the photos' concepts,
    :mod:`concept_grounding.photos.concepts`, which are no CUB attributes)."""
    from ..models.data import images_to_tensor

    columns = (
        list(concept_columns) if concept_columns is not None else _concept_columns(model, vocab or load_vocabulary())
    )
    if isinstance(model, PostHocCBM):
        fit_missing_parts(model, cub["train"], image_size, batch_size=batch_size, progress=progress)
    elif sweep:
        raise ValueError(f"the Table 3 sweep relearns the CAVs of a PostHocCBM; got a {type(model).__name__}")
    test = cub["test"]
    if max_images is not None:
        test = test.select(range(min(int(max_images), len(test))))
    images = images_to_tensor(test["image"], image_size)
    part_xy, visible = parts_at(test, image_size)
    class_concepts = np.zeros((len(test.features["label"].names), len(columns)), np.uint8)
    class_concepts[np.asarray(test["label"])] = np.asarray(test["class_attributes"], np.uint8)[:, columns]
    train_rows = cub["train"]
    class_concepts[np.asarray(train_rows["label"])] = np.asarray(train_rows["class_attributes"], np.uint8)[:, columns]
    image_concepts = np.asarray(test["attributes"], np.uint8)[:, columns]
    result = aysel_metrics(
        model,
        images,
        np.asarray(test["label"]),
        image_concepts,
        class_concepts,
        part_xy,
        visible,
        batch_size=batch_size,
        concept_parts=concept_parts,
    )
    if sweep:
        result.sweep = cav_sweep(
            model,
            images_to_tensor(train_rows["image"], image_size),
            np.asarray(train_rows["attributes"], np.uint8)[:, columns],
            np.asarray(train_rows["label"]),
            images,
            np.asarray(test["label"]),
            len(test.features["label"].names),
            Cs=sweep_Cs,
            sizes=sweep_sizes,
            seed=seed,
            batch_size=batch_size,
            progress=progress,
        )
    return AyselAnalysis(
        result, model, images, np.asarray(test["label"]), list(test.features["label"].names), image_concepts
    )
