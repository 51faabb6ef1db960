"""Concept learners as a small registry: name -> a :class:`Learner` (``fit`` + ``generate``).

A learner learns ``V*`` from a concept's training images (``fit(concept, out)``) and then draws
images for prompts that name it (``generate(prompts, n, seed)``; image ``i`` answers prompt
``i % len(prompts)``). Reference learners with known answers, built on the world's truth:

* ``"Original"``: all of the concept's held-out real images, scored as if generated (CCD = 0 by construction);
* ``"another species"``: renders of another concept of the same task (another species; for a
  style, the next style): ``f(y_c | x) ~ 0``, so its CCD is the oracle's full confidence gap
  (the real images' mean confidence);
* ``"exact"``: renders of ``V*`` exactly from the world's truth (the species' class traits with no
  per-image deviation; the style applied to renders of the prompted species): the upper bound.

The four diffusers learners ("Textual Inversion", "DreamBooth", "LoRA", "Custom Diffusion")
come from :func:`flux_learner`, the adapter over ``concept_grounding.learners`` (imported
lazily; when that package is missing they are refused in one line).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..errors import UsageError
from ..world.styles import STYLES
from .concepts import Concept, ConceptWorld

__all__ = [
    "Learner",
    "REFERENCE_LEARNERS",
    "FLUX_LEARNERS",
    "LEARNER_NAMES",
    "make_learner",
    "flux_learner",
    "check_learners",
]

#: the four learners of Table 1 -> ``concept_grounding.learners.LearnConfig.method``
FLUX_LEARNERS: dict[str, str] = {
    "Textual Inversion": "textual_inversion",
    "DreamBooth": "dreambooth",
    "LoRA": "lora",
    "Custom Diffusion": "custom_diffusion",
}
REFERENCE_LEARNERS: tuple[str, ...] = ("Original", "another species", "exact")
LEARNER_NAMES: tuple[str, ...] = (*FLUX_LEARNERS, *REFERENCE_LEARNERS)


class Learner(Protocol):
    """What the runner asks of a learner."""

    name: str

    def fit(self, concept: Concept, out: Path) -> None:
        """Learn ``V*`` from ``concept.train`` (weights, if any, under ``out``)."""

    def generate(self, prompts: Sequence[str], n: int, seed: int) -> np.ndarray:
        """``(n, H, W, 3)`` uint8 images; image ``i`` for ``prompts[i % len(prompts)]``."""


@dataclass
class _Reference:
    """A reference learner over the world's truth (module docstring)."""

    name: str
    world: ConceptWorld
    siblings: dict[str, list[Concept]]
    concept: Concept | None = None

    def fit(self, concept: Concept, out: Path) -> None:
        self.concept = concept

    def generate(self, prompts: Sequence[str], n: int, seed: int) -> np.ndarray:
        c = self.concept
        if c is None:
            raise RuntimeError(f"{self.name}: generate before fit")
        if self.name == "Original":  # every held-out real image (whatever n): CCD 0 by construction
            return c.real
        if c.task == "domain":
            species = self.world.domain_species_of(c)
            style = c.style if self.name == "exact" else STYLES[(STYLES.index(c.style) + 1) % len(STYLES)]
            return self.world.styled(
                species, style, n, "exact" if self.name == "exact" else "domain_other", offset=seed
            )
        if self.name == "exact":
            return self.world.renders(c.label, n, "exact", exact=True, offset=seed)
        return self.world.renders(self.other_label(c), n, "other", offset=seed)

    def other_label(self, c: Concept) -> int:
        """Another species: the next concept of the task, or the next world class."""
        labels = [s.label for s in self.siblings.get(c.task, []) if s.label != c.label]
        return labels[0] if labels else (c.label + 1) % self.world.world.num_classes


@dataclass
class FluxLearner:
    """ADAPTER (wired to the real learners): ``concept_grounding.learners.learn`` on the concept's
    training images, then ``load_learned`` into a ``FluxPipeline`` and generation. ``V*`` in a
    prompt becomes ``token``.

    Attributes:
        name: the Table 1 name (a key of :data:`FLUX_LEARNERS`).
        model: a diffusers Flux folder (default: the shipped world Flux).
        steps, lr, batch, seed, device: the ``LearnConfig``'s; ``None``: the method's defaults, the one
            table ``concept_grounding.learners.METHOD_DEFAULTS`` (its world-Flux rate on the world Flux).
        token, init_word, class_prompt: the placeholder token and its initialisation.
        inference_steps, guidance: the generation call's.
    """

    name: str
    model: str | None = None
    steps: int | None = None
    lr: float | None = None
    batch: int = 4
    seed: int = 0
    device: str = "cpu"
    token: str = "<v*>"
    init_word: str = "bird"
    class_prompt: str = "a photo of a bird"
    inference_steps: int = 20
    guidance: float = 4.0
    pipe: Any = field(default=None, repr=False)
    size: int = 32
    prior_cache: str | None = None

    def fit(self, concept: Concept, out: Path) -> None:
        from PIL import Image

        from concept_grounding.learners import LearnConfig, learn, load_learned  # the learners' package (lazy)

        images = Path(out) / "train_images"
        images.mkdir(parents=True, exist_ok=True)
        for i, image in enumerate(concept.train):
            Image.fromarray(image).save(images / f"{i:04d}.png")
        config = LearnConfig(
            method=FLUX_LEARNERS[self.name],
            model="world" if self.model is None else str(self.model),
            images=images,
            min_images=len(concept.train),
            token=self.token,
            init_word=self.init_word,
            class_prompt=self.class_prompt,
            steps=self.steps,
            lr=self.lr,
            batch=self.batch,
            seed=self.seed,
            device=self.device,
            prior_cache=self.prior_cache,
        )
        self.size = int(concept.train.shape[1])
        folder = learn(config, Path(out) / "learned")
        self.pipe = load_learned(self.base_pipeline(), folder)

    def model_path(self) -> str:
        if self.model is not None:
            return str(self.model)
        from ..worldflux.loader import WORLD_FLUX_DIR

        return str(WORLD_FLUX_DIR)

    def base_pipeline(self) -> Any:
        import torch
        from diffusers import FluxPipeline

        return FluxPipeline.from_pretrained(self.model_path(), torch_dtype=torch.float32).to(self.device)

    def generate(self, prompts: Sequence[str], n: int, seed: int, batch_size: int = 64) -> np.ndarray:
        """``(n, S, S, 3)`` uint8: image ``i`` answers ``prompts[i % len(prompts)]`` from noise seeded
        ``seed + i``, ``batch_size`` images per pipeline call (true CFG against the empty prompt)."""
        import torch

        if self.pipe is None:
            raise RuntimeError(f"{self.name}: generate before fit")
        texts = [prompts[i % len(prompts)].replace("V*", self.token) for i in range(n)]
        out = []
        for a in range(0, n, batch_size):
            chunk = texts[a : a + batch_size]
            images = self.pipe(
                chunk,
                height=self.size,
                width=self.size,
                num_inference_steps=self.inference_steps,
                true_cfg_scale=self.guidance,
                negative_prompt=[""] * len(chunk),
                max_sequence_length=self.pipe.tokenizer_2.model_max_length,
                output_type="np",
                generator=[torch.Generator().manual_seed(seed + a + i) for i in range(len(chunk))],
            ).images
            out.append((np.asarray(images) * 255).round().clip(0, 255).astype(np.uint8))
        return np.concatenate(out)


def learners_installed() -> bool:
    """Whether the concept learners' package (``concept_grounding.learners``) is installed."""
    return importlib.util.find_spec("concept_grounding.learners") is not None


def check_learners(names: Sequence[str], argument: str = "--learners") -> tuple[str, ...]:
    """``names`` if every one is known (and, for the four diffusers learners, installed); else
    one line naming ``argument``."""
    from ..errors import suggest

    for name in names:
        if name not in LEARNER_NAMES:
            raise UsageError(
                f"unknown learner {name!r}{suggest(name, LEARNER_NAMES)}; choose from {LEARNER_NAMES}",
                argument=argument,
            )
    flux = [n for n in names if n in FLUX_LEARNERS]
    if flux and not learners_installed():
        raise UsageError(
            f"the concept learners are not installed (concept_grounding.learners): cannot run {flux}",
            argument=argument,
            hint=f"use the reference learners {REFERENCE_LEARNERS} meanwhile",
        )
    return tuple(names)


def flux_learner(name: str, **settings: Any) -> FluxLearner:
    """The adapter entry of one diffusers learner (``settings``: :class:`FluxLearner`'s fields)."""
    check_learners([name])
    return FluxLearner(name, **settings)


def make_learner(
    name: str, world: ConceptWorld, siblings: dict[str, list[Concept]], flux_settings: dict[str, Any] | None = None
) -> Learner:
    """The registry: ``name`` -> a fresh learner (one per concept)."""
    if name in REFERENCE_LEARNERS:
        return _Reference(name, world, siblings)
    return flux_learner(name, **(flux_settings or {}))
