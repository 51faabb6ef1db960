"""How big the models are that the Space trains itself when no bench run was saved.

The Space first loads the models a ``concept-grounding bench`` run saved (through
:class:`~concept_grounding.bench.artifacts.BenchArtifacts`); without one it trains them
through the bench's own functions (:func:`~concept_grounding.bench.models.train_variant`,
:func:`~concept_grounding.bench.models.train_posthoc`) at the sizes of a
:class:`SpaceBuild`. The default is what the published Space uses; :meth:`SpaceBuild.tiny`
(``CONCEPT_GROUNDING_SPACE_BUILD=tiny`` at launch) builds in about a second, for tests and
smoke runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads when a model is built, not when the Space starts
    from ..models.training import TrainConfig

__all__ = ["BUILD_ENV", "SpaceBuild"]

#: Environment variable choosing the build sizes at launch: ``default`` or ``tiny``.
BUILD_ENV = "CONCEPT_GROUNDING_SPACE_BUILD"


@dataclass(frozen=True)
class SpaceBuild:
    """Sizes of the Space's own quick builds.

    Attributes:
        concept_per_class, concept_size, concept_epochs: the SUB explorer's joint per-image
            CBM (bench variant ``"CBM (joint, per-img.)"``): world birds per class, input
            side (px) and epochs (default about 10 s on a 2-core CPU; 96 % concept accuracy
            vs 92 % majority).
        posthoc_per_class, posthoc_size, posthoc_epochs, posthoc_cavs: the Concepts tab's
            post-hoc CBM: world birds per class, input side, the backbone's epochs and
            positives / negatives per CAV.
        seed: seed of every build (the store sets its own).
    """

    concept_per_class: int = 48
    concept_size: int = 64
    concept_epochs: int = 10
    posthoc_per_class: int = 4
    posthoc_size: int = 32
    posthoc_epochs: int = 3
    posthoc_cavs: int = 30
    seed: int = 0

    def __post_init__(self) -> None:
        for name in (
            "concept_per_class",
            "concept_size",
            "concept_epochs",
            "posthoc_per_class",
            "posthoc_size",
            "posthoc_epochs",
            "posthoc_cavs",
        ):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    @classmethod
    def tiny(cls) -> SpaceBuild:
        """Builds of about a second: 2 birds per class at 32 px, one epoch."""
        return cls(
            concept_per_class=2,
            concept_size=32,
            concept_epochs=1,
            posthoc_per_class=2,
            posthoc_epochs=1,
            posthoc_cavs=10,
        )

    def seeded(self, seed: int) -> SpaceBuild:
        """The same sizes with every build seeded by ``seed``."""
        return replace(self, seed=int(seed))

    def concept_training(self) -> TrainConfig:
        """Training knobs of the SUB explorer's CBM (no progress bars in the Space)."""
        from ..models.training import TrainConfig

        return TrainConfig(epochs=self.concept_epochs, seed=self.seed, progress=False)

    def posthoc_training(self) -> TrainConfig:
        """Training knobs of the Concepts tab's post-hoc CBM backbone."""
        from ..models.training import TrainConfig

        return TrainConfig(epochs=self.posthoc_epochs, seed=self.seed, progress=False)

    @classmethod
    def from_env(cls, value: str | None = None) -> SpaceBuild:
        """``value`` (default ``$CONCEPT_GROUNDING_SPACE_BUILD``): ``"default"`` / empty or ``"tiny"``.

        >>> SpaceBuild.from_env("tiny").concept_size
        32
        >>> SpaceBuild.from_env("huge")
        Traceback (most recent call last):
        ...
        ValueError: CONCEPT_GROUNDING_SPACE_BUILD must be 'default' or 'tiny', got 'huge'
        """
        value = (os.environ.get(BUILD_ENV, "") if value is None else value).strip().lower()
        if value in ("", "default"):
            return cls()
        if value == "tiny":
            return cls.tiny()
        raise ValueError(f"{BUILD_ENV} must be 'default' or 'tiny', got {value!r}")
