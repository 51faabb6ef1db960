"""The data a bench run evaluates on: the bird world by default, or CUB + SUB."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..vocabulary import Vocabulary, load_vocabulary
from .config import BenchConfig

if TYPE_CHECKING:
    import datasets

__all__ = [
    "check_world_sub",
    "concept_columns",
    "class_matrix",
    "CERTAINTY_CONFIDENCE",
    "certainty_soft_labels",
    "class_soft_labels",
]


@dataclass
class BenchData:
    """Train / test splits in :func:`~concept_grounding.schema.cub_features`, a SUB set in
    :func:`~concept_grounding.schema.sub_features`, and the class-level truth.

    Attributes:
        class_attributes: ``(K, 312)`` uint8 class-level labels (the CBM majority vote on
            CUB; the species vectors on the world).
        sub_true_attributes: ``(N_sub, 312)`` exact labels of every SUB image: known on the
            world only (``None`` on real SUB).
        rendered: 0-based attributes the world can draw (``None`` on real data).
    """

    train: datasets.Dataset
    test: datasets.Dataset
    sub: datasets.Dataset
    class_names: tuple[str, ...]
    class_attributes: np.ndarray
    source: str
    sub_true_attributes: np.ndarray | None = None
    rendered: tuple[int, ...] | None = None


#: SUB's soft labels weight each CUB annotation by the annotator's certainty (CUB's
#: ``certainty_id``: 1 not visible, 2 guessing, 3 probably, 4 definitely). *Decision* (``docs/sub_curation.md``): the
#: confidence c in [0, 1] pulls the 0/1 label towards 0.5, ``0.5 + (y - 0.5) * c``, with
#: c = 0 (not visible: no information), 0.5, 0.75 and 1 (definitely: the hard label).
CERTAINTY_CONFIDENCE: dict[int, float] = {1: 0.0, 2: 0.5, 3: 0.75, 4: 1.0}


def certainty_soft_labels(labels: np.ndarray, certainty: np.ndarray) -> np.ndarray:
    """Annotator-certainty weighted per-image labels (SUB Table 1's soft labels), ``(N, A)`` float32.

    Args:
        labels: ``(N, A)`` 0/1 per-image labels.
        certainty: ``(N, A)`` CUB certainty ids 1-4 (0, a missing entry, counts as 1).

    >>> certainty_soft_labels(np.array([[1, 1, 0, 1]]), np.array([[4, 2, 3, 1]])).tolist()
    [[1.0, 0.75, 0.125, 0.5]]
    """
    y = np.asarray(labels, dtype=np.float32)
    table = np.array([0.0, *(CERTAINTY_CONFIDENCE[k] for k in (1, 2, 3, 4))], dtype=np.float32)
    ids = np.asarray(certainty, dtype=np.int64)
    if ids.shape != y.shape or ids.min(initial=0) < 0 or ids.max(initial=0) > 4:
        raise ValueError(f"certainty must be ids 0-4 of labels' shape {y.shape}, got {ids.shape}")
    return (0.5 + (y - 0.5) * table[ids]).astype(np.float32)


def class_soft_labels(soft: np.ndarray, classes: np.ndarray, num_classes: int) -> np.ndarray:
    """Per-class soft labels: each image gets its class's mean soft label, ``(N, A)`` float32
    (CUB's ``class_attribute_labels_continuous`` / 100, certainty-weighted).

    >>> class_soft_labels(np.array([[1.0], [0.5], [0.0]]), np.array([0, 0, 1]), 2).tolist()
    [[0.75], [0.75], [0.0]]
    """
    soft = np.asarray(soft, dtype=np.float64)
    classes = np.asarray(classes, dtype=np.int64)
    sums = np.zeros((num_classes, soft.shape[1]))
    np.add.at(sums, classes, soft)
    counts = np.bincount(classes, minlength=num_classes)[:, None]
    return (sums / np.maximum(counts, 1))[classes].astype(np.float32)


def class_matrix(split: datasets.Dataset, num_classes: int, num_attributes: int) -> np.ndarray:
    """``(K, A)`` class-level labels read off the rows' ``class_attributes`` column."""
    out = np.zeros((num_classes, num_attributes), np.uint8)
    labels = np.asarray(split["label"])
    rows = np.asarray(split["class_attributes"], np.uint8)
    out[labels] = rows
    return out


def check_world_sub(source: str, config: BenchConfig) -> datasets.Dataset:
    """A SUB of the bird world's classes (a ``curate`` folder of generated world images) read for a world bench:
    the models train on the world and are scored on it. ``UsageError`` naming ``--sub`` (and ``--cub-root``, what
    it needs instead) when it holds a class the world does not draw: its models must train on those classes' CUB
    images. Cheap (metadata only): called before the world is rendered."""
    from ..errors import UsageError
    from ..loaders import load_sub
    from ..world import BirdWorld

    world = BirdWorld(config.world)
    sub = load_sub(source, class_attributes=world.class_attributes, class_names=world.class_names)
    outside = sorted(set(sub["reference_class"]) - set(world.class_names))
    if outside:
        raise UsageError(
            f"{source} holds {len(outside)} class(es) the bird world does not draw (e.g. {outside[0]}); "
            "the models must train on their CUB images",
            argument="--sub",
            hint="pass --cub-root <CUB_200_2011 folder>",
        )
    return sub


def _world_data(config: BenchConfig) -> BenchData:
    from ..world import BirdWorld

    world = BirdWorld(config.world)
    if config.sub is not None:  # a curated SUB of the world's classes: its truth is what humans (or the judge) kept
        sub, truth = check_world_sub(config.sub, config), None
    else:
        sub = world.sub_dataset(per_pairing=config.sub_per_pairing)
        # The exact labels of each counterfactual, re-derived from the world (SUB's schema has no column for them).
        truth = np.stack(
            [world.labels(int(src), target) for src, target in zip(sub["source_id"], sub["target_attribute"])]
        )
    dd = world.to_dataset_dict(config.train_per_class, config.test_per_class)
    return BenchData(
        train=dd["train"],
        test=dd["test"],
        sub=sub,
        class_names=world.class_names,
        class_attributes=world.class_attributes,
        source="world",
        sub_true_attributes=truth,
        rendered=world.rendered_attributes,
    )


def _real_data(config: BenchConfig, vocab: Vocabulary) -> BenchData:
    from ..loaders import load_cub, load_sub

    dd = load_cub(config.cub_root, vocab=vocab, min_class_count=config.min_class_count)
    names = tuple(dd["train"].features["label"].names)
    V = class_matrix(dd["train"], len(names), vocab.num_attributes)
    if config.sub is None:
        raise ValueError(
            "--cub-root needs --sub (a SUB source: the Hub name or a local copy) to build the SUB evaluation"
        )
    sub = load_sub(config.sub, vocab=vocab, class_attributes=V, class_names=names)
    return BenchData(train=dd["train"], test=dd["test"], sub=sub, class_names=names, class_attributes=V, source="cub")


def load_bench_data(config: BenchConfig, vocab: Vocabulary | None = None) -> BenchData:
    """The world (``config.cub_root is None``) or CUB from ``config.cub_root`` + SUB from ``config.sub``."""
    vocab = vocab or load_vocabulary()
    return _world_data(config) if config.on_world else _real_data(config, vocab)


def concept_columns(config: BenchConfig, data: BenchData, vocab: Vocabulary) -> tuple[int, ...]:
    """The concept set's 0-based attribute indices.

    ``"cbm_112"`` keeps Koh et al.'s 112 (on the world: those it renders, so that no
    concept is constant by construction); ``"rendered"`` every attribute the world
    draws; ``"all"`` all 312. Concepts never positive in the training split are dropped.
    """
    if config.concepts == "all":
        idx = range(vocab.num_attributes)
    elif config.concepts == "rendered":
        if data.rendered is None:
            raise ValueError("concepts='rendered' needs the world (real data has no renderer)")
        idx = data.rendered
    else:
        idx = vocab.cbm_112 if data.rendered is None else [i for i in vocab.cbm_112 if i in set(data.rendered)]
    seen = np.asarray(data.train["class_attributes"], np.uint8).any(axis=0) | np.asarray(
        data.train["attributes"], np.uint8
    ).any(axis=0)
    return tuple(int(i) for i in idx if seen[i])
