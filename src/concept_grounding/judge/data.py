"""What a grounded judge learns from and is validated on: renders whose attributes vary
independently of the species, and the world's exact counterfactual edits.

A judge trained on species-typical renders learns to read the species and recite its usual
attributes, the very failure SUB exposes. Three kinds of image break that tie:

* **typical** renders of the world itself (its ``deviation_rate``): species only (their
  attributes follow the species, so learning attributes from them teaches the prior);
* **exact edits** of typical renders (:meth:`BirdWorld.edited`) with a random attribute
  value substituted (half of them one of SUB's substitutions): species and attributes, since
  the species is kept while one attribute group changes;
* **deviant** renders of the same world at ``deviation_rate = 1`` (every attribute group
  drawn away from its class value), twice as many: attributes only (a bird that keeps none
  of its species' traits is no longer recognisable as it).

:class:`JudgeSet` marks what each row teaches: ``labels = -1`` for no species target,
``attribute_mask = False`` for no attribute target.

Every set is a function of the world and an index range, so training, validation and the
generator's training renders never share an image when their ranges differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..world import BirdWorld

__all__ = ["JudgeSet", "EditSet", "judge_training_set", "typical_renders", "exact_edits"]

#: First sample round of the judges' training renders (far above any generator training index).
TRAIN_START = 100_000
#: First sample round of the held-out validation renders and edits.
VALIDATION_START = 200_000


@dataclass(frozen=True)
class JudgeSet:
    """Images with the truth a judge is trained on.

    Attributes:
        images: ``(N, H, W, 3)`` uint8.
        labels: ``(N,)`` int species index into ``world.class_names``; ``-1`` = not a species target.
        attributes: ``(N, 312)`` uint8 exact per-image CUB labels.
        attribute_mask: ``(N,)`` bool, whether a row trains the attribute head (``None``: all).
    """

    images: np.ndarray
    labels: np.ndarray
    attributes: np.ndarray
    attribute_mask: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def trains_attributes(self) -> np.ndarray:
        """``(N,)`` bool: ``attribute_mask``, all True where it is ``None``."""
        return np.ones(len(self), bool) if self.attribute_mask is None else self.attribute_mask

    @staticmethod
    def concat(parts: Sequence[JudgeSet]) -> JudgeSet:
        parts = [p for p in parts if len(p)]
        return JudgeSet(
            np.concatenate([p.images for p in parts]),
            np.concatenate([p.labels for p in parts]),
            np.concatenate([p.attributes for p in parts]),
            np.concatenate([p.trains_attributes for p in parts]),
        )


@dataclass(frozen=True)
class EditSet:
    """Exact counterfactual edits of SUB pairings with their unedited originals.

    Attributes:
        edited: ``(N, H, W, 3)`` uint8, the bird with S+ substituted.
        original: ``(N, H, W, 3)`` uint8, the same bird unedited.
        labels: ``(N,)`` species index (kept by the edit).
        targets: ``(N,)`` CUB attribute index of S+.
        removed: per edit, the CUB attribute indices of S- (the original's values of the
            group that the edit removed).
        groups: ``(N,)`` attribute group of S+ (``"crown_color"``).
        edited_attributes, original_attributes: ``(N, 312)`` uint8 exact labels of both birds.
    """

    edited: np.ndarray
    original: np.ndarray
    labels: np.ndarray
    targets: np.ndarray
    removed: tuple[tuple[int, ...], ...]
    groups: np.ndarray
    edited_attributes: np.ndarray
    original_attributes: np.ndarray

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def _rounds(world: BirdWorld, start: int, count: int) -> list[int]:
    """Sample indices of rounds ``start .. start + count - 1`` (one per class each round)."""
    return [c + k * world.num_classes for k in range(start, start + count) for c in range(world.num_classes)]


def typical_renders(world: BirdWorld, per_class: int, start: int) -> JudgeSet:
    """``per_class`` renders of every class from round ``start`` on, with their truth."""
    samples = list(world.samples(_rounds(world, start, per_class)))
    return JudgeSet(
        np.stack([s.image for s in samples]),
        np.array([s.label for s in samples]),
        np.stack([s.attributes for s in samples]),
    )


def random_edits(world: BirdWorld, per_class: int, start: int, rng: np.random.Generator) -> JudgeSet:
    """Exact edits of ``per_class`` renders per class (rounds from ``start``), each with one
    random attribute value substituted: with probability 1/2 one of SUB's substitutions, else
    any value the world renders; no-op edits are skipped."""
    vocab = world.vocab
    values = [vocab.attributes[i] for i in world.rendered_attributes]
    rendered = set(values)
    sub_values = [a for a in vocab.sub_substitutions.values() if a in rendered] or values
    images, labels, attributes = [], [], []
    for index in _rounds(world, start, per_class):
        pool = sub_values if rng.random() < 0.5 else values
        target = pool[int(rng.integers(len(pool)))]
        edited, _ = world.edited(index, target)
        if edited is not None:
            images.append(edited.image)
            labels.append(edited.label)
            attributes.append(edited.attributes)
    return JudgeSet(np.stack(images), np.array(labels), np.stack(attributes))


def judge_training_set(world: BirdWorld, per_class: int, start: int = TRAIN_START, seed: int = 0) -> JudgeSet:
    """``per_class`` typical renders and as many random exact edits per class, and twice as
    many deviant renders (see the module docstring for what each row trains)."""
    typical = typical_renders(world, per_class, start)
    typical = replace(typical, attribute_mask=np.zeros(len(typical), bool))
    edits = random_edits(world, per_class, start + per_class, np.random.default_rng([seed, 1]))
    deviant_world = BirdWorld(replace(world.config, deviation_rate=1.0), world.vocab)
    deviant = typical_renders(deviant_world, 2 * per_class, start + 2 * per_class)
    deviant = replace(deviant, labels=np.full_like(deviant.labels, -1))
    return JudgeSet.concat([typical, edits, deviant])


def exact_edits(
    world: BirdWorld, pairings: Sequence[tuple[str, str]], per_pairing: int, start: int = VALIDATION_START
) -> EditSet:
    """``per_pairing`` exact edits of every ``(class name, S+)`` pairing: renders of the
    class from round ``start`` on (skipping birds that already show S+), with S+ substituted."""
    vocab = world.vocab
    edited, original, labels, targets, removed, groups, truth = [], [], [], [], [], [], []
    for name, attribute in pairings:
        label = world.class_names.index(name)
        target = vocab.attribute_index(attribute)
        k = start
        found = 0
        while found < per_pairing:
            index = label + k * world.num_classes
            k += 1
            edit, gone = world.edited(index, attribute)
            if edit is None:
                continue
            unedited = world.sample(index)
            edited.append(edit.image)
            original.append(unedited.image)
            truth.append((edit.attributes, unedited.attributes))
            labels.append(label)
            targets.append(target)
            removed.append(tuple(vocab.attribute_index(a) for a in gone))
            groups.append(vocab.group_of(target))
            found += 1
    return EditSet(
        np.stack(edited),
        np.stack(original),
        np.array(labels),
        np.array(targets),
        tuple(removed),
        np.array(groups),
        np.stack([t[0] for t in truth]),
        np.stack([t[1] for t in truth]),
    )
