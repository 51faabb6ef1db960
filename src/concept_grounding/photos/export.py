"""The ``photos`` job: real animal cut-outs composed on real backgrounds, with exact masks.

:func:`run_photos` fetches the stamps (:func:`~.stamps.fetch_stamps`, once per machine), then
for every catalogued stamp (:data:`~.stamps.STAMPS` of the chosen groups) and each subset
(``easy``: :data:`~.backgrounds.BACKGROUNDS` of the usual habitat; ``hard``: the unusual ones)
composes ``per_stamp`` images (:func:`compose`): a seeded square crop of a background resized
to ``size``, the animal alpha-blended on it at a seeded scale and place inside the central
224 x 224 square (what the classifiers' centre crop keeps), its mask ``alpha > 0.5``. Layout
under ``out``:

* ``images/<wnid>/<stamp>-<subset>-<k>.png``, ``images/masks/<wnid>/...`` (255 = animal) and
  ``images/class_names.txt`` (``<wnid> <ImageNet name>`` lines): the ImageNet-style folder that
  ``cci-bench --images``, ``covar --images`` and ``diagnose --images`` read;
* ``counteranimals/easy`` and ``counteranimals/hard``: the same files split by subset, each
  an image folder (hard links where the file system allows), the layout ``diagnose`` reads;
* ``photos.json`` (every image: stamp, class, subset, background, animal's share of the
  crop) and ``README.md`` (sources and licences). The images are GPL-2 (Tux Paint's stamps)
  composed on CC0 / public-domain / CC BY 2.0 photographs: never commit them.

Each file is written atomically and skipped when present, so an interrupted run resumes.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..settings import setting
from ..validators import int_at_least, positive_int
from .backgrounds import BACKGROUNDS, Background, load_background
from .stamps import PACKAGE, STAMPS, VERSION, Stamp, fetch_stamps

__all__ = ["PhotosConfig", "PhotosResult", "run_photos", "compose", "GROUPS", "SUBSETS"]

GROUPS = tuple(dict.fromkeys(s.group for s in STAMPS))
#: subset -> the backgrounds' habitat
SUBSETS = {"easy": "usual", "hard": "unusual"}
CROP = 224


@dataclass(frozen=True)
class PhotosConfig:
    """What ``photos`` writes (each field but ``out`` is a flag).

    Args:
        per_stamp: images per stamp in each subset, each on another background of the subset.
        groups: animal groups to include (:data:`GROUPS`).
        size: image side in pixels (>= 224; the animal stays inside the central 224 square).
        seed: crops, scales and places.
        progress: show a progress bar.
        out: the output folder.
    """

    per_stamp: int = setting(
        2, "images per stamp in each of easy / hard (each on another background)", parse=positive_int
    )
    groups: tuple[str, ...] = setting(GROUPS, "animal groups", nargs="+", choices=GROUPS, convert=tuple)
    size: int = setting(
        256, "image side in pixels (the animal stays in the central 224 square)", parse=int_at_least(CROP)
    )
    seed: int = setting(0, "seed of the crops, scales and places", parse=int)
    progress: bool = setting(True, "show no progress bar", flag="--no-progress", action="store_false")
    out: Path | None = None

    def __post_init__(self) -> None:
        if self.size < CROP:
            raise ValueError(f"size must be >= {CROP}, got {self.size}")
        unknown = [g for g in self.groups if g not in GROUPS]
        if unknown or not self.groups:
            raise ValueError(f"groups: choose from {GROUPS}, got {list(self.groups)}")

    @property
    def stamps(self) -> list[Stamp]:
        return [s for s in STAMPS if s.group in self.groups]


@dataclass
class PhotosResult:
    """What :func:`run_photos` wrote: ``records`` one dict per image (``photos.json``), ``seconds`` the export time."""

    config: PhotosConfig
    out: Path
    records: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def image_folder(self) -> Path:
        return self.out / "images"

    def save(self, out: str | Path) -> Path:
        """``photos.json`` and ``README.md`` under ``out``; returns the README's path."""
        out = Path(out)
        (out / "photos.json").write_text(
            json.dumps({"package": f"{PACKAGE} {VERSION}", "images": self.records}, indent=1) + "\n"
        )
        path = out / "README.md"
        path.write_text(readme_text(self))
        return path


def _square_crop(background, rng: np.random.Generator, size: int):
    from PIL import Image

    w, h = background.size
    side = int(min(w, h) * rng.uniform(0.6, 1.0))
    x, y = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
    return background.crop((x, y, x + side, y + side)).resize((size, size), Image.Resampling.BILINEAR)


def compose(stamp_rgba, background, rng: np.random.Generator, size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """One image: the stamp (RGBA ``PIL.Image``) alpha-blended on a seeded square crop of ``background``.

    The animal's longer side is ``U(0.45, 0.8) * 224`` pixels; it lies inside the central 224
    square of the ``size x size`` image. Returns the ``(size, size, 3)`` uint8 image and its
    ``(size, size)`` boolean mask ``alpha > 0.5``.
    """
    from PIL import Image

    stamp = stamp_rgba.convert("RGBA")
    stamp = stamp.crop(stamp.getchannel("A").point(lambda a: 255 if a > 127 else 0).getbbox() or stamp.getbbox())
    scale = rng.uniform(0.45, 0.8) * CROP / max(stamp.size)
    w, h = max(1, round(stamp.width * scale)), max(1, round(stamp.height * scale))
    stamp = stamp.resize((w, h), Image.Resampling.LANCZOS)
    margin = (size - CROP) // 2
    x = margin + int(rng.integers(0, CROP - w + 1))
    y = margin + int(rng.integers(0, CROP - h + 1))
    canvas = np.asarray(_square_crop(background, rng, size), dtype=np.float32)
    rgba = np.asarray(stamp, dtype=np.float32)
    alpha = rgba[..., 3:] / 255.0
    region = canvas[y : y + h, x : x + w]
    canvas[y : y + h, x : x + w] = alpha * rgba[..., :3] + (1 - alpha) * region
    mask = np.zeros((size, size), bool)
    mask[y : y + h, x : x + w] = alpha[..., 0] > 0.5
    return np.clip(np.rint(canvas), 0, 255).astype(np.uint8), mask


def _write_png(path: Path, array: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    Image.fromarray(array).save(tmp, format="PNG")
    os.replace(tmp, path)


def _link(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        return
    try:
        os.link(source, target)
    except OSError:
        import shutil

        shutil.copyfile(source, target)


def _class_lines(stamps: list[Stamp]) -> str:
    from ..models.imagenet import imagenet_names, imagenet_synsets

    names, synsets = imagenet_names(), imagenet_synsets()
    classes = sorted({s.imagenet for s in stamps}, key=lambda i: synsets[i])
    return "".join(f"{synsets[i]} {names[i]}\n" for i in classes)


def run_photos(config: PhotosConfig) -> PhotosResult:
    """Fetch the stamps (once) and write the layout of the module docstring under ``config.out``."""
    from PIL import Image
    from tqdm.auto import tqdm

    from ..models.imagenet import imagenet_synsets

    if config.out is None:
        raise ValueError("out: give the output folder")
    out = Path(config.out)
    start = time.perf_counter()
    stamps_root = fetch_stamps() / "animals"
    synsets = imagenet_synsets()
    backgrounds = {
        subset: [(b, load_background(b)) for b in BACKGROUNDS if b.habitat == habitat]
        for subset, habitat in SUBSETS.items()
    }
    stamps = config.stamps
    records: list[dict[str, Any]] = []
    jobs = [(i, s, subset, k) for i, s in enumerate(stamps) for subset in SUBSETS for k in range(config.per_stamp)]
    for i, stamp, subset, k in tqdm(jobs, desc="photos", disable=not config.progress, leave=False):
        choices = backgrounds[subset]
        background, picture = choices[(i + k) % len(choices)]
        wnid = synsets[stamp.imagenet]
        file = f"{wnid}/{stamp.name}-{subset}-{k}.png"
        image_path, mask_path = out / "images" / file, out / "images" / "masks" / file
        if not (image_path.is_file() and mask_path.is_file()):
            rng = np.random.default_rng([config.seed, i, list(SUBSETS).index(subset), k])
            image, mask = compose(Image.open(stamps_root / stamp.path), picture, rng, config.size)
            _write_png(mask_path, mask.astype(np.uint8) * 255)
            _write_png(image_path, image)
        else:
            mask = np.asarray(Image.open(mask_path)) > 127
        for source, folder in ((image_path, ""), (mask_path, "masks/")):
            _link(source, out / "counteranimals" / subset / f"{folder}{file}")
        records.append(_record(file, stamp, subset, background, mask, config.size))
    lines = _class_lines(stamps)
    for folder in (out / "images", out / "counteranimals" / "easy", out / "counteranimals" / "hard"):
        (folder / "class_names.txt").write_text(lines)
    (out / "counteranimals" / "class_names.txt").write_text(lines)
    return PhotosResult(config, out, records, time.perf_counter() - start)


def _record(file: str, stamp: Stamp, subset: str, background: Background, mask: np.ndarray, size: int) -> dict:
    margin = (size - CROP) // 2
    return {
        "file": file,
        "stamp": stamp.path,
        "imagenet": stamp.imagenet,
        "group": stamp.group,
        "subset": subset,
        "background": background.name,
        "mask_share": round(float(mask.mean()), 4),
        "mask_share_crop": round(float(mask[margin : margin + CROP, margin : margin + CROP].mean()), 4),
    }


def readme_text(result: PhotosResult) -> str:
    """The output's README: what is where, the split's definition, sources and licences."""
    counts = {s: sum(r["subset"] == s for r in result.records) for s in SUBSETS}
    classes = len({r["imagenet"] for r in result.records})
    rows = "\n".join(f"| {b.name} | {b.package} `{b.path}` | {b.licence} | {b.habitat} |" for b in BACKGROUNDS)
    return f"""# Real animal photos on real backgrounds

Written by `concept-grounding photos` ({len(result.config.stamps)} stamps, {classes} ImageNet-1k classes,
{counts["easy"]} easy + {counts["hard"]} hard images, seed {result.config.seed}, {result.seconds:.1f} s).

* `images/`: one folder per ImageNet class (WordNet id), masks in `images/masks/` (255 = animal),
  `class_names.txt`; read by `cci-bench --images`, `covar --images`, `diagnose --images`.
* `counteranimals/easy`, `counteranimals/hard`: the same images split by background (CounterAnimals'
  layout, read by `diagnose --images counteranimals`): easy = the usual habitat (outdoors on vegetation or
  ground), hard = an unusual one (indoors, man-made, space, a close-up of another object). The split is
  defined by the scene.
* `photos.json`: every image's stamp, class, subset, background and the animal's share of the image.

## Licences (do not commit these images)

The animals are real photographs cut out with an alpha channel from Debian's `{PACKAGE}` {VERSION}
(Tux Paint's stamps, copyright 2002-2022 Bill Kendrick and contributors), licensed **GPL-2** (or later);
its copyright file is in the cache beside the stamps. Each class is the ImageNet-1k class the stamp's name
names (not a model's prediction). Backgrounds:

| background | file | licence | habitat |
|---|---|---|---|
{rows}
"""
