"""ConceptBed on concept folders: real concepts (``conceptbed --concepts DIR``), not the world's.

A folder in our layout (:func:`~concept_grounding.loaders.load_concepts`) or in ConceptBed's
published one (:func:`~concept_grounding.loaders.load_conceptbed_layout`: ImageNet, PACS, CUB
folders) becomes the run's concepts. Every image is centre-cropped to a square and resized to
``size`` (the generator's side). As ConceptBed trains its oracles on the concept datasets
(Sec. 3.2, Table 6), each task's **oracle** is a classifier over that task's concepts trained on
their training images and the even-numbered half of their real images; the odd-numbered half is
held out: the oracle is validated on it (a CCD from one below 95 % is refused) and it is the
concept's real reference in every CCD. Tasks with no class-level truth to judge from a folder
(``fine_grained_attribute``, ``composition``) and the world-only reference learners (``another
species``, ``exact``) are refused in one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import UsageError
from ..judge.conceptbed import ConceptBedJudge, ConceptBedJudgeSpec, train_classifier
from .concepts import Concept

__all__ = ["FOLDER_TASKS", "FOLDER_LEARNERS_REFUSED", "folder_concepts", "folder_oracle", "relabel"]

#: The tasks a concept folder can be judged on.
FOLDER_TASKS = ("domain", "object", "fine_grained_object")
#: Reference learners that draw from the world's truth (none for a folder).
FOLDER_LEARNERS_REFUSED = ("another species", "exact")


def _square(image: object, size: int) -> np.ndarray:
    """``(size, size, 3)`` uint8: the image's centre square, resized (bicubic)."""
    from PIL import Image

    im = image.convert("RGB") if hasattr(image, "convert") else Image.fromarray(np.asarray(image)).convert("RGB")
    side = min(im.size)
    left, top = (im.width - side) // 2, (im.height - side) // 2
    return np.asarray(im.crop((left, top, left + side, top + side)).resize((size, size), Image.BICUBIC))


def folder_concepts(root: str | Path, m: int, size: int, tasks: Sequence[str]) -> dict[str, list[Concept]]:
    """The concepts of ``root`` per task in ``tasks`` (module docstring), every real image kept
    (:func:`folder_oracle` splits them)."""
    from ..loaders import load_conceptbed_layout, load_concepts

    bad = [t for t in tasks if t not in FOLDER_TASKS]
    if bad:
        raise UsageError(
            f"tasks {bad} need the world's truth; a concept folder is judged on {FOLDER_TASKS}", argument="--tasks"
        )
    root = Path(root)
    data = load_concepts(root, m) if (root / "concepts.jsonl").is_file() else load_conceptbed_layout(root, m)
    grouped: dict[tuple[str, str], dict] = {}
    for row in data:
        entry = grouped.setdefault(
            (row["task"], row["concept"]),
            {
                "label": row["label"],
                "prompt": row["prompt"],
                "train": [],
                "real": [],
                "style": row["style"],
                "species": row["species"],
            },
        )
        entry[row["split"]].append(_square(row["image"], size))
    out: dict[str, list[Concept]] = {t: [] for t in tasks}
    for (task, name), e in sorted(grouped.items(), key=lambda kv: (kv[0][0], kv[1]["label"])):
        if task not in out:
            continue
        if len(e["real"]) < 2:
            raise UsageError(
                f"{root / task / name}: at least 2 real images are needed (one to train the oracle, one held out)",
                argument="--concepts",
            )
        prompt = e["prompt"] or "a photo of V*"
        out[task].append(
            Concept(
                task,
                name,
                int(e["label"]),
                np.stack(e["train"]),
                np.stack(e["real"]),
                (prompt,),
                e["species"],
                e["style"],
            )
        )
    empty = [t for t, cs in out.items() if len(cs) < 2]
    if empty:
        raise UsageError(
            f"{root}: tasks {empty} have fewer than 2 concepts (an oracle needs two classes)", argument="--concepts"
        )
    return out


def folder_oracle(
    task: str, concepts: list[Concept], capacity: str, epochs: int, seed: int
) -> tuple[ConceptBedJudge, dict]:
    """The task's oracle over ``concepts`` (module docstring) and each concept's held-out real
    images (name -> ``(r, S, S, 3)``). The oracle's ``accuracy`` is measured on those."""
    x, y, held = [], [], {}
    for c in concepts:
        fit_real, held_out = c.real[0::2], c.real[1::2]
        x += [c.train, fit_real]
        y += [np.full(len(c.train) + len(fit_real), c.label)]
        held[c.name] = held_out
    labels = sorted({c.label for c in concepts})
    remap = {label: i for i, label in enumerate(labels)}
    spec = ConceptBedJudgeSpec(
        "style" if task == "domain" else "species", capacity, 0, epochs, seed, int(concepts[0].train.shape[1])
    )
    images, targets = np.concatenate(x), np.array([remap[int(v)] for v in np.concatenate(y)])
    model = train_classifier(spec, images, targets, len(labels), progress=False)
    names = tuple(c.name for c in sorted(concepts, key=lambda c: c.label))
    oracle = ConceptBedJudge(spec, model, 0.0, names)
    vx = np.concatenate([held[c.name] for c in concepts])
    vy = np.concatenate([np.full(len(held[c.name]), remap[c.label]) for c in concepts])
    oracle.accuracy = float((oracle.scores(vx).argmax(1) == vy).mean())
    return oracle, held


def relabel(concepts: list[Concept], held: dict[str, np.ndarray]) -> list[Concept]:
    """``concepts`` with labels ``0..K-1`` in the oracle's order and ``real`` the held-out half."""
    from dataclasses import replace

    order = {c.label: i for i, c in enumerate(sorted(concepts, key=lambda c: c.label))}
    return [replace(c, label=order[c.label], real=held[c.name]) for c in concepts]
