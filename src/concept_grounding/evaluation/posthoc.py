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

__all__ = ["feature_map_posthoc_cbm", "analyse_posthoc"]


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
    and visibility ``(N, P)``."""
    xy = np.asarray(split["part_xy"], np.float32)
    sizes = np.array([im.size for im in split["image"]], np.float32)  # (N, 2) as (W, H)
    return xy * (size / sizes)[:, None, :], np.asarray(split["part_visible"], bool)


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

    def summary(self) -> dict[str, Any]:
        """Every scalar of the three analyses (JSON-ready)."""
        pick = lambda d: {k: v for k, v in d.items() if np.ndim(v) == 0}  # noqa: E731
        return {"class_accuracy": self.class_accuracy, "cgim": pick(self.cgim), "existence": pick(self.existence),
                "location": pick(self.location), "concept_names": self.concept_names}


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
) -> AyselResult:
    """CGIM 1-3, concept existence and concept location of a post-hoc CBM (module docstring).

    Args:
        model: a :class:`~concept_grounding.models.PostHocCBM` (or any model with
            ``theta``, ``concept_names``, ``forward`` -> ``ConceptModelOutput``,
            ``concept_activation_maps``).
        images: ``(N, 3, S, S)`` in [0, 1]; labels ``(N,)`` class indices.
        image_concepts: ``(N, L)`` per-image 0/1 labels of the model's concepts (existence).
        class_concepts: ``(K, L)`` class-level 0/1 labels (CGIM's ``V`` is its transpose).
        part_xy, part_visible: ``(N, P, 2)`` part centres in pixels of the ``S x S`` image, ``(N, P)``.
    """
    from ..metrics import concept_existence, concept_global_importance, concept_location

    u, class_logits = _outputs(model, images, batch_size)
    predicted = class_logits.argmax(1)
    labels = np.asarray(labels)
    theta = model.theta.cpu().numpy()
    names = list(model.concept_names)
    top_l = tuple(l for l in (1, 3, 5) if l <= theta.shape[0])  # the paper's l, as far as L allows
    cgim = concept_global_importance(theta, np.asarray(class_concepts, float).T, u, predicted, labels)
    existence = concept_existence(theta, u, predicted, np.asarray(image_concepts), labels, top_l=top_l)
    was = model.training
    model.eval()
    try:
        maps = torch.cat([model.concept_activation_maps(images[i : i + batch_size], upsample=False).cpu()
                          for i in range(0, len(images), batch_size)]).numpy()
    finally:
        model.train(was)
    size = images.shape[-1]
    location = concept_location(maps, part_xy, part_visible, theta=theta, concept_scores=u, predictions=predicted,
                                references=labels, concept_names=names, image_size=(size, size), top_l=top_l)
    return AyselResult(cgim, existence, location, float((predicted == labels).mean()), names, maps)


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
) -> AyselResult:
    """Aysel et al.'s analysis of ``model`` on CUB's test split (``load_cub(root)``); with ``out``,
    writes ``results.json``, ``report.md``, ``cgim_histograms.png`` and ``coam_gallery.png``.

    A post-hoc CBM without a classifier gets one fitted on the train split first.
    ``max_images`` keeps the first test images only (a quick look).
    """
    from ..models.data import images_to_tensor

    vocab = vocab or load_vocabulary()
    columns = _concept_columns(model, vocab)
    if isinstance(model, PostHocCBM):
        fit_missing_parts(model, cub["train"], image_size, batch_size=batch_size, progress=progress)
    test = cub["test"]
    if max_images is not None:
        test = test.select(range(min(int(max_images), len(test))))
    images = images_to_tensor(test["image"], image_size)
    part_xy, visible = parts_at(test, image_size)
    class_concepts = np.zeros((len(test.features["label"].names), len(columns)), np.uint8)
    class_concepts[np.asarray(test["label"])] = np.asarray(test["class_attributes"], np.uint8)[:, columns]
    train_rows = cub["train"]
    class_concepts[np.asarray(train_rows["label"])] = np.asarray(train_rows["class_attributes"], np.uint8)[:, columns]
    result = aysel_metrics(model, images, np.asarray(test["label"]), np.asarray(test["attributes"], np.uint8)[:, columns],
                           class_concepts, part_xy, visible, batch_size=batch_size)
    if out is not None:
        write_aysel_report(result, model, images, np.asarray(test["label"]), list(test.features["label"].names), Path(out))
    return result


def write_aysel_report(result: AyselResult, model: nn.Module, images: torch.Tensor, labels: np.ndarray,
                       class_names: list[str], out: Path) -> Path:
    """The report folder of :func:`analyse_posthoc` (tables as in the bench report)."""
    from .report import markdown_table, percent, write_json
    from ..models.coam import save_coam_gallery
    from ..plotting import cgim_histograms

    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", result.summary())
    cgim_histograms(result.cgim, out / "cgim_histograms.png", title=type(model).__name__)
    k = min(4, len(result.concept_names))
    top = np.asarray(result.existence["top_concepts"])[:6, :k]
    full = model.concept_activation_maps(images[: len(top)], upsample=True)
    picked = torch.stack([full[i, top[i]] for i in range(len(top))])
    save_coam_gallery([images[i] for i in range(len(top))], picked, out / "coam_gallery.png",
                      concept_names=[[result.concept_names[j].removeprefix("has_") for j in row] for row in top],
                      row_titles=[class_names[int(labels[i])].split(".", 1)[-1] for i in range(len(top))])
    ls, cg, ex, loc = (1, 3, 5), result.cgim, result.existence, result.location
    lines = [
        f"# Aysel et al. analysis of {type(model).__name__}",
        "",
        f"{len(labels)} test images, {len(result.concept_names)} concepts; class accuracy "
        f"{percent(result.class_accuracy)} %. Every number: [results.json](results.json).",
        "",
        "## CGIM (cosine similarity with the class-level truth)",
        "",
        markdown_table([{"name": level, **{f"t{t}": cg.get(f"{level}_type{t}") for t in (1, 2, 3)}}
                        for level in ("concept", "class")],
                       [("t1", "type 1 (theta)"), ("t2", "type 2 (U*)"), ("t3", "type 3 (theta * U*)")],
                       first=("name", "per"), fractions=False),
        "",
        "![CGIM histograms](cgim_histograms.png)",
        "",
        "## Concept existence (top-l concepts by theta * u that are truly present)",
        "",
        markdown_table([{"name": subset, **{f"l{l}": ex.get(f"existence@{l}{suffix}") for l in ls}}
                        for subset, suffix in (("all test images", ""), ("correctly classified", "_correct"))],
                       [(f"l{l}", f"l = {l}") for l in ls], first=("name", "images")),
        "",
        "## Concept location (part centre inside the alpha-scaled top region of the CoAM)",
        "",
        markdown_table([{"name": f"alpha = {a}", **{f"l{l}": loc.get(f"location@{l}_alpha{a}") for l in ls}}
                        for a in (1, 3, 6)], [(f"l{l}", f"l = {l}") for l in ls], first=("name", "region")),
        "",
        "![CoAM gallery](coam_gallery.png)",
        "",
    ]
    (out / "report.md").write_text("\n".join(lines))
    return out
