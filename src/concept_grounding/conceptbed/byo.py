"""Bring your own learner: images or weights made elsewhere scored as one row of ConceptBed's tables.

``--generated DIR`` reads ``DIR/<task>/<concept>/*.png`` (:class:`GeneratedLearner`); ``--learned DIR`` loads the
files diffusers' training scripts write (:mod:`.byo_weights`). Every folder is checked by :func:`check_source`
before any oracle trains. docs/conceptbed/bring_your_own.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError, suggest
from ..loaders.conceptbed import TASKS
from .concepts import Concept
from .learners import LEARNER_NAMES, Learner

__all__ = [
    "IMAGE_SUFFIXES",
    "ByoSource",
    "GeneratedLearner",
    "byo_source",
    "check_source",
    "learner_factory",
    "learner_folder",
    "read_images",
    "save_generated",
]

#: the files a generated concept folder may hold (every other file is refused)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


@dataclass(frozen=True)
class ByoSource:
    """The row a user brings: ``name`` in every table, its ``kind`` (``"generated"`` or ``"learned"``) and ``root``.

    Attributes:
        checked: per ``(task, concept)``, what :func:`check_source` found (image paths, or the weights' files).
    """

    name: str
    kind: str
    root: Path
    checked: dict[tuple[str, str], Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def flag(self) -> str:
        return f"--{self.kind}"


def byo_source(
    generated: str | None, learned: str | None, name: str | None, learners: Sequence[str]
) -> ByoSource | None:
    """The source of ``--generated`` / ``--learned`` with its ``--name``, or ``None``; one line on a bad combination.

    >>> byo_source("gen", None, "IP-Adapter", ["Original"]).flag
    '--generated'
    >>> byo_source(None, None, None, ["Original"]) is None
    True
    """
    if generated and learned:
        raise UsageError("give one of --generated and --learned (one row a run)", argument="--learned")
    root = generated or learned
    if root is None:
        if name is not None:
            raise UsageError("names the row of --generated DIR or --learned DIR; give one of them", argument="--name")
        return None
    if not name:
        raise UsageError(f"the row of {root} needs a name in the tables; give --name NAME", argument="--name")
    if name in LEARNER_NAMES or name in learners:
        raise UsageError(f"{name!r} is already a learner's row; choose another name", argument="--name")
    return ByoSource(name, "generated" if generated else "learned", Path(root))


def learner_folder(name: str) -> str:
    """The folder name of a learner's row (``OUT/generated/<folder>``): spaces become ``_``.

    >>> learner_folder("Textual Inversion")
    'Textual_Inversion'
    """
    return name.replace(" ", "_")


def _listed(folder: Path, flag: str) -> list[Path]:
    """The entries of ``folder`` but hidden ones, sorted; one line when it is no folder."""
    if not folder.is_dir():
        raise UsageError("no such folder", argument=flag, file=folder)
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def _check_layout(
    source: ByoSource, concepts: Mapping[str, Sequence[Concept]], known: Mapping[str, Sequence[str]]
) -> None:
    """Every task and concept of the run has its folder; no folder names a task or concept the export never wrote."""
    flag = source.flag
    for entry in _listed(source.root, flag):
        if entry.is_dir() and entry.name not in TASKS:
            raise UsageError(f"not a task{suggest(entry.name, TASKS)}; tasks are {TASKS}", argument=flag, file=entry)
    for task, items in concepts.items():
        task_dir = source.root / task
        if not task_dir.is_dir():
            raise UsageError(f"missing: the run scores task {task!r}", argument=flag, file=task_dir)
        names = list(known.get(task, ()))
        for entry in _listed(task_dir, flag):
            if entry.name not in names:
                raise UsageError(
                    f"not a concept of task {task!r} (the export never wrote it){suggest(entry.name, names)}",
                    argument=flag,
                    file=entry,
                )
        for c in items:
            if not (task_dir / c.name).is_dir():
                raise UsageError(f"missing: the run scores concept {c.name!r}", argument=flag, file=task_dir / c.name)


def _image_paths(folder: Path, n: int, flag: str) -> list[Path]:
    """The first ``n`` images of a generated concept folder, sorted; every entry must be an image file."""
    entries = _listed(folder, flag)
    for entry in entries:
        if not entry.is_file() or entry.suffix.lower() not in IMAGE_SUFFIXES:
            raise UsageError(f"not an image file ({', '.join(IMAGE_SUFFIXES)})", argument=flag, file=entry)
    if len(entries) < n:
        raise UsageError(
            f"holds {len(entries)} images; N = --images {n} are scored a concept", argument=flag, file=folder
        )
    return entries[:n]


def _open_rgb(path: Path, flag: str) -> Any:
    """The image at ``path`` decoded as RGB; one line naming it when it is unreadable."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            return im.convert("RGB")
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise UsageError(f"unreadable image ({exc.__class__.__name__})", argument=flag, file=path) from None


def _check_images(source: ByoSource, concepts: Mapping[str, Sequence[Concept]], n: int) -> None:
    """Each concept folder holds at least ``n`` readable images, all of one size (across the whole folder)."""
    first: tuple[Path, tuple[int, int]] | None = None
    for task, items in concepts.items():
        for c in items:
            paths = _image_paths(source.root / task / c.name, n, source.flag)
            for path in paths:
                size = _open_rgb(path, source.flag).size
                if first is None:
                    first = (path, size)
                elif size != first[1]:
                    raise UsageError(
                        f"mixed sizes: {size[0]}x{size[1]}, but {first[0]} is {first[1][0]}x{first[1][1]}",
                        argument=source.flag,
                        file=path,
                    )
            source.checked[task, c.name] = paths


def check_source(
    source: ByoSource,
    concepts: Mapping[str, Sequence[Concept]],
    known: Mapping[str, Sequence[str]],
    n: int,
    model: str | None = None,
) -> ByoSource:
    """Check ``source`` against the run's ``concepts`` (``known``: every concept name the export writes per task)
    before anything trains; ``source`` with what was found. One line naming the path on the first problem.

    Generated images: each concept folder holds at least ``n`` readable image files (nothing else), one size
    throughout. Weights: :func:`~.byo_weights.check_weights` against the base model ``model``.
    """
    _check_layout(source, concepts, known)
    if source.kind == "generated":
        _check_images(source, concepts, n)
        return source
    from .byo_weights import base_shapes, check_weights

    base = base_shapes(model)
    for task, items in concepts.items():
        for c in items:
            source.checked[task, c.name] = check_weights(source.root / task / c.name, base)
    return source


def read_images(paths: Sequence[Path], side: int) -> np.ndarray:
    """``(len(paths), side, side, 3)`` uint8: each image as RGB, its centre square resized (bicubic) where its size
    differs from ``side``."""
    from PIL import Image

    out = []
    for path in paths:
        im = _open_rgb(path, "--generated")
        if im.size != (side, side):
            s = min(im.size)
            left, top = (im.width - s) // 2, (im.height - s) // 2
            im = im.crop((left, top, left + s, top + s)).resize((side, side), Image.BICUBIC)
        out.append(np.asarray(im))
    return np.stack(out)


@dataclass
class GeneratedLearner:
    """A :class:`~.learners.Learner` over images made elsewhere: ``fit`` learns nothing, ``generate`` returns the
    concept's first ``n`` images of ``DIR/<task>/<concept>/`` in sorted order (``prompts`` and ``seed`` are the
    maker's business), at the side of the concept's real images."""

    name: str
    source: ByoSource
    concept: Concept | None = None

    def fit(self, concept: Concept, out: Path) -> None:
        self.concept = concept

    def generate(self, prompts: Sequence[str], n: int, seed: int) -> np.ndarray:
        c = self.concept
        if c is None:
            raise RuntimeError(f"{self.name}: generate before fit")
        paths = self.source.checked.get((c.task, c.name)) or _image_paths(self.source.root / c.task / c.name, n, "")
        if len(paths) < n:
            raise UsageError(f"holds {len(paths)} images, {n} asked", file=self.source.root / c.task / c.name)
        return read_images(paths[:n], int(c.real.shape[1]))


def learner_factory(
    source: ByoSource | None, make: Callable[[str], Learner], settings: Mapping[str, Any]
) -> Callable[[str], Learner]:
    """``name -> learner``: the brought row's learner for ``source.name``, ``make(name)`` for every other row.
    ``settings``: the run's Flux settings (model, device) a ``--learned`` row generates with."""

    def learner(name: str) -> Learner:
        if source is None or name != source.name:
            return make(name)
        if source.kind == "generated":
            return GeneratedLearner(name, source)
        from .byo_weights import LearnedLearner

        return LearnedLearner(name, source, model=settings.get("model"), device=settings.get("device", "cpu"))

    return learner


def save_generated(
    out: Path, generated: Mapping[tuple[str, str], Sequence[np.ndarray]], names: Mapping[str, Sequence[str]]
) -> Path:
    """Write every row's images as ``out/generated/<learner>/<task>/<concept>/<i>.png`` (the layout
    ``--generated`` reads); ``generated[learner, task]`` holds one ``(n, H, W, 3)`` array per concept of
    ``names[task]``, in order. Returns ``out/generated``."""
    from PIL import Image

    root = Path(out) / "generated"
    for (learner, task), per_concept in generated.items():
        for concept, images in zip(names[task], per_concept):
            folder = root / learner_folder(learner) / task / concept
            folder.mkdir(parents=True, exist_ok=True)
            for i, image in enumerate(images):
                Image.fromarray(np.asarray(image, dtype=np.uint8)).save(folder / f"{i:04d}.png")
    return root
