"""``conceptbed --export-concepts DIR``: each task's concepts written for training with another tool.

``DIR/<task>/<concept>/train/*.png`` and ``concept.json`` (placeholder, instance / class / evaluation prompts, what
the concept is); nothing is trained. docs/conceptbed/bring_your_own.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..jobs import JobResult
from .byo_weights import PLACEHOLDER
from .concepts import Concept, ConceptWorld
from .config import ConceptBedConfig, concept_tasks
from .job import run_conceptbed

__all__ = ["CLASS_PROMPT", "ExportedConcepts", "concept_record", "export_concepts", "export_or_run"]

#: the class prompt of the world's concepts (DreamBooth's prior; the learners' ``class_prompt``)
CLASS_PROMPT = "a photo of a bird"


def concept_record(c: Concept, display: str, token: str = PLACEHOLDER) -> dict[str, Any]:
    """``concept.json`` of ``c``: what another tool needs to learn it and what the run will prompt.

    >>> import numpy as np
    >>> c = Concept("object", "001.Black_footed_Albatross", 0, np.zeros((2, 4, 4, 3), np.uint8),
    ...             np.zeros((1, 4, 4, 3), np.uint8), species="001.Black_footed_Albatross")
    >>> r = concept_record(c, "Black footed Albatross")
    >>> r["instance_prompt"], r["prompts"], r["train_images"]
    ('a photo of <v*>', ['a photo of <v*>'], 2)
    """
    instance = "a photo of a bird in the style of V*" if c.task == "domain" else "a photo of V*"
    return {
        "task": c.task,
        "concept": c.name,
        "what": display,
        "label": int(c.label),
        "species": c.species,
        "style": c.style,
        "placeholder": token,
        "instance_prompt": instance.replace("V*", token),
        "class_prompt": CLASS_PROMPT,
        "prompts": [p.replace("V*", token) for p in c.prompts],
        "train_images": len(c.train),
        "size": int(c.train.shape[1]),
    }


def _display(c: Concept) -> str:
    """What the concept is in words: the species (``"Black footed Albatross"``), the style, or the folder name."""
    if c.species:
        return c.species.split(".", 1)[-1].replace("_", " ")
    return c.style or c.name


def export_concepts(root: str | Path, concepts: Mapping[str, Sequence[Concept]], token: str = PLACEHOLDER) -> int:
    """Write ``concepts`` under ``root`` (module docstring); returns how many concepts were written."""
    from PIL import Image

    root = Path(root)
    if root.exists() and not root.is_dir():
        raise UsageError("exists and is not a folder", argument="--export-concepts", file=root)
    count = 0
    for task, items in concepts.items():
        for c in items:
            folder = root / task / c.name
            (folder / "train").mkdir(parents=True, exist_ok=True)
            for i, image in enumerate(c.train):
                Image.fromarray(image).save(folder / "train" / f"{i:04d}.png")
            record = concept_record(c, _display(c), token)
            (folder / "concept.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
            count += 1
    return count


@dataclass
class ExportedConcepts:
    """The result of ``--export-concepts``: ``save`` writes the concepts under ``root`` (``--out`` gets nothing)."""

    root: Path
    concepts: dict[str, list[Concept]]
    line: str = ""

    def save(self, out: str | Path) -> Path:
        count = export_concepts(self.root, self.concepts)
        sizes = sorted({len(c.train) for cs in self.concepts.values() for c in cs})
        self.line = (
            f"exported {count} concepts of {', '.join(self.concepts)} ({'/'.join(map(str, sizes))} training images "
            f"each) to {self.root}/<task>/<concept>/train/*.png with concept.json; nothing was trained"
        )
        return self.root


def export_or_run(config: ConceptBedConfig) -> JobResult:
    """The ``conceptbed`` job: :class:`ExportedConcepts` of the run's concepts with ``--export-concepts`` (the
    concepts the same flags score), else :func:`~.job.run_conceptbed`."""
    if config.export_concepts is None:
        return run_conceptbed(config)
    if config.generated or config.learned:
        raise UsageError(
            "exports the concepts and stops; score --generated / --learned in a second run",
            argument="--export-concepts",
        )
    config = config.effective()
    tasks = concept_tasks(config)
    if config.concept_folder:
        from .folder import folder_concepts

        found = folder_concepts(config.concept_folder, config.m, config.image_size, tasks)
        concepts = {t: items[: config.concepts] for t, items in found.items()}
    else:
        cw = ConceptWorld(m=config.m, real=config.real, seed=config.seed, classes=config.classes)
        concepts = {t: cw.concepts(t, config.concepts) for t in tasks}
    return ExportedConcepts(Path(config.export_concepts), concepts)
