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

if TYPE_CHECKING:
    import datasets

__all__ = ["feature_map_posthoc_cbm", "analyse_posthoc", "aysel_analysis", "AyselAnalysis", "aysel_metrics",
           "cav_sweep", "AyselResult", "CavSweep", "default_concept_columns", "train_default_posthoc"]


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
) -> PostHocCBM:
    """A :class:`~concept_grounding.models.PostHocCBM` over a user's backbone (module docstring),
    through :class:`~concept_grounding.models.posthoc.FeatureMapBackbone`.

    Args:
        backbone: images ``(B, 3, H, W)`` (after ``mean`` / ``std``) -> feature map ``(B, d, h, w)``
            (or a structured output; ``features`` picks it, see :func:`~.adapters.pick_output`).
        concept_vectors: ``C`` ``(L, d)``; ``concept_intercepts`` ``(L,)`` the CAV SVMs' biases
            (concept probabilities are ``sigmoid(c_j . f + b_j)``; default 0).
        concept_names: the ``L`` concepts (see :func:`~.concepts.resolve_concept_names`).
        theta, bias: classifier ``logits = u @ theta + bias``, ``theta`` ``(L, K)``; set later
            with :meth:`~concept_grounding.models.PostHocCBM.set_classifier` when ``None``.
        mean, std: per-channel normalisation applied to [0, 1] images before ``backbone``.
    """
    from ..models.posthoc import ConceptBank, FeatureMapBackbone

    vectors = torch.as_tensor(np.asarray(concept_vectors), dtype=torch.float32)
    if vectors.ndim != 2:
        raise ValueError(f"concept_vectors must be (L, d), got {tuple(vectors.shape)}")
    names = list(resolve_concept_names(concept_names))
    if len(names) != vectors.shape[0]:
        raise ValueError(f"{len(names)} concept_names for {vectors.shape[0]} concept vectors")
    intercepts = torch.zeros(len(names)) if concept_intercepts is None else \
        torch.as_tensor(np.asarray(concept_intercepts), dtype=torch.float32)
    if intercepts.shape != (len(names),):
        raise ValueError(f"concept_intercepts must be (L={len(names)},), got {tuple(intercepts.shape)}")
    pick = None if features is None else (lambda out: pick_output(out, features))
    trunk = FeatureMapBackbone(backbone, vectors.shape[1], pick=pick, mean=mean, std=std)
    model = PostHocCBM(len(names), 0, trunk, names)
    model.set_concept_bank(ConceptBank(vectors, intercepts, tuple(names)))
    if theta is not None:
        model.set_classifier(theta, bias)
    return model


# ------------------------------------------------------------------------ metrics
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
    return (torch.cat([o.concept_scores.cpu() for o in outs]).numpy(),
            torch.cat([o.class_logits.cpu() for o in outs]).numpy())


def parts_at(split: "datasets.Dataset", size: int) -> tuple[np.ndarray, np.ndarray]:
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
    sweep: "CavSweep | None" = None

    def summary(self) -> dict[str, Any]:
        """Every scalar of the analyses (JSON-ready): Tables 1-2 for every ranking
        (``existence_by_ranking`` / ``location_by_ranking``), Table 3 (``sweep``) when run."""
        pick = lambda d: {k: v for k, v in d.items() if np.ndim(v) == 0}  # noqa: E731
        out = {"class_accuracy": self.class_accuracy, "cgim": pick(self.cgim), "existence": pick(self.existence),
               "location": pick(self.location), "concept_names": self.concept_names,
               "existence_by_ranking": {r: pick(d) for r, d in self.existence_by_ranking.items()},
               "location_by_ranking": {r: pick(d) for r, d in self.location_by_ranking.items()}}
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
    existence_by = {r: concept_existence(theta, u, predicted, np.asarray(image_concepts), labels, top_l=top_l,
                                         ranking=r) for r in rankings}
    was = model.training
    model.eval()
    try:
        maps = torch.cat([model.concept_activation_maps(images[i : i + batch_size], upsample=False).cpu()
                          for i in range(0, len(images), batch_size)]).numpy()
    finally:
        model.train(was)
    size = images.shape[-1]
    location_by = {r: concept_location(maps, part_xy, part_visible, theta=theta, concept_scores=u,
                                       predictions=predicted, references=labels, concept_names=names,
                                       image_size=(size, size), top_l=top_l, ranking=r) for r in rankings}
    first = rankings[0]
    return AyselResult(cgim, existence_by[first], location_by[first], float((predicted == labels).mean()), names, maps,
                       existence_by, location_by, predicted)


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
    (:func:`~concept_grounding.models.posthoc.learn_cavs`), fit the sparse classifier on
    ``u`` (:func:`~concept_grounding.models.fit_sparse_classifier`, the model's own
    ``"dot"`` / ``"margin"`` score) and score the test split; plus the no-bottleneck baseline
    (:class:`CavSweep`). The backbone embeds each split once.

    Args:
        train_images, test_images: ``(N, 3, S, S)`` in [0, 1]; train_concepts ``(N, L)`` per-image
            0/1 labels of the model's concepts; train_labels, test_labels class indices.
    """
    from tqdm.auto import tqdm

    from ..models.posthoc import bank_scores, embed_images, fit_sparse_classifier, learn_cavs

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
        rows.append({"C": C, "n": n, "accuracy": accuracy(theta, bias, u_test, y_test),
                     "train_accuracy": accuracy(theta, bias, u_train, y_train.numpy())})
    theta, bias = fit_sparse_classifier(f_train, y_train, num_classes, seed=seed)
    return CavSweep(rows, accuracy(theta, bias, f_test, y_test))


# ------------------------------------------------------------------------ from CUB
def _concept_columns(model: nn.Module, vocab: Vocabulary) -> list[int]:
    names = getattr(model, "concept_names", None)
    if not names:
        raise ValueError(f"{type(model).__name__} does not record its concept_names")
    return vocab.attribute_indices(list(names))


def fit_missing_parts(model: PostHocCBM, train: "datasets.Dataset", image_size: int, *, seed: int = 0,
                      batch_size: int = 64, progress: bool = True) -> PostHocCBM:
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


def default_concept_columns(train: "datasets.Dataset", vocab: Vocabulary) -> list[int]:
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
    train: "datasets.Dataset",
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
        return write_aysel_report(self.result, self.model, self.images, self.labels, self.class_names, Path(out),
                                  image_concepts=self.image_concepts, coam_threshold=coam_threshold, seed=seed)


def analyse_posthoc(
    model: nn.Module,
    cub: "datasets.DatasetDict",
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
    analysis = aysel_analysis(model, cub, image_size=image_size, max_images=max_images, batch_size=batch_size,
                              vocab=vocab, progress=progress, sweep=sweep, sweep_Cs=sweep_Cs, sweep_sizes=sweep_sizes,
                              seed=seed)
    if out is not None:
        analysis.write(out, coam_threshold=coam_threshold, seed=seed)
    return analysis.result


def aysel_analysis(
    model: nn.Module,
    cub: "datasets.DatasetDict",
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
) -> AyselAnalysis:
    """The computation of :func:`analyse_posthoc` (same arguments, nothing written): the
    analyses with the test images, labels, class names and per-image concepts the report needs."""
    from ..models.data import images_to_tensor

    vocab = vocab or load_vocabulary()
    columns = _concept_columns(model, vocab)
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
    result = aysel_metrics(model, images, np.asarray(test["label"]), image_concepts,
                           class_concepts, part_xy, visible, batch_size=batch_size)
    if sweep:
        result.sweep = cav_sweep(model, images_to_tensor(train_rows["image"], image_size),
                                 np.asarray(train_rows["attributes"], np.uint8)[:, columns],
                                 np.asarray(train_rows["label"]), images, np.asarray(test["label"]),
                                 len(test.features["label"].names), Cs=sweep_Cs, sizes=sweep_sizes, seed=seed,
                                 batch_size=batch_size, progress=progress)
    return AyselAnalysis(result, model, images, np.asarray(test["label"]), list(test.features["label"].names),
                         image_concepts)


#: Tables 1-2's ranking rows: key of :func:`~concept_grounding.metrics.concept_existence` -> the paper's label.
RANKING_LABELS = {"theta": "theta_jk", "u": "u-hat_ij", "theta_u": "theta_jk x u-hat_ij"}


def _table1(result: AyselResult) -> str:
    from ..fileio import markdown_table
    from .report import score_cells

    rows = [{"name": f"{subset} / {RANKING_LABELS[r]}", **{f"l{l}": ex.get(f"existence@{l}{suffix}") for l in (1, 3, 5)}}
            for subset, suffix in (("entire test set", ""), ("correct class set", "_correct"))
            for r, ex in result.existence_by_ranking.items()]
    return markdown_table(*score_cells(rows, [(f"l{l}", f"l = {l}") for l in (1, 3, 5)],
                                       first=("name", "images / CEM based on")))


def _table2(result: AyselResult) -> str:
    from ..fileio import markdown_table
    from .report import score_cells

    rows = [{"name": f"{subset}, alpha = {a} / {RANKING_LABELS[r]}",
             **{f"l{l}": loc.get(f"location@{l}_alpha{a}{suffix}") for l in (1, 3, 5)}}
            for subset, suffix in (("entire test set", ""), ("correct class set", "_correct")) for a in (1, 3, 6)
            for r, loc in result.location_by_ranking.items()]
    return markdown_table(*score_cells(rows, [(f"l{l}", f"l = {l}") for l in (1, 3, 5)],
                                       first=("name", "images, region / CLM based on")))


def _table3(sweep: CavSweep) -> str:
    from ..fileio import markdown_table
    from .report import percent

    Cs = sorted({row["C"] for row in sweep.rows})
    ns = sorted({row["n"] for row in sweep.rows})
    rows = [[f"{c:g}", *(percent(sweep.accuracy(c, n)) for n in ns)] for c in Cs]
    rows.append(["model w/o bottleneck (linear on f(X))", percent(sweep.no_bottleneck_accuracy)])
    return markdown_table(["lambda (SVM C) \\ N_p = N_n", *ns], rows)


def _cgim_lists(result: AyselResult, class_names: list[str], out: Path) -> tuple[str, str]:
    """Tables 6 (per concept) and 7-8 (per class) as CSV files and Markdown."""
    import csv

    from ..fileio import markdown_table
    from .report import score_cells

    cg = result.cgim
    tables = []
    for level, names, fname in (("concept", result.concept_names, "cgim_per_concept.csv"),
                                ("class", class_names, "cgim_per_class.csv")):
        scores = [np.asarray(cg[f"per_{level}_type{t}"], float) for t in (1, 2, 3)]
        rows = [{"name": f"{i + 1}: {name}", **{f"t{t}": float(scores[t - 1][i]) for t in (1, 2, 3)}}
                for i, name in enumerate(names)]
        with (out / fname).open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow([level, "cgim_type1", "cgim_type2", "cgim_type3"])
            writer.writerows([[name, *(f"{sc[i]:.6g}" for sc in scores)] for i, name in enumerate(names)])
        tables.append(markdown_table(*score_cells(rows, [("t1", "rho type 1"), ("t2", "rho type 2"),
                                                         ("t3", "rho type 3")], first=("name", level), fractions=False)))
    return tables[0], tables[1]


def write_aysel_report(result: AyselResult, model: nn.Module, images: torch.Tensor, labels: np.ndarray,
                       class_names: list[str], out: Path, *, image_concepts: np.ndarray | None = None,
                       coam_threshold: float = 0.5, seed: int = 0, gallery_images: int = 6) -> Path:
    """The report folder of :func:`analyse_posthoc` (every table of Aysel et al. the data allows).

    Fig. 3: ``gallery_images`` test images drawn at random (``seed``), their top-5 concepts
    by theta x u-hat with check / cross marks from ``image_concepts`` ``(N, L)``. Fig. 4:
    correctly classified images, their top-4 concepts and the class-wise map
    (:func:`~concept_grounding.models.coam.class_activation_maps`). Algorithm 2's binary
    branch (:func:`~concept_grounding.models.coam.coam_overlays`) on the Fig. 4 concepts.
    """
    from ..models.coam import class_activation_maps, coam_overlays, save_coam_gallery
    from ..plotting import cgim_histograms
    from ..fileio import markdown_table, write_report
    from .report import percent, score_cells

    out.mkdir(parents=True, exist_ok=True)
    cgim_histograms(result.cgim, out / "cgim_histograms.png", title=type(model).__name__)
    short = lambda j: result.concept_names[j].removeprefix("has_")  # noqa: E731
    title = lambda i: class_names[int(labels[i])].split(".", 1)[-1]  # noqa: E731
    top = np.asarray(result.existence["top_concepts"])
    rng = np.random.default_rng(seed)
    n = len(labels)
    # Fig. 3: random test images, top-5 concepts with existence marks
    fig3 = np.sort(rng.choice(n, min(gallery_images, n), replace=False))
    k3 = min(5, top.shape[1])
    rows3 = top[fig3, :k3]
    maps3 = upsample_for(torch.as_tensor(result.maps[fig3]), images.shape[-1])
    marks3 = None if image_concepts is None else np.asarray(image_concepts)[fig3[:, None], rows3] > 0
    save_coam_gallery([images[i] for i in fig3], torch.stack([maps3[r, rows3[r]] for r in range(len(fig3))]),
                      out / "coam_gallery.png", concept_names=[[short(j) for j in row] for row in rows3],
                      row_titles=[title(i) for i in fig3], marks=marks3)
    # Fig. 4: correctly classified images, top-4 concepts and the class-wise map
    predicted = np.asarray(result.predictions) if result.predictions is not None else np.asarray(labels)
    correct = np.flatnonzero(predicted == np.asarray(labels))
    fig4 = np.sort(rng.choice(correct, min(gallery_images, len(correct)), replace=False)) if len(correct) else fig3
    k4 = min(4, top.shape[1])
    rows4 = top[fig4, :k4]
    grid = torch.as_tensor(result.maps[fig4])
    maps4 = upsample_for(grid, images.shape[-1])
    class_maps = class_activation_maps(grid, model.theta.cpu(), torch.as_tensor(predicted[fig4]))
    marks4 = None if image_concepts is None else np.asarray(image_concepts)[fig4[:, None], rows4] > 0
    save_coam_gallery([images[i] for i in fig4], torch.stack([maps4[r, rows4[r]] for r in range(len(fig4))]),
                      out / "coam_class_maps.png", concept_names=[[short(j) for j in row] for row in rows4],
                      row_titles=[title(i) for i in fig4], marks=marks4, class_maps=class_maps,
                      class_titles=[class_names[int(predicted[i])].split(".", 1)[-1] for i in fig4])
    _binary_sheet([coam_overlays(images[i], grid[r, rows4[r]], coloured=False, threshold=coam_threshold)
                   for r, i in enumerate(fig4)], [[short(j) for j in row] for row in rows4], out / "coam_binary.png")
    concept_table, class_table = _cgim_lists(result, class_names, out)
    cg = result.cgim
    lines = [
        f"# Aysel et al. analysis of {type(model).__name__}",
        "",
        f"{n} test images, {len(result.concept_names)} concepts; class accuracy "
        f"{percent(result.class_accuracy)} %. Every number: [results.json](results.json).",
        "",
        "## CGIM (cosine similarity with the class-level truth; Fig. 2)",
        "",
        markdown_table(*score_cells([{"name": level, **{f"t{t}": cg.get(f"{level}_type{t}") for t in (1, 2, 3)}}
                                     for level in ("concept", "class")],
                                    [("t1", "type 1 (theta)"), ("t2", "type 2 (U*)"), ("t3", "type 3 (theta * U*)")],
                                    first=("name", "per"), fractions=False)),
        "",
        "![CGIM histograms](cgim_histograms.png)",
        "",
        "## Table 1: concept existence (top-l concepts truly present, %)",
        "",
        _table1(result),
        "",
        "## Table 2: concept location (part centre inside the alpha-scaled top region of the CoAM, %)",
        "",
        _table2(result),
        "",
    ]
    if result.sweep is not None:
        lines += ["## Table 3: class accuracy (%) of the post-hoc CBM by SVM regularisation and N_p = N_n", "",
                  _table3(result.sweep), ""]
    else:
        lines += ["## Table 3", "", "Not run (`--sweep` relearns the CAVs of a post-hoc CBM for each setting).", ""]
    lines += [
        "## Fig. 3: random test images, top-5 concepts by theta x u-hat (check: in the image's ground truth)",
        "",
        "![CoAM gallery](coam_gallery.png)",
        "",
        "## Fig. 4: correctly classified images, top-4 concepts and the class-wise map",
        "",
        "![CoAM class maps](coam_class_maps.png)",
        "",
        f"Algorithm 2's binary branch (the image kept where the min-max scaled CoAM >= {coam_threshold:g}):",
        "",
        "![CoAM binary](coam_binary.png)",
        "",
        "## Table 6: CGIM per concept ([csv](cgim_per_concept.csv))",
        "",
        concept_table,
        "",
        "## Tables 7-8: CGIM per class ([csv](cgim_per_class.csv))",
        "",
        class_table,
        "",
    ]
    write_report(out, result.summary(), "\n".join(lines))
    return out


def upsample_for(maps: torch.Tensor, size: int) -> torch.Tensor:
    """Feature-grid CoAMs ``(B, L, h, w)`` upsampled to ``size x size`` (bilinear)."""
    from ..models.coam import upsample_maps

    return upsample_maps(maps.float(), size)


def _binary_sheet(overlays: list[list], titles: list[list[str]], path: Path) -> Path:
    """A PNG grid of Algorithm 2's binary overlays: one row per image, one column per concept."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    rows, cols = len(overlays), max(len(r) for r in overlays)
    fig, axes = plt.subplots(rows, cols, figsize=(2.0 * cols, 2.0 * rows), squeeze=False)
    for i, row in enumerate(overlays):
        for j, picture in enumerate(row):
            axes[i, j].imshow(picture)
            axes[i, j].set_title(titles[i][j], fontsize=6)
    for ax in axes.flat:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
