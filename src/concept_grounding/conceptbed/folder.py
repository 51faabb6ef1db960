"""ConceptBed on concept folders: real concepts (``conceptbed --concept-folder DIR``), not the world's.

A folder in our layout or ConceptBed's published one (imagenet/pacs/cub) becomes the run's concepts,
each image centre-cropped and resized to ``--image-size``. As ConceptBed trains its oracles on the
concept datasets (Sec. 3.2, Table 6), each task's oracle is trained on its concepts' training images
and half their real images and validated on the other half, which is then every CCD's real reference.
:func:`check_concept_folder` checks everything before any training. Manual: docs/guide/conceptbed.md,
"Running on a concept folder".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..errors import UsageError
from ..judge.conceptbed import ConceptBedJudge, ConceptBedJudgeSpec, train_classifier
from ..judge.conceptbed_spec import CONCEPTBED_BAR
from ..loaders.conceptbed import PUBLISHED_TASKS, image_files, published_root
from ..loaders.errors import DatasetFormatError
from ..loaders.ratings import REFERENCES
from .concepts import Concept

__all__ = [
    "FOLDER_TASKS",
    "FOLDER_LEARNERS_REFUSED",
    "ORACLE_DOUBLINGS",
    "MIN_REAL",
    "FolderConcept",
    "scan_concept_folder",
    "folder_tasks",
    "check_concept_folder",
    "folder_concepts",
    "folder_oracle",
    "relabel",
]

logger = logging.getLogger(__name__)

#: The tasks a concept folder can be judged on.
FOLDER_TASKS = ("domain", "object", "fine_grained_object")
#: Reference learners that draw from the world's truth (none for a folder).
FOLDER_LEARNERS_REFUSED = ("another species", "exact")
#: A folder's oracle trains ``--oracle-epochs`` epochs, then twice as many, ... this many times more.
ORACLE_DOUBLINGS = 3
#: Real images a concept needs: one trains its oracle, one is held out.
MIN_REAL = 2


@dataclass(frozen=True)
class FolderConcept:
    """One concept of a folder, as found on disk (no image decoded).

    Attributes:
        task: its task (:data:`FOLDER_TASKS` or another of the layout's).
        name: its folder's name.
        path: the folder that holds its training images (published layout: all its images).
        real_path: the folder of its real images (published layout: ``path``).
        train: training images found (published layout: every image, the first ``--m`` train).
        real: real images found (published layout: ``0``; the images after the first ``--m``).
        published: from ConceptBed's published layout (one pool of images split by ``--m``).
    """

    task: str
    name: str
    path: Path
    real_path: Path
    train: int
    real: int
    published: bool

    def split(self, m: int) -> tuple[int, int]:
        """(training, real) images this concept gives with ``--m m``."""
        if self.published:
            return min(self.train, m), max(self.train - m, 0)
        return min(self.train, m), self.real


def _ours(root: Path) -> tuple[dict[str, list[FolderConcept]], dict[str, Path]]:
    """Our layout's concepts per task (lines the loader cannot read are left to it)."""
    index = root / "concepts.jsonl"
    found: dict[str, list[FolderConcept]] = {}
    for line in index.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
            task, name = str(entry["task"]), str(entry["concept"])
        except (ValueError, KeyError, TypeError):
            continue
        folder = root / task / name
        train, real = len(image_files(folder / "train")), len(image_files(folder / "real"))
        concept = FolderConcept(task, name, folder / "train", folder / "real", train, real, False)
        found.setdefault(task, []).append(concept)
    return found, dict.fromkeys(found, index)


def _published(root: Path) -> tuple[dict[str, list[FolderConcept]], dict[str, Path]]:
    """ConceptBed's published layout's concepts per task, and each task's folder."""
    found: dict[str, list[FolderConcept]] = {}
    where: dict[str, Path] = {}
    for name, task in PUBLISHED_TASKS.items():
        base = published_root(root, name)
        if base is None:
            continue
        where[task] = base
        for folder in sorted(d for d in base.iterdir() if d.is_dir()):
            parts = [c for c in sorted(folder.iterdir()) if c.is_dir()] if name == "pacs" else [folder]
            count = sum(len(image_files(p)) for p in parts)
            found.setdefault(task, []).append(FolderConcept(task, folder.name, folder, folder, count, 0, True))
    return found, where


def scan_concept_folder(root: str | Path) -> tuple[dict[str, list[FolderConcept]], dict[str, Path]]:
    """(concepts per task, the file or folder that lists each task's concepts) of ``root``,
    reading no image.

    Raises:
        UsageError: ``root`` is no folder, or holds neither layout (naming ``--concept-folder``).
    """
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"no such folder: {root}", argument="--concept-folder")
    if (root / "concepts.jsonl").is_file():
        return _ours(root)
    found, where = _published(root)
    if not where:
        raise UsageError(
            f"{root} holds neither concepts.jsonl (our layout) nor an imagenet/, pacs/ or cub/ folder "
            "(ConceptBed's published layout)",
            argument="--concept-folder",
        )
    return found, where


def folder_tasks(root: str | Path) -> tuple[str, ...]:
    """The tasks of :data:`FOLDER_TASKS` that ``root`` holds concepts of (a run's default ``--tasks``).

    Raises:
        UsageError: ``root`` holds no layout, or no concept of those tasks (naming ``--concept-folder``).
    """
    found, _ = scan_concept_folder(root)
    tasks = tuple(t for t in FOLDER_TASKS if found.get(t))
    if not tasks:
        raise UsageError(
            f"{root} holds no concept of the tasks a folder is judged on {list(FOLDER_TASKS)}",
            argument="--concept-folder",
        )
    return tasks


def _check_flags(tasks: Sequence[str], learners: Sequence[str], found: Sequence[str]) -> None:
    """Refuse the learners and tasks a folder cannot give (one line each); ``found``: the folder's tasks."""
    world_only = [name for name in learners if name in FOLDER_LEARNERS_REFUSED]
    if world_only:
        raise UsageError(
            f"learners {world_only} draw from the world's truth; a concept folder has none", argument="--learners"
        )
    bad = [t for t in tasks if t not in FOLDER_TASKS]
    if bad:
        raise UsageError(
            f"tasks {bad} need the world's truth (compositions: its exact drawings); "
            f"a concept folder is judged on {list(FOLDER_TASKS)}",
            argument="--tasks",
            hint=f"this folder holds {[t for t in FOLDER_TASKS if t in found]}",
        )


def _check_image_size(size: int, learners: Sequence[str], model: str | None) -> None:
    """Refuse an ``--image-size`` the diffusers learners' Flux cannot generate: its sides must be
    multiples of the VAE's downsampling times Flux's 2 x 2 packing."""
    from .learners import FLUX_LEARNERS

    if not any(name in FLUX_LEARNERS for name in learners):
        return
    from ..learners.config import WORLD_MODEL, model_folder

    folder = model_folder(model or WORLD_MODEL)
    vae = json.loads((folder / "vae" / "config.json").read_text(encoding="utf-8"))
    multiple = 2 ** len(vae["block_out_channels"])
    if size % multiple:
        raise UsageError(
            f"{size} px: the learners' Flux ({folder}) draws sides that are multiples of {multiple}",
            argument="--image-size",
            hint=f"use {max(multiple, size - size % multiple)} or {size + multiple - size % multiple}",
        )


def _existing(path: Path) -> Path:
    """``path``, or its nearest folder above that exists (what an error message can point at)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_counts(concept: FolderConcept, m: int, real: int) -> None:
    """Refuse a concept with too few training, real or reference images for ``--m`` and ``--real``."""
    train, found = concept.split(m)
    if train < m:
        raise UsageError(
            f"{_existing(concept.path)}: {concept.train} image(s), fewer than --m {m} training images",
            argument="--m",
            hint="lower --m or add images",
        )
    if found < MIN_REAL and concept.published:
        raise UsageError(
            f"{concept.path}: {concept.train} images leave {found} real image(s) after the --m {m} training "
            f"images; {MIN_REAL} are needed (one trains the oracle, one is held out)",
            argument="--m",
            hint="lower --m or add images",
        )
    if found < MIN_REAL:
        raise UsageError(
            f"{_existing(concept.real_path)}: {found} real image(s) in {concept.real_path.name}/; {MIN_REAL} are "
            "needed (one trains the oracle, one is held out)",
            argument="--concept-folder",
        )
    held = min(found, 2 * real) // 2
    if held + m < REFERENCES:
        raise UsageError(
            f"{_existing(concept.real_path)}: a rating item shows {REFERENCES} real images of the concept; "
            f"{held} held-out real and {m} training image(s) are fewer",
            argument="--real" if held < found // 2 else "--m",
            hint="raise it or add images",
        )


def check_concept_folder(
    root: str | Path,
    *,
    m: int,
    real: int,
    tasks: Sequence[str],
    learners: Sequence[str],
    image_size: int = 32,
    model: str | None = None,
) -> dict[str, list[FolderConcept]]:
    """Every check of a ``--concept-folder`` run that reads no pixel, before anything trains: its
    layout, the learners and tasks a folder can give, at least two concepts per task (its oracle's
    classes), each concept's counts given ``--m`` and ``--real``, and an ``--image-size`` the
    learners' Flux (``model``, default the world Flux) can draw. The images' readability is checked
    by the loaders (:func:`folder_concepts`), also before training; their sizes may differ (each is
    centre-cropped and resized to ``--image-size``).

    Returns:
        the asked tasks' concepts (:class:`FolderConcept`).

    Raises:
        UsageError: one line naming the flag and an existing path.
    """
    found, where = scan_concept_folder(root)
    _check_flags(tasks, learners, list(found))
    _check_image_size(image_size, learners, model)
    for task in tasks:
        concepts = found.get(task, [])
        if len(concepts) < 2:
            listed = where.get(task, Path(root))
            raise UsageError(
                f"{listed}: {len(concepts)} {task} concept(s) {[c.name for c in concepts]}; "
                "its oracle needs at least 2 (one class per concept)",
                argument="--concept-folder",
                hint=f"add concepts, or choose --tasks among {[t for t in FOLDER_TASKS if len(found.get(t, [])) > 1]}",
            )
        for concept in concepts:
            _check_counts(concept, m, real)
    return {t: found[t] for t in tasks}


def _square(path: str, size: int) -> np.ndarray:
    """``(size, size, 3)`` uint8: the centre square of the image at ``path``, resized (bicubic)."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            im = image.convert("RGB")
    except OSError as error:  # a header that opens over pixels that do not decode
        raise UsageError(f"not a readable image ({error})", argument="--concept-folder", file=path) from None
    side = min(im.size)
    left, top = (im.width - side) // 2, (im.height - side) // 2
    return np.asarray(im.crop((left, top, left + side, top + side)).resize((size, size), Image.BICUBIC))


def folder_concepts(
    root: str | Path, m: int, size: int, tasks: Sequence[str], real: int | None = None
) -> dict[str, list[Concept]]:
    """The concepts of ``root`` per task in ``tasks`` (module docstring): ``m`` training images and at
    most ``2 * real`` real images each (every one when ``real`` is ``None``; :func:`folder_oracle`
    splits them). Check the folder with :func:`check_concept_folder` first."""
    from datasets import Image

    from ..loaders import load_conceptbed_layout, load_concepts

    root = Path(root)
    try:
        # every image is cropped and resized to ``size`` (:func:`_square`): a concept may mix sizes
        if (root / "concepts.jsonl").is_file():
            data = load_concepts(root, m, same_size=False)
        else:
            data = load_conceptbed_layout(root, m, same_size=False)
    except DatasetFormatError as error:
        raise UsageError(error.reason, argument="--concept-folder", file=error.file, line=error.line) from None
    grouped: dict[tuple[str, str], dict] = {}
    for row in data.cast_column("image", Image(decode=False)):  # decode only the images kept
        entry = grouped.setdefault(
            (row["task"], row["concept"]),
            {"label": row["label"], "prompts": {}, "train": [], "real": [], "style": row["style"]},
        )
        entry["species"] = row["species"]
        entry["prompts"].setdefault(row["prompt"] or "a photo of V*", None)
        if real is None or row["split"] == "train" or len(entry["real"]) < 2 * real:
            entry[row["split"]].append(_square(row["image"]["path"], size))
    out: dict[str, list[Concept]] = {t: [] for t in tasks}
    for (task, name), e in sorted(grouped.items(), key=lambda kv: (kv[0][0], kv[1]["label"])):
        if task in out:
            train, reals = np.stack(e["train"]), np.stack(e["real"])
            out[task].append(
                Concept(task, name, int(e["label"]), train, reals, tuple(e["prompts"]), e["species"], e["style"])
            )
    return out


def _oracle_data(concepts: list[Concept]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
    """(training images, their classes, held-out images, their classes, held-out images per concept):
    the even-numbered real images train the oracle with the training images, the odd-numbered are held out."""
    remap = {label: i for i, label in enumerate(sorted({c.label for c in concepts}))}
    x, y, held = [], [], {}
    for c in concepts:
        x += [c.train, c.real[0::2]]
        y.append(np.full(len(c.train) + len(c.real[0::2]), remap[c.label]))
        held[c.name] = c.real[1::2]
    vx = np.concatenate([held[c.name] for c in concepts])
    vy = np.concatenate([np.full(len(held[c.name]), remap[c.label]) for c in concepts])
    return np.concatenate(x), np.concatenate(y), vx, vy, held


def folder_oracle(
    task: str, concepts: list[Concept], capacity: str, epochs: int, seed: int, where: str | Path = "the folder"
) -> tuple[ConceptBedJudge, dict]:
    """The task's oracle over ``concepts`` (module docstring) and each concept's held-out real
    images (name -> ``(r, S, S, 3)``). It trains ``epochs`` epochs, then twice as many, up to
    :data:`ORACLE_DOUBLINGS` times, and keeps the first that reaches
    :data:`~concept_grounding.judge.conceptbed_spec.CONCEPTBED_BAR` on the held-out images (its
    ``accuracy``); each schedule trains from scratch, so a run is reproducible from ``epochs``.

    Raises:
        UsageError: no schedule reaches the bar: one line with what each reached and what to change.
    """
    images, targets, vx, vy, held = _oracle_data(concepts)
    names = tuple(c.name for c in sorted(concepts, key=lambda c: c.label))
    kind = "style" if task == "domain" else "species"
    reached = []
    for n in (epochs * 2**k for k in range(ORACLE_DOUBLINGS + 1)):
        spec = ConceptBedJudgeSpec(kind, capacity, 0, n, seed, int(concepts[0].train.shape[1]))
        oracle = ConceptBedJudge(spec, train_classifier(spec, images, targets, len(names), progress=False), 0.0, names)
        oracle.accuracy = float((oracle.scores(vx).argmax(1) == vy).mean())
        reached.append(f"{oracle.accuracy:.1%} at {n}")
        logger.info(
            "%s oracle (%s): %.1f%% on %d held-out real images after %d epochs",
            task,
            capacity,
            100 * oracle.accuracy,
            len(vx),
            n,
        )
        if oracle.accuracy >= CONCEPTBED_BAR:
            return oracle, held
    raise UsageError(
        f"the {task} oracle ({capacity}) reaches {', '.join(reached)} epochs on {len(vx)} held-out real images "
        f"of {where}, below the {CONCEPTBED_BAR:.0%} bar: its CCD is refused",
        argument="--oracle-epochs",
        hint=f"raise it (tried up to {epochs * 2**ORACLE_DOUBLINGS} epochs), try --capacity large, or add real "
        "images to each concept under --concept-folder",
    )


def relabel(concepts: list[Concept], held: dict[str, np.ndarray]) -> list[Concept]:
    """``concepts`` with labels ``0..K-1`` in the oracle's order and ``real`` the held-out half."""
    order = {c.label: i for i, c in enumerate(sorted(concepts, key=lambda c: c.label))}
    return [replace(c, label=order[c.label], real=held[c.name]) for c in concepts]
