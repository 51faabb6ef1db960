"""The world's ConceptBed concepts: held-out species, their attributes, and four styles.

The shipped world Flux learnt SUB's 33 classes; the other 167 CUB classes are new to it.
The split (*decision*, documented here and in the README):

* ``fine_grained_object``: a held-out species whose family (the last word of its CUB name,
  ``"Sparrow"`` in ``"130.Tree_Sparrow"``) has a learnt species: the generator knows a close
  relative, so the concept differs from what it can draw by a few attributes (64 species);
* ``object``: a held-out species of a family the generator never saw (103 species);
* ``fine_grained_attribute``: the ``fine_grained_object`` species again, judged attribute by
  attribute (the CEM oracle's probability of each attribute the species has);
* ``domain``: one of PACS' four styles (:data:`~concept_grounding.world.styles.STYLES`), learnt from stylised renders
  of some held-out species and generated for others ("a photo of a {species} in the style of V*").

Every image is a world render at the world Flux's setting (canonical pose, plain scene,
``image_size`` 32 px), so the truth of each concept is exact. Sample ``k * 200 + c`` is the
``k``-th render of CUB class ``c``; the index ranges below never overlap, so the judges, the
concepts' training and real images and the reference learners' renders are disjoint draws.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from ..judge.conceptbed_spec import TRAIN_BLOCK, VALIDATION_BLOCK
from ..loaders.conceptbed import TASKS
from ..vocabulary import Vocabulary, load_vocabulary
from ..world import BirdWorld, WorldConfig
from ..world.styles import STYLES, stylise

__all__ = ["TASKS", "Concept", "ConceptWorld", "task_species", "family", "export_world_concepts", "TASK_JUDGE"]

#: which judge (:mod:`concept_grounding.judge.conceptbed`) judges each task
TASK_JUDGE = {
    "object": "species",
    "fine_grained_object": "species",
    "fine_grained_attribute": "attributes",
    "domain": "style",
}

#: first render block (``k``) of each use of the world's samples
BLOCKS = {
    "judge_train": TRAIN_BLOCK,
    "judge_val": VALIDATION_BLOCK,
    "concept_train": 1000,
    "concept_real": 2000,
    "exact": 3000,
    "other": 4000,
    "domain_other": 5000,
}
#: the prompt of each task (``{species}`` is filled in for the domain task)
PROMPTS = {
    "object": "a photo of V*",
    "fine_grained_object": "a photo of V*",
    "fine_grained_attribute": "a photo of V*",
    "domain": "a photo of a {species} in the style of V*",
}


def family(class_folder: str) -> str:
    """``family("130.Tree_Sparrow") == "Sparrow"``.

    >>> family("130.Tree_Sparrow"), family("017.Cardinal")
    ('Sparrow', 'Cardinal')
    """
    return class_folder.split(".", 1)[-1].split("_")[-1]


def task_species(vocab: Vocabulary, task: str) -> tuple[str, ...]:
    """The held-out species of an object task, in CUB order (module docstring).

    >>> v = load_vocabulary()
    >>> len(task_species(v, "object")), len(task_species(v, "fine_grained_object"))
    (103, 64)
    """
    learnt = set(vocab.sub_classes)
    families = {family(c) for c in learnt}
    held = [c for c in vocab.classes if c not in learnt]
    if task == "object":
        return tuple(c for c in held if family(c) not in families)
    if task in ("fine_grained_object", "fine_grained_attribute"):
        return tuple(c for c in held if family(c) in families)
    raise ValueError(f"task must be one of {TASKS[1:]}, got {task!r}")


@dataclass(frozen=True)
class Concept:
    """One concept ``V*``: its training images, its held-out real images and its truth.

    Attributes:
        task: one of :data:`TASKS`.
        name: the concept's name (a CUB class folder, or a style).
        label: the oracle's class of the concept (world class index, 0-199 with every class; or style index).
        train: ``(m, H, W, 3)`` uint8 images to learn from.
        real: ``(r, H, W, 3)`` uint8 held-out real images.
        prompts: generation prompts (``V*`` marks the concept).
        species: CUB class folder of an object concept (``""`` for a style).
        style: the style of a domain concept (``""`` otherwise).
    """

    task: str
    name: str
    label: int
    train: np.ndarray = field(repr=False)
    real: np.ndarray = field(repr=False)
    prompts: tuple[str, ...] = ("a photo of V*",)
    species: str = ""
    style: str = ""


@dataclass
class ConceptWorld:
    """The bird world of every CUB class at the world Flux's setting, with ConceptBed's
    concepts drawn from it.

    >>> cw = ConceptWorld(m=2, real=3)
    >>> c = cw.concepts("object", 1)[0]
    >>> c.name, c.train.shape, c.real.shape, c.prompts
    ('001.Black_footed_Albatross', (2, 32, 32, 3), (3, 32, 32, 3), ('a photo of V*',))
    >>> d = cw.concepts("domain", 1)[0]
    >>> d.name, d.label, d.prompts[0]
    ('photo', 0, 'a photo of a Laysan Albatross in the style of V*')
    """

    m: int = 8
    real: int = 16
    image_size: int = 32
    seed: int = 0
    classes: tuple[str, ...] | None = None
    vocab: Vocabulary = field(default_factory=load_vocabulary)

    @property
    def class_names(self) -> tuple[str, ...]:
        """The world's classes: ``classes`` (a subset, for fast tests) or all 200 CUB classes."""
        return tuple(self.classes) if self.classes else tuple(self.vocab.classes)

    def held_out(self, task: str) -> tuple[str, ...]:
        """:func:`task_species` of ``task`` among :attr:`class_names`."""
        return tuple(c for c in task_species(self.vocab, task) if c in self.class_names)

    @cached_property
    def world(self) -> BirdWorld:
        config = WorldConfig(
            image_size=self.image_size, class_names=self.class_names, seed=self.seed, pose="canonical", scene="plain"
        )
        return BirdWorld(config, self.vocab)

    @cached_property
    def exact_world(self) -> BirdWorld:
        """The same species with no per-image deviation: every render shows its class's traits exactly."""
        config = WorldConfig(
            image_size=self.image_size,
            class_names=self.class_names,
            seed=self.seed,
            pose="canonical",
            scene="plain",
            deviation_rate=0.0,
        )
        return BirdWorld(config, self.vocab)

    def renders(self, label: int, count: int, block: str, exact: bool = False, offset: int = 0) -> np.ndarray:
        """``(count, S, S, 3)`` uint8 renders of CUB class ``label`` from ``block`` of :data:`BLOCKS`."""
        world = self.exact_world if exact else self.world
        start = BLOCKS[block] + offset
        return np.stack([world.sample(i).image for i in world.class_indices(label, count, start)])

    def styled(self, species: Sequence[int], style: str, count: int, block: str, offset: int = 0) -> np.ndarray:
        """``(count, S, S, 3)``: renders of ``species`` (cycled) in ``style``, seeded by sample index."""
        out = []
        for k in range(count):
            label = species[k % len(species)]
            index = self.world.class_indices(label, 1, BLOCKS[block] + offset + k // len(species))[0]
            out.append(stylise(self.world.sample(index).image, style, seed=index))
        return np.stack(out)

    def domain_species(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(species the domain concepts are learnt from, species they are generated for):
        alternate held-out ``object`` species."""
        ids = [self.class_names.index(c) for c in self.held_out("object")]
        return tuple(ids[0::2]), tuple(ids[1::2])

    def concepts(self, task: str, count: int) -> list[Concept]:
        """``count`` concepts of ``task``, evenly spread over its species (domain: the first ``count`` styles)."""
        if task == "domain":
            learn, generate = self.domain_species()
            out = []
            for label, style in enumerate(STYLES[:count]):
                species = generate[:4]
                prompts = tuple(PROMPTS["domain"].format(species=self.display(s)) for s in species)
                out.append(
                    Concept(
                        task,
                        style,
                        label,
                        self.styled(learn[: self.m], style, self.m, "concept_train"),
                        self.styled(species, style, self.real, "concept_real"),
                        prompts,
                        style=style,
                    )
                )
            return out
        names = self.held_out(task)
        step = max(1, len(names) // max(count, 1))
        out = []
        for name in names[::step][:count]:
            label = self.class_names.index(name)
            out.append(
                Concept(
                    task,
                    name,
                    label,
                    self.renders(label, self.m, "concept_train"),
                    self.renders(label, self.real, "concept_real"),
                    (PROMPTS[task],),
                    species=name,
                )
            )
        return out

    def display(self, label: int) -> str:
        """The display name of world class ``label`` (``"Laysan Albatross"``)."""
        return self.class_names[label].split(".", 1)[-1].replace("_", " ")

    def domain_species_of(self, concept: Concept) -> tuple[int, ...]:
        """The species a domain concept's prompts name, in prompt order."""
        names = {self.display(i): i for i in self.domain_species()[1]}
        return tuple(names[p.split("a photo of a ", 1)[1].split(" in the style", 1)[0]] for p in concept.prompts)


def export_world_concepts(root: str | Path, concepts: Sequence[Concept]) -> Path:
    """Write ``concepts`` in the layout :func:`concept_grounding.loaders.load_concepts` reads;
    returns ``root / "concepts.jsonl"``."""
    from PIL import Image

    root = Path(root)
    lines = []
    for c in concepts:
        folder = root / c.task / c.name
        for split, images in (("train", c.train), ("real", c.real)):
            (folder / split).mkdir(parents=True, exist_ok=True)
            for i, image in enumerate(images):
                Image.fromarray(image).save(folder / split / f"{i:04d}.png")
        lines.append(
            json.dumps(
                {
                    "task": c.task,
                    "concept": c.name,
                    "label": c.label,
                    "species": c.species,
                    "style": c.style,
                    "prompt": c.prompts[0],
                    "prompts": list(c.prompts),
                    "train": len(c.train),
                    "real": len(c.real),
                }
            )
        )
    index = root / "concepts.jsonl"
    index.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return index
