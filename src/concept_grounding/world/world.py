"""``BirdWorld``: species, samples and counterfactuals of the procedural bird world."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..vocabulary import Vocabulary, load_vocabulary
from .config import Pose, WorldConfig, pose_for, sample_pose
from .counterfactual import make_counterfactual, render_sample, substitution
from .sample import BirdSample, Counterfactual
from .species import RenderedVocabulary, class_traits, deviate, substitute, trait_labels

if TYPE_CHECKING:
    import datasets

    from .composition import Composition

__all__ = ["BirdWorld"]


class BirdWorld:
    """A procedural world of birds whose every concept is known (docs/world.md).

    Sample ``index`` belongs to class ``index % num_classes``; its pose, per-image
    deviations from the class traits and noise are drawn from ``(config.seed, index)``.

    >>> world = BirdWorld(WorldConfig(image_size=64, class_names=("017.Cardinal", "073.Blue_Jay")))
    >>> s = world.sample(3)
    >>> s.label, s.image.shape, s.part_xy.shape, int(s.attributes.sum()) > 10
    (1, (64, 64, 3), (15, 2), True)
    >>> cf = world.counterfactual(s, "has_crown_color::pink")
    >>> cf.changed_parts, int(cf.edited.attributes[world.vocab.attribute_index("has_crown_color::pink")])
    (('crown',), 1)
    """

    def __init__(self, config: WorldConfig = WorldConfig(), vocab: Vocabulary | None = None):
        self.config = config
        self.vocab = vocab or load_vocabulary()
        names = tuple(config.class_names) if config.class_names is not None else tuple(self.vocab.sub_classes)
        unknown = [c for c in names if c not in self.vocab.classes]
        if unknown:
            raise ValueError(f"class_names: not CUB class folder names: {unknown} (e.g. '017.Cardinal')")
        if len(set(names)) != len(names):
            raise ValueError(f"class_names must be unique, got {names}")
        self.class_names: tuple[str, ...] = names
        self.class_traits: tuple[dict[str, str], ...] = tuple(class_traits(c, config.seed) for c in names)
        self.class_attributes: np.ndarray = np.stack([trait_labels(t, self.vocab) for t in self.class_traits])
        self.rendered: RenderedVocabulary = RenderedVocabulary.of(self.vocab)
        self.rendered_groups: tuple[str, ...] = self.rendered.groups
        self.rendered_attributes: tuple[int, ...] = self.rendered.attributes

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @cached_property
    def _rendered_set(self) -> frozenset[int]:
        return frozenset(self.rendered_attributes)

    def __repr__(self) -> str:
        return f"BirdWorld({self.config!r}, num_classes={self.num_classes})"

    # ------------------------------------------------------------------- samples
    def _draw(self, index: int) -> tuple[int, Pose, dict[str, str], int]:
        """(label, pose, traits, noise seed) of sample ``index``: everything but the pixels."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise ValueError(f"index must be a non-negative int, got {index!r}")
        if index < 0:
            raise ValueError(f"index must be >= 0, got {index}")
        label = int(index) % self.num_classes
        rng = np.random.default_rng([self.config.seed, int(index)])
        pose = pose_for(self.config, sample_pose(rng, self.config.image_size))
        traits = deviate(self.class_traits[label], self.config.deviation_rate, rng)
        return label, pose, traits, int(rng.integers(2**31 - 1))

    def sample(self, index: int) -> BirdSample:
        """Render sample ``index`` (>= 0); deterministic in (config.seed, index)."""
        label, pose, traits, noise_seed = self._draw(index)
        return render_sample(self.rendered, index, label, traits, pose, self.config.image_size, noise_seed)

    def labels(self, index: int, target_attribute: str | None = None) -> np.ndarray:
        """``(312,)`` exact labels of sample ``index`` (after substituting ``target_attribute``,
        if given) without rendering it; equal to ``sample(index).attributes`` and to
        ``counterfactual(sample(index), target_attribute).edited.attributes``."""
        traits = self._draw(index)[2]
        if target_attribute is not None:
            traits = substitute(traits, *self.rendered.parse(target_attribute))
        return trait_labels(traits, self.vocab)

    def samples(self, indices: Iterable[int]) -> Iterator[BirdSample]:
        """Render several samples lazily."""
        for i in indices:
            yield self.sample(i)

    def class_indices(self, label: int, count: int, start: int = 0) -> list[int]:
        """Sample indices ``start .. start + count - 1`` of class ``label``."""
        return [label + k * self.num_classes for k in range(start, start + count)]

    def pose(self, index: int) -> Pose:
        """The :class:`Pose` sample ``index`` is drawn in, without rendering it."""
        return self._draw(index)[1]

    def composition(self, index: int, count: int = 1) -> Composition:
        """Sample ``index`` drawn as a composition of ``count`` (1-3) birds with its scene,
        facing and traits (see :mod:`.composition`); deterministic in (seed, index, count)."""
        from .composition import Composition, flock_poses, render_flock

        label, pose, traits, noise_seed = self._draw(index)
        rng = np.random.default_rng([self.config.seed, int(index), 101, int(count)])
        poses = flock_poses(pose, int(count), self.config.image_size, rng)
        image, masks, xy = render_flock(traits, poses, self.config.image_size, noise_seed)
        return Composition(
            index=int(index),
            label=label,
            count=int(count),
            scene=pose.background_name,
            facing=pose.facing,
            image=image,
            mask=masks.any(axis=0),
            bird_masks=masks,
            part_xy=xy,
            attributes=trait_labels(traits, self.vocab),
        )

    # ------------------------------------------------------------ counterfactuals
    def counterfactual(self, sample: BirdSample, target_attribute: str) -> Counterfactual:
        """The same bird with ``target_attribute`` (S+) substituted; see :mod:`.counterfactual`."""
        return make_counterfactual(self.rendered, sample, target_attribute, self.config.image_size)

    def edited(self, index: int, target_attribute: str) -> tuple[BirdSample | None, tuple[str, ...]]:
        """``(edited, removed)``: ``counterfactual(sample(index), target_attribute)``'s
        ``edited`` sample and ``removed_attributes`` (S-), without rendering the original (half
        the work, for exports that keep only the edit). ``edited`` is ``None``, and nothing is
        rendered, where the edit would change no part (the bird already shows the target).

        >>> world = BirdWorld()
        >>> edited, removed = world.edited(0, "has_crown_color::pink")
        >>> cf = world.counterfactual(world.sample(0), "has_crown_color::pink")
        >>> bool((edited.image == cf.edited.image).all()), removed == cf.removed_attributes
        (True, True)
        """
        label, pose, traits, noise_seed = self._draw(index)
        traits, removed, changed = substitution(self.rendered, traits, target_attribute)
        if not changed:
            return None, removed
        return render_sample(self.rendered, index, label, traits, pose, self.config.image_size, noise_seed), removed

    # ------------------------------------------------------------------- exports
    def to_dataset_dict(
        self, train_per_class: int = 10, test_per_class: int = 5, progress: bool = True
    ) -> datasets.DatasetDict:
        """``"train"``/``"test"`` splits with :func:`concept_grounding.schema.cub_features`."""
        from .dataset import world_dataset_dict

        return world_dataset_dict(self, train_per_class, test_per_class, progress=progress)

    def sub_dataset(
        self, per_pairing: int = 2, pairings: list[tuple[str, str]] | None = None, progress: bool = True
    ) -> datasets.Dataset:
        """SUB-schema counterfactual set (:func:`concept_grounding.schema.sub_features`)."""
        from .dataset import world_sub_dataset

        return world_sub_dataset(self, per_pairing, pairings, progress=progress)

    def default_pairings(self) -> list[tuple[str, str]]:
        """Each class x each SUB substitution the class does not already have (per
        ``class_attributes``) and that the world renders, in SUB's order."""
        out = []
        for c, name in enumerate(self.class_names):
            for attr in self.vocab.sub_substitutions.values():
                i = self.vocab.attribute_index(attr)
                if i in self._rendered_set and self.class_attributes[c, i] == 0:
                    out.append((name, attr))
        return out
