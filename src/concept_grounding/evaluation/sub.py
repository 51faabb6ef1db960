"""``evaluate_sub``: SUB's s+ / s- of any model, with chance and breakdowns.

1. the SUB source is resolved (:func:`load_sub_source`): the world's SUB export by
   default, a local copy or the Hub id (through :func:`~concept_grounding.loaders.load_sub`),
   or a ``datasets.Dataset`` already in :func:`~concept_grounding.schema.sub_features`;
2. the model is wrapped once (:func:`~.adapters.as_sub_model`, or :func:`~.loading.load_model`
   for a ``--model`` string), moved to the device once, and told which attribute groups
   the set substitutes (group mode embeds their prompts once);
3. the images are scored in batches (:func:`predict_scores`; the next batch is decoded and
   preprocessed in a thread while the model runs; under ``accelerate launch`` each process
   takes a contiguous block and the blocks are gathered in order);
4. :func:`~concept_grounding.metrics.sub_accuracy` scores the matrix under the chosen
   ``protocol`` (``"paper"``, docs/sub_accuracy.md, or ``"official"``, SUB's published code).

The result is a :class:`SubEvaluation`; :meth:`SubEvaluation.save` writes JSON, a
Markdown report and PNG bar charts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..errors import UsageError, option
from ..vocabulary import Vocabulary, load_vocabulary
from .adapters import DTYPES, SubModel, as_sub_model
from .distributed import ProcessInfo, gather_rows, process_info, shard

if TYPE_CHECKING:
    import datasets

__all__ = ["SubEvaluation", "evaluate_sub", "load_sub_source", "PROTOCOLS"]

PROTOCOLS = ("paper", "official")
_SUB_COLUMNS = ("image", "reference_class", "target_attribute", "removed_attributes")


# ----------------------------------------------------------------------- step 1
def world_sub_source(
    image_size: int = 64,
    seed: int = 0,
    per_pairing: int = 1,
    classes: Sequence[str] | None = None,
    progress: bool = True,
) -> datasets.Dataset:
    """The bird world's SUB export (:meth:`~concept_grounding.world.BirdWorld.sub_dataset`):
    ``per_pairing`` counterfactuals per (class, SUB substitution) pairing, exact S-."""
    from ..world import BirdWorld, WorldConfig

    world = BirdWorld(
        WorldConfig(image_size=int(image_size), seed=int(seed), class_names=tuple(classes) if classes else None)
    )
    return world.sub_dataset(per_pairing=int(per_pairing), progress=progress)


def load_sub_source(
    source: str | Path | datasets.Dataset | None = None,
    *,
    split: str | None = None,
    class_attributes: np.ndarray | None = None,
    class_names: Sequence[str] | None = None,
    vocab: Vocabulary | None = None,
    progress: bool = True,
    **world: Any,
) -> datasets.Dataset:
    """A SUB set in :func:`~concept_grounding.schema.sub_features`.

    Args:
        source: ``None`` (the world's SUB export, ``world`` keywords go to
            :func:`world_sub_source`), a ``datasets.Dataset`` with SUB's columns, a local
            copy or the Hub id ``"Jessica-bader/SUB"`` (:func:`~concept_grounding.loaders.load_sub`).
        class_attributes, class_names: class-level labels to derive S- for sources without
            ``removed_attributes`` (SUB's Hub copy), e.g. from :func:`~concept_grounding.loaders.load_cub`.
        progress: show progress bars (the world's render bar, ``datasets``' bars while loading).

    Raises:
        ValueError: a Dataset without SUB's columns; :class:`~concept_grounding.loaders.SUBFormatError`
        / :class:`~concept_grounding.loaders.HubUnavailableError` from ``load_sub``.
    """
    import datasets

    from ..loaders import load_sub
    from ..progress import progress_bars

    if source is None:
        return world_sub_source(**world, progress=progress)
    if world:
        raise ValueError(f"world options {sorted(world)} only apply without a SUB source")
    if isinstance(source, datasets.Dataset):
        missing = [c for c in _SUB_COLUMNS if c not in source.column_names]
        if missing:
            raise ValueError(
                f"dataset: missing SUB column(s) {missing}; it has {source.column_names} "
                "(save it and pass its path to map Hub columns through load_sub)"
            )
        return source
    with progress_bars(progress):
        return load_sub(source, split=split, vocab=vocab, class_attributes=class_attributes, class_names=class_names)


# ----------------------------------------------------------------------- step 3
def _decoded_batches(dataset: datasets.Dataset, rows: range, batch_size: int, preprocess) -> Iterator[Any]:
    """Preprocessed batches of ``rows``, each prepared in a worker thread while the caller
    works on the previous one."""
    images = dataset.select_columns(["image"])

    def load(start: int) -> Any:
        stop = min(start + batch_size, rows.stop)
        return preprocess(images[start:stop]["image"])

    starts = list(range(rows.start, rows.stop, batch_size))
    if not starts:
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(load, starts[0])
        for nxt in starts[1:] + [None]:
            batch = pending.result()
            if nxt is not None:
                pending = pool.submit(load, nxt)
            yield batch


def predict_scores(
    model: SubModel,
    dataset: datasets.Dataset,
    *,
    batch_size: int = 64,
    progress: bool = True,
    info: ProcessInfo | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(N, C)`` scores (and ``(N,)`` "none" scores in group mode, else ``None``) of every image
    of ``dataset``, in its row order; call ``model.prepare`` first. Under several processes
    each scores its :func:`~.distributed.shard` and every process gets the whole matrix."""
    from tqdm.auto import tqdm

    info = info or process_info()
    rows = shard(len(dataset), info.index, info.count)
    scores, nones = [], []
    preprocess = model.preprocess
    with tqdm(total=len(rows), desc="SUB", unit="img", disable=not progress or not info.is_main) as bar:
        for pixels in _decoded_batches(dataset, rows, batch_size, preprocess):
            s, n = model.forward(pixels)
            scores.append(s.numpy())
            if n is not None:
                nones.append(n.numpy())
            bar.update(len(s))
    local = np.concatenate(scores) if scores else np.zeros((0, len(model.columns)), np.float32)
    with_none = bool(getattr(model, "include_none", False))
    local_none = np.concatenate(nones) if nones else (np.zeros(0, np.float32) if with_none else None)
    return gather_rows(local, info), gather_rows(local_none, info)


# ----------------------------------------------------------------------- result
@dataclass
class SubEvaluation:
    """SUB scores of one model on one set (fractions in [0, 1]; NaN where nothing counts).

    Attributes:
        s_plus, s_minus: SUB accuracy on S+ (images) and S- (pairs; images under ``official``).
        chance_s_plus, chance_s_minus: random chance on the same images / pairs (App. F).
        n_s_plus, n_s_minus: how many counted; ``skipped_target`` / ``skipped_removed``:
            attributes the model has no column for.
        by_group, by_attribute, by_class: per group / target attribute / reference class,
            each ``{name: {"s_plus", "s_minus", "chance_s_plus", "chance_s_minus", "n_s_plus", "n_s_minus"}}``.
        mode: ``"binary"`` or ``"group"``; protocol: ``"paper"`` or ``"official"``.
        concept_names: the ``C`` score columns; scores ``(N, C)``: probabilities (binary) or
            cosine similarities (group); none_scores ``(N,)`` or ``None``.
        seconds, images_per_second: wall time of step 3 (inference, gather included).
        processes: how many processes shared the inference (``accelerate launch``).
        metric: the raw dict of :func:`~concept_grounding.metrics.sub_accuracy`.
    """

    s_plus: float
    s_minus: float
    chance_s_plus: float
    chance_s_minus: float
    n_s_plus: int
    n_s_minus: int
    skipped_target: int
    skipped_removed: int
    by_group: dict[str, dict[str, float]] = field(repr=False)
    by_attribute: dict[str, dict[str, float]] = field(repr=False)
    by_class: dict[str, dict[str, float]] = field(repr=False)
    mode: str
    protocol: str
    num_images: int
    concept_names: tuple[str, ...] = field(repr=False)
    scores: np.ndarray = field(repr=False)
    none_scores: np.ndarray | None = field(default=None, repr=False)
    seconds: float = 0.0
    images_per_second: float = float("nan")
    processes: int = 1
    model: str = ""
    source: str = ""
    metric: dict[str, Any] = field(default_factory=dict, repr=False)

    def summary(self) -> dict[str, Any]:
        """Headline numbers, breakdowns and provenance as JSON-ready values (no score matrix)."""
        keys = (
            "s_plus",
            "s_minus",
            "chance_s_plus",
            "chance_s_minus",
            "n_s_plus",
            "n_s_minus",
            "skipped_target",
            "skipped_removed",
            "mode",
            "protocol",
            "num_images",
            "seconds",
            "images_per_second",
            "processes",
            "model",
            "source",
        )
        out = {k: getattr(self, k) for k in keys}
        out.update(
            by_group=self.by_group,
            by_attribute=self.by_attribute,
            by_class=self.by_class,
            concept_names=list(self.concept_names),
        )
        return out

    def save(self, out: str | Path, *, scores: bool = False) -> Path:
        """Write ``results.json``, ``report.md`` and ``sub_per_{attribute,group,class}.png`` to ``out``
        (and ``scores.npz`` with ``scores=True``); returns ``out``."""
        from .report import write_sub_report

        return write_sub_report(self, Path(out), scores=scores)


def _table(breakdown: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    keys = ("s_plus", "s_minus", "chance_s_plus", "chance_s_minus", "n_s_plus", "n_s_minus")
    return {
        str(n): {k: (int(breakdown[k][i]) if k.startswith("n_") else float(breakdown[k][i])) for k in keys}
        for i, n in enumerate(breakdown["names"])
    }


def _sub_accuracy(scores, dataset, names, mode, none_scores, protocol, vocab) -> dict[str, Any]:
    from ..metrics import sub_accuracy

    return sub_accuracy(
        scores,
        list(dataset["target_attribute"]),
        [list(r) for r in dataset["removed_attributes"]],
        concept_names=list(names),
        reference_classes=list(dataset["reference_class"]),
        mode=mode,
        protocol=protocol,
        none_scores=none_scores,
        vocabulary=vocab,
    )


# ----------------------------------------------------------------------- entry
def evaluate_sub(
    model: Any,
    dataset: str | Path | datasets.Dataset | None = None,
    *,
    protocol: str = "paper",
    batch_size: int = 64,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    progress: bool = True,
    vocab: Vocabulary | None = None,
    source_options: dict[str, Any] | None = None,
    **model_options: Any,
) -> SubEvaluation:
    """SUB accuracy of ``model`` on ``dataset`` (module docstring, steps 1-4).

    Args:
        model: anything :func:`~.adapters.as_sub_model` wraps: a binary concept model
            (callable / ``nn.Module``; pass ``concept_names=`` and its preprocessing:
            ``mean`` and ``std``, a ``transform`` or ``processor``, or ``normalize=False``
            for [0, 1] pixels; without one it is refused), a pytorch-concepts model, a
            ``ClipHandle`` / :class:`~.adapters.OpenVocabularyModel`, or a project model; or a
            ``--model`` string for :func:`~.loading.load_model` (a saved folder,
            ``file.py:factory``, a CLIP name; ``model_options`` may add its ``pretrained``
            and ``argument``). It is wrapped once and moved to ``device`` / ``dtype`` once, here.
        dataset: SUB source (:func:`load_sub_source`); ``None``: the world's SUB export.
        protocol: ``"paper"`` (docs/sub_accuracy.md) or ``"official"`` (SUB's published evaluation code).
        batch_size: images per forward pass.
        device, dtype: where and in which precision the model runs (``"float32"``,
            ``"bfloat16"``, ``"float16"``); scores are float32.
        source_options: keywords for :func:`load_sub_source` (``class_attributes``,
            ``class_names``, ``split``, or the world's ``image_size`` / ``seed`` / ...).
        model_options: keywords for :func:`~.adapters.as_sub_model` (``concept_names``,
            ``index_base``, ``transform``, ``processor``, ``image_size``, ``mean``, ``std``,
            ``normalize``, ``output``, ``outputs``, ``tokenizer``, ``preprocess``, ``include_none``).

    Raises:
        ValueError: a bad protocol, batch size, dtype, model or source (checked before inference).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        dtype = DTYPES[dtype]
    vocab = vocab or load_vocabulary()
    adapter = _wrap(model, model_options)
    if adapter.mode == "group" and protocol == "official" and getattr(adapter, "include_none", False):
        raise UsageError(
            f"{option('protocol', 'official')} scores open-vocabulary models without a 'none' option; "
            f"drop {option('include_none', True)}"
        )
    data = load_sub_source(dataset, vocab=vocab, progress=progress, **(source_options or {}))
    if len(data) == 0:
        raise ValueError("the SUB source has no images")
    groups = sorted({vocab.group_of(t) for t in data["target_attribute"]})
    if device is not None or dtype is not None:
        adapter.to(device, dtype)
    names = adapter.prepare(groups, vocab)
    info = process_info()
    start = time.perf_counter()
    scores, none_scores = predict_scores(adapter, data, batch_size=int(batch_size), progress=progress, info=info)
    seconds = time.perf_counter() - start
    res = _sub_accuracy(scores, data, names, adapter.mode, none_scores, protocol, vocab)
    b = res["breakdown"]
    return SubEvaluation(
        **{
            k: res[k]
            for k in (
                "s_plus",
                "s_minus",
                "chance_s_plus",
                "chance_s_minus",
                "n_s_plus",
                "n_s_minus",
                "skipped_target",
                "skipped_removed",
            )
        },
        by_group=_table(b["group"]),
        by_attribute=_table(b["attribute"]),
        by_class=_table(b["class"]),
        mode=adapter.mode,
        protocol=protocol,
        num_images=len(data),
        concept_names=tuple(names),
        scores=scores,
        none_scores=none_scores,
        seconds=seconds,
        images_per_second=len(data) / seconds if seconds > 0 else float("nan"),
        processes=info.count,
        model=_describe(model),
        source=_describe(dataset) if dataset is not None else "bird world SUB export",
        metric=res,
    )


def _wrap(model: Any, options: dict[str, Any]) -> SubModel:
    """``model`` wrapped once: a ``--model`` string (a folder, ``file.py:factory`` or CLIP name)
    through :func:`~.loading.load_model` (the one resolver, then the loader), anything else
    through :func:`~.adapters.as_sub_model`; neither moves it (:func:`evaluate_sub` does, once)."""
    from ..hub import ModelSpec

    if isinstance(model, (str, Path, ModelSpec)):
        from .loading import load_model

        return load_model(model, **options)
    return as_sub_model(model, **options)


def _describe(obj: Any) -> str:
    """A short name of a model or source for the report."""
    from ..hub import ModelSpec

    if isinstance(obj, (str, Path, ModelSpec)):
        return str(obj)
    from .adapters import BinaryConceptModel, OpenVocabularyModel

    return type(obj.model if isinstance(obj, (BinaryConceptModel, OpenVocabularyModel)) else obj).__name__
