"""ConceptBed concept folders (Patel et al., 2023, Sec. 3-4) as one ``datasets.Dataset``.

A *concept* is ``m`` training images (what a learner learns ``V*`` from) plus held-out real images
of it (what the oracle compares generated images with). Two layouts, ours (:func:`load_concepts`) and
ConceptBed's published one (:func:`load_conceptbed_layout`), read into the same rows
(:data:`CONCEPT_COLUMNS`); each refuses a short concept, an unreadable image, a mixed-size concept (unless
the reader resizes), an unknown task or a missing
layout, naming the folder or file. The layouts: docs/guide/conceptbed.md, "Concept folders".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import DatasetFormatError

if TYPE_CHECKING:
    import datasets

__all__ = [
    "CONCEPT_COLUMNS",
    "TASKS",
    "PUBLISHED_TASKS",
    "load_concepts",
    "load_conceptbed_layout",
    "concept_features",
    "image_files",
    "published_root",
]

#: ConceptBed's concept-alignment tasks on the world (ConceptBed Sec. 4): Table 1's columns.
TASKS: tuple[str, ...] = ("domain", "object", "fine_grained_object", "fine_grained_attribute")
#: the rows' columns
CONCEPT_COLUMNS: tuple[str, ...] = ("task", "concept", "split", "image", "label", "species", "style", "prompt")
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".webp"}
#: ConceptBed's published folder -> task
PUBLISHED_TASKS = {"imagenet": "object", "pacs": "domain", "cub": "fine_grained_object"}


def concept_features() -> datasets.Features:
    """The rows' ``datasets.Features``."""
    import datasets

    text = datasets.Value("string")
    return datasets.Features(
        {
            "task": text,
            "concept": text,
            "split": text,
            "image": datasets.Image(),
            "label": datasets.Value("int64"),
            "species": text,
            "style": text,
            "prompt": text,
        }
    )


def image_files(folder: Path) -> list[Path]:
    """The image files directly in ``folder``, sorted by name (``[]`` when it is not a folder)."""
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES) if folder.is_dir() else []


def _check_sizes(files: Sequence[Path], concept: Path, same_size: bool = True) -> None:
    """Refuse an unreadable image and, with ``same_size``, a concept of mixed image sizes (naming the file)."""
    from PIL import Image

    sizes: dict[tuple[int, int], Path] = {}
    for path in files:
        try:
            with Image.open(path) as im:
                size = im.size
        except OSError as error:
            raise DatasetFormatError(f"not a readable image ({error})", file=path) from None
        sizes.setdefault(size, path)
        if same_size and len(sizes) > 1:
            (a, pa), (b, _) = list(sizes.items())[:2]
            raise DatasetFormatError(
                f"images of mixed sizes in concept {concept.name!r}: {b[0]}x{b[1]} here, "
                f"{a[0]}x{a[1]} in {pa.name}; resize them to one size",
                file=path,
            )


def _check_counts(train: Sequence[Path], real: Sequence[Path], m: int, folder: Path) -> None:
    if len(train) < m:
        raise DatasetFormatError(f"concept has {len(train)} training image(s), fewer than m = {m}", file=folder)
    if not real:
        raise DatasetFormatError("concept has no held-out real image", file=folder)


def _rows(
    task: str,
    concept: str,
    label: int,
    train: Sequence[Path],
    real: Sequence[Path],
    species: str = "",
    style: str = "",
    prompt: str = "",
) -> list[dict]:
    """One row per image; a ``{cls}`` in ``prompt`` becomes the name of the image's class folder."""
    return [
        {
            "task": task,
            "concept": concept,
            "split": split,
            "image": str(p),
            "label": int(label),
            "species": species,
            "style": style,
            "prompt": prompt.replace("{cls}", p.parent.name.replace("_", " ")),
        }
        for split, files in (("train", train), ("real", real))
        for p in files
    ]


def _dataset(rows: list[dict]) -> datasets.Dataset:
    import datasets

    return datasets.Dataset.from_dict({c: [r[c] for r in rows] for c in CONCEPT_COLUMNS}, features=concept_features())


def _m(m: int) -> int:
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise DatasetFormatError(f"m (training images per concept) must be an int >= 1, got {m!r}")
    return m


def load_concepts(
    root: str | Path, m: int = 8, tasks: Sequence[str] | None = None, *, same_size: bool = True
) -> datasets.Dataset:
    """Read our layout (docs/guide/conceptbed.md) into one Dataset; ``tasks`` keeps those tasks only.

    Each concept's first ``m`` training images are kept (the folder may hold more). ``same_size=False``
    accepts a concept of mixed image sizes (for a reader that resizes every image, as a
    ``conceptbed --concept-folder`` run does); an unreadable image is refused either way.
    """
    m, root = _m(m), Path(root)
    index = root / "concepts.jsonl"
    if not index.is_file():
        raise DatasetFormatError(
            "no concepts.jsonl: not a concept folder (write one with "
            "concept_grounding.conceptbed.export_world_concepts)",
            file=root,
        )
    unknown = sorted(set(tasks or ()) - set(TASKS))
    if unknown:
        raise DatasetFormatError(f"unknown task(s) {unknown}; choose from {TASKS}")
    rows: list[dict] = []
    for line_no, line in enumerate(index.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            task, concept, label = entry["task"], entry["concept"], int(entry["label"])
        except (ValueError, KeyError, TypeError) as error:
            raise DatasetFormatError(f"not a concept record ({error})", file=index, line=line_no) from None
        if task not in TASKS:
            raise DatasetFormatError(f"unknown task {task!r}; choose from {TASKS}", file=index, line=line_no)
        if tasks is not None and task not in tasks:
            continue
        folder = root / task / concept
        train, real = image_files(folder / "train"), image_files(folder / "real")
        _check_counts(train, real, m, folder)
        _check_sizes([*train[:m], *real], folder, same_size)
        rows += _rows(
            task,
            concept,
            label,
            train[:m],
            real,
            entry.get("species", ""),
            entry.get("style", ""),
            entry.get("prompt", ""),
        )
    if not rows:
        raise DatasetFormatError("no concept of the asked tasks", file=index)
    return _dataset(rows)


def published_root(root: Path, name: str) -> Path | None:
    """The folder ``name`` (a key of :data:`PUBLISHED_TASKS`, any capitalisation) under ``root``, if there."""
    for child in sorted(root.iterdir()) if root.is_dir() else []:
        if child.is_dir() and child.name.lower() == name:
            return child
    return None


def load_conceptbed_layout(root: str | Path, m: int = 8, *, same_size: bool = True) -> datasets.Dataset:
    """Read ConceptBed's published layout (docs/guide/conceptbed.md): ``imagenet/``, ``pacs/`` and
    ``cub/`` under ``root``, each optional, at least one present (``same_size``: as :func:`load_concepts`)."""
    m, root = _m(m), Path(root)
    rows: list[dict] = []
    for name, task in PUBLISHED_TASKS.items():
        base = published_root(root, name)
        if base is None:
            continue
        if name == "pacs":
            concepts = {
                d.name: [c for c in sorted(d.iterdir()) if c.is_dir()] for d in sorted(base.iterdir()) if d.is_dir()
            }
        else:
            concepts = {d.name: [d] for d in sorted(base.iterdir()) if d.is_dir()}
        for label, (concept, folders) in enumerate(sorted(concepts.items())):
            files = [p for f in folders for p in image_files(f)]
            _check_counts(files[:m], files[m:], m, base / concept)
            _check_sizes(files, base / concept, same_size)
            prompt = "a photo of a {cls} in the style of V*" if task == "domain" else "a photo of V*"
            rows += _rows(
                task,
                concept,
                label,
                files[:m],
                files[m:],
                style=concept if task == "domain" else "",
                species=concept if name == "cub" else "",
                prompt=prompt,
            )
    if not rows:
        raise DatasetFormatError("no imagenet/, pacs/ or cub/ folder of concepts (ConceptBed's layout)", file=root)
    return _dataset(rows)
