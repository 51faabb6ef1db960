"""The data layouts of the CCI paper's tables, read from disk and exported by the bird world.

* **Image folder** (CCI Table 1, ImageNet validation style; also what ``datasets``'
  ``imagefolder`` reads): ``DIR/<class folder>/<image>``, one folder per class, images
  ``.jpg`` / ``.jpeg`` / ``.png`` / ``.bmp`` / ``.webp``. Class names come from a text file
  (``--class-names``): one name per line in sorted-folder order, or ``<folder> <name>`` lines
  (ImageNet's ``n01440764 tench``); without it the folder name is the class name.
  :func:`read_image_folder`.
* **COCO Karpathy** (CCI Table 2): ``DIR/dataset_coco.json`` (Karpathy & Fei-Fei's split file:
  ``images: [{filepath, filename, split, sentences: [{raw}, ...]}]``) and the images at
  ``DIR/<filepath>/<filename>``. :func:`read_karpathy`.

:func:`export_world_image_folder` and :func:`export_world_karpathy` write the same layouts
from the bird world, with the exact foreground masks beside (``masks/``), so every harness
runs end to end here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UsageError

__all__ = [
    "ImageFolder",
    "CaptionedImages",
    "read_image_folder",
    "read_karpathy",
    "export_world_image_folder",
    "export_world_counter_animals",
    "export_world_karpathy",
    "IMAGE_SUFFIXES",
]

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
KARPATHY_FILE = "dataset_coco.json"


@dataclass
class ImageFolder:
    """A classification set: ``paths[i]`` of class ``labels[i]`` (index into ``class_names``);
    ``masks[i]`` the foreground mask file where the folder has ``masks/`` (world exports)."""

    paths: list[Path]
    labels: np.ndarray
    class_names: list[str]
    masks: list[Path] | None = None

    def images(self, indices: Sequence[int]) -> list:
        """The RGB PIL images at ``indices``."""
        from PIL import Image

        return [Image.open(self.paths[i]).convert("RGB") for i in indices]


@dataclass
class CaptionedImages:
    """A retrieval set: image ``paths[i]`` paired with caption ``captions[i]`` (its first)."""

    paths: list[Path]
    captions: list[str]

    def images(self, indices: Sequence[int]) -> list:
        from PIL import Image

        return [Image.open(self.paths[i]).convert("RGB") for i in indices]


def check_readable(paths: Sequence[Path], argument: str) -> None:
    """``UsageError`` naming ``argument`` and the first file PIL cannot open as an image (its header is read,
    not its pixels: seconds for a whole ImageNet validation set). Any size and aspect is accepted."""
    from PIL import Image, UnidentifiedImageError

    for path in paths:
        try:
            with Image.open(path) as im:
                im.size  # noqa: B018 - the header parsed
        except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as err:
            raise UsageError(
                f"not an image PIL can read ({type(err).__name__})", argument=argument, file=str(path)
            ) from None


def _class_names(folders: list[str], names_file: Path | None) -> list[str]:
    if names_file is None:
        return list(folders)
    if not Path(names_file).is_file():
        raise UsageError(f"{names_file} is not a file", argument="--class-names")
    lines = [line.strip() for line in Path(names_file).read_text().splitlines() if line.strip()]
    pairs = dict(line.split(maxsplit=1) for line in lines if len(line.split(maxsplit=1)) == 2)
    if all(f in pairs for f in folders):
        return [pairs[f] for f in folders]
    if len(lines) == len(folders):
        return lines
    raise UsageError(
        f"{len(lines)} class names for {len(folders)} class folders (give one per folder in sorted order, "
        "or '<folder> <name>' lines)",
        file=str(names_file),
    )


def read_image_folder(
    root: str | Path, class_names: str | Path | None = None, *, max_per_class: int | None = None
) -> ImageFolder:
    """An ImageNet-style folder (module docstring); ``UsageError`` naming ``--images`` when
    ``root`` is not that layout. ``max_per_class`` keeps the first images of each class
    (sorted by name)."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root} is not a folder", argument="--images")
    folders = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != "masks" and not p.name.startswith("."))
    paths, labels = [], []
    for label, folder in enumerate(folders):
        files = sorted(p for p in (root / folder).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        files = files[:max_per_class] if max_per_class else files
        paths += files
        labels += [label] * len(files)
    if not folders or not paths:
        raise UsageError(
            f"{root} is not an image folder: expected one sub-folder of images per class ({', '.join(IMAGE_SUFFIXES)})",
            argument="--images",
        )
    empty = [f for f in folders if not any(p.suffix.lower() in IMAGE_SUFFIXES for p in (root / f).iterdir())]
    if empty:
        raise UsageError(f"{root}: class folder {empty[0]!r} holds no image", argument="--images")
    names = _class_names(folders, Path(class_names) if class_names else None)
    check_readable(paths, "--images")
    mask_root = root / "masks"
    masks = [mask_root / p.parent.name / (p.stem + ".png") for p in paths] if mask_root.is_dir() else None
    return ImageFolder(paths, np.asarray(labels), names, masks)


def read_karpathy(
    root: str | Path, split: str = "test", *, json_file: str | Path | None = None, max_images: int | None = None
) -> CaptionedImages:
    """The ``split`` of a COCO Karpathy folder (module docstring); ``UsageError`` naming
    ``--coco`` (or the JSON file) when the JSON is missing or malformed or an image is missing."""
    root = Path(root)
    path = Path(json_file) if json_file else root / KARPATHY_FILE
    if not path.is_file():
        raise UsageError(f"no Karpathy split file {path.name} in {root}", argument="--coco")
    try:
        entries = json.loads(path.read_text())["images"]
        rows = [
            (Path(e.get("filepath", "")) / e["filename"], e["sentences"][0]["raw"].strip())
            for e in entries
            if e.get("split") == split
        ]
    except (json.JSONDecodeError, KeyError, IndexError, TypeError) as err:
        raise UsageError(f"not a Karpathy split file ({type(err).__name__}: {err})", file=str(path)) from None
    rows = rows[:max_images] if max_images else rows
    if not rows:
        raise UsageError(f"no image of split {split!r}", file=str(path))
    missing = [r for r, _ in rows if not (root / r).is_file()]
    if missing:
        raise UsageError(
            f"{len(missing)} image(s) of the split are missing under {root}, first {missing[0]}", file=str(path)
        )
    check_readable([root / r for r, _ in rows], "--coco")
    return CaptionedImages([root / r for r, _ in rows], [c for _, c in rows])


def _write_png(path: Path, array: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def export_world_image_folder(
    out: str | Path,
    *,
    per_class: int = 4,
    image_size: int = 64,
    seed: int = 0,
    class_names: Sequence[str] | None = None,
    start: int = 0,
) -> Path:
    """The bird world as an ImageNet-style folder: ``out/<class folder>/<n>.png`` (``n`` the
    world sample index, from ``start``: skip the samples a model was trained on), exact
    foreground masks at ``out/masks/<class folder>/<n>.png`` and ``out/class_names.txt``
    (``<folder> <bird name>`` lines)."""
    from ..vocabulary import class_display_name
    from ..world import BirdWorld, WorldConfig

    out = Path(out)
    world = BirdWorld(
        WorldConfig(image_size=image_size, seed=seed, class_names=tuple(class_names) if class_names else None)
    )
    for index in range(start, start + per_class * world.num_classes):
        s = world.sample(index)
        folder = world.class_names[s.label]
        _write_png(out / folder / f"{index:05d}.png", s.image)
        _write_png(out / "masks" / folder / f"{index:05d}.png", s.mask.astype(np.uint8) * 255)
    (out / "class_names.txt").write_text("".join(f"{f} {class_display_name(f).lower()}\n" for f in world.class_names))
    return out


def export_world_karpathy(
    out: str | Path,
    *,
    num_images: int = 16,
    image_size: int = 64,
    seed: int = 0,
    class_names: Sequence[str] | None = None,
    start: int = 0,
) -> Path:
    """The bird world as a COCO Karpathy folder: ``out/images/<n>.png`` and
    ``out/dataset_coco.json`` (every image in the ``test`` split), each captioned with its
    class prompt (:func:`~concept_grounding.models.clip.class_caption`), and exact masks in
    ``out/masks/``; world samples ``start .. start + num_images - 1``."""
    from ..models.clip import class_caption
    from ..world import BirdWorld, WorldConfig

    out = Path(out)
    world = BirdWorld(
        WorldConfig(image_size=image_size, seed=seed, class_names=tuple(class_names) if class_names else None)
    )
    entries = []
    for index in range(start, start + num_images):
        s = world.sample(index)
        _write_png(out / "images" / f"{index:05d}.png", s.image)
        _write_png(out / "masks" / f"{index:05d}.png", s.mask.astype(np.uint8) * 255)
        entries.append(
            {
                "filepath": "images",
                "filename": f"{index:05d}.png",
                "split": "test",
                "imgid": index,
                "sentences": [{"raw": class_caption(world.class_names[s.label])}],
            }
        )
    (out / KARPATHY_FILE).write_text(json.dumps({"dataset": "coco", "images": entries}))
    return out


def export_world_counter_animals(
    out: str | Path,
    *,
    per_class: int = 4,
    image_size: int = 64,
    seed: int = 0,
    class_names: Sequence[str] | None = None,
    start: int = 0,
) -> Path:
    """The bird world in CounterAnimals' layout: ``out/easy`` the birds as rendered (the world's
    own scenes, drawn independently of the species) and ``out/hard`` the next ``per_class`` birds per class composited
    onto procedural backgrounds of another kind (:func:`~.covar.procedural_backgrounds`), each
    an image folder with exact masks (:func:`export_world_image_folder`'s layout)."""
    from .covar import composite, procedural_backgrounds

    out = Path(out)
    easy = export_world_image_folder(
        out / "easy", per_class=per_class, image_size=image_size, seed=seed, class_names=class_names, start=start
    )
    hard = export_world_image_folder(
        out / "hard",
        per_class=per_class,
        image_size=image_size,
        seed=seed,
        class_names=class_names,
        start=start + per_class * len((easy / "class_names.txt").read_text().splitlines()),
    )
    backgrounds = procedural_backgrounds(8, (image_size, image_size), seed + 1)
    from PIL import Image

    for k, path in enumerate(sorted(p for p in hard.glob("*/*.png") if p.parent.name != "masks")):
        mask = np.asarray(Image.open(hard / "masks" / path.parent.name / path.name)) > 127
        _write_png(
            path, composite(np.asarray(Image.open(path).convert("RGB")), mask, backgrounds[k % len(backgrounds)])
        )
    (out / "class_names.txt").write_text((easy / "class_names.txt").read_text())
    return out
