"""The ``world`` job: render the bird world, export it, draw a contact sheet; and its summary.

The job shape of :mod:`concept_grounding.jobs`: :func:`run_world_export` renders and writes
the exports as it goes under the ``out`` its config carries: ``hf/`` (the ``DatasetDict``,
``save_to_disk``), and with ``formats`` ``"cub"`` / ``"sub"`` / ``"all"`` the
``CUB_200_2011/`` folder and the SUB-layout ``SUB/`` folder; it returns a
:class:`WorldExport`, whose ``save(out)`` (:func:`write_world_summary`) writes
``contact_sheet.png``, ``summary.json`` and ``summary.md``. The command
``concept-grounding world`` parses its arguments, runs the job and prints one line.

>>> WorldExportConfig(WorldConfig(image_size=48), formats="all").writes_cub
True
>>> WorldExportConfig(formats="png")
Traceback (most recent call last):
...
ValueError: formats must be one of ('hf', 'cub', 'sub', 'all'), got 'png'
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import write_report
from ..settings import command_line, setting
from ..validators import nonnegative_int, positive_int
from .config import WorldConfig
from .world import BirdWorld

__all__ = ["WorldExportConfig", "run_world_export", "write_world_summary"]

FORMATS = ("hf", "cub", "sub", "all")
#: SUB targets drawn on the contact sheet, in order
SHOWCASE_TARGETS = (
    "has_crown_color::pink",
    "has_bill_shape::needle",
    "has_underparts_color::red",
    "has_breast_pattern::spotted",
    "has_wing_color::white",
    "has_tail_pattern::multi-colored",
    "has_eye_color::yellow",
    "has_primary_color::blue",
    "has_throat_color::yellow",
)
#: birds rendered to measure the render speed (and drawn on the sheet, the first 18)
PROBE_IMAGES = 60


@dataclass(frozen=True)
class WorldExportConfig:
    """What to render and export.

    Args:
        world: the renderer's :class:`WorldConfig` (image side, species, seed, label
            deviation rate; it validates them), the ``--size``, ``--classes``, ``--seed`` and
            ``--deviation-rate`` of ``concept-grounding world``.
        train_per_class, test_per_class: images per class in each split (>= 0).
        per_pairing: SUB images per (class, attribute) pairing.
        formats: ``"hf"`` (the DatasetDict only), ``"cub"``, ``"sub"`` or ``"all"``.
        out: the folder the exports are written to as they are rendered (the command's
            ``--out``; required by :func:`run_world_export`). Not compared: two configs that
            render the same birds are equal wherever they write.
    """

    world: WorldConfig = WorldConfig()
    train_per_class: int = setting(10, "training images per class", parse=nonnegative_int)
    test_per_class: int = setting(5, "test images per class", parse=nonnegative_int)
    per_pairing: int = setting(1, "SUB images per (class, attribute) pairing", parse=positive_int)
    formats: str = setting(
        "hf",
        "hf: the DatasetDict only (hf/); cub: also CUB_200_2011/; sub: also SUB/; all: all three",
        flag="--format",
        choices=FORMATS,
    )
    out: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.formats not in FORMATS:
            raise ValueError(f"formats must be one of {FORMATS}, got {self.formats!r}")
        if self.train_per_class < 0 or self.test_per_class < 0:
            raise ValueError(
                f"train_per_class and test_per_class must be >= 0, got {self.train_per_class} and {self.test_per_class}"
            )
        if self.per_pairing < 1:
            raise ValueError(f"per_pairing must be >= 1, got {self.per_pairing}")

    @property
    def writes_cub(self) -> bool:
        return self.formats in ("cub", "all")

    @property
    def writes_sub(self) -> bool:
        return self.formats in ("sub", "all")

    def command(self) -> str:
        """The ``concept-grounding world`` command that renders the same birds (every format).

        >>> WorldExportConfig(WorldConfig(image_size=64, class_names=("017.Cardinal",))).command()
        'concept-grounding world --out world --size 64 --classes 017.Cardinal --deviation-rate 0.1 --seed 0
         --train-per-class 10 --test-per-class 5 --per-pairing 1 --format all'
        """
        world = command_line(self.world)
        export = command_line(replace(self, formats="all"))
        return " ".join(["concept-grounding world --out world", *world, *export])


@dataclass
class WorldExport:
    """What :func:`run_world_export` rendered and wrote.

    Attributes:
        config: the job's configuration.
        world: the renderer.
        out: the folder written.
        dataset: the ``DatasetDict`` (``train`` / ``test``).
        sheet: the contact sheet (PIL image).
        sub_images: rows of the SUB export, or ``None`` without it.
        render_rate: images per second measured here (rendering only).
        deviating: fraction of train images with at least one label that deviates from the class.
    """

    config: WorldExportConfig
    world: BirdWorld
    out: Path
    dataset: Any
    sheet: Any
    sub_images: int | None
    render_rate: float
    deviating: float

    def save(self, out: str | Path) -> Path:
        """Write the summary under ``out`` (:func:`write_world_summary`); returns ``summary.md``'s path."""
        return write_world_summary(self, out)

    def summary(self) -> dict[str, Any]:
        """The JSON summary written as ``summary.json``."""
        world, wc = self.world, self.world.config
        return {
            "image_size": wc.image_size,
            "seed": wc.seed,
            "deviation_rate": wc.deviation_rate,
            "num_classes": world.num_classes,
            "classes": list(world.class_names),
            "train_images": self.dataset["train"].num_rows,
            "test_images": self.dataset["test"].num_rows,
            "sub_images": self.sub_images,
            "rendered_groups": list(world.rendered_groups),
            "rendered_attributes": len(world.rendered_attributes),
            "images_with_a_deviating_label": self.deviating,
            "render_images_per_second": round(self.render_rate, 1),
            "format": self.config.formats,
        }


def showcase_pairs(world: BirdWorld, count: int = 6) -> list:
    """Counterfactual pairs for the sheet: varied SUB targets (:data:`SHOWCASE_TARGETS`), only
    real changes (up to 10 birds tried per target)."""
    pairs, k = [], 0
    for target in SHOWCASE_TARGETS:
        for _ in range(10):
            cf = world.counterfactual(world.sample(k), target)
            k += 1
            if cf.changed_parts:
                pairs.append(cf)
                break
        if len(pairs) == count:
            break
    return pairs


def deviating_fraction(world: BirdWorld, split) -> float:
    """Fraction of the rows of ``split`` whose attribute vector differs from their class's."""
    labels = np.asarray(split["attributes"], dtype=np.uint8)
    cls = np.asarray(split["label"])
    return float((labels != world.class_attributes[cls]).any(axis=1).mean()) if len(cls) else 0.0


def run_world_export(config: WorldExportConfig) -> WorldExport:
    """Render the world and write its exports under ``config.out`` (see the module docstring).

    Raises:
        ValueError: ``config.out`` is not given.
    """
    from concept_grounding import loaders

    from .contact_sheet import contact_sheet

    if config.out is None:
        raise ValueError("out: give the folder to write to")
    world = BirdWorld(config.world)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)

    # 1. render speed (images/s on this machine, rendering only)
    t0 = time.perf_counter()
    probe = list(world.samples(range(PROBE_IMAGES)))
    rate = len(probe) / (time.perf_counter() - t0)

    # 2. the CUB-layout DatasetDict
    dd = world.to_dataset_dict(config.train_per_class, config.test_per_class)
    dd.save_to_disk(str(out / "hf"))

    # 3. contact sheet
    sheet = contact_sheet(probe[:18], showcase_pairs(world), columns=6, class_names=world.class_names)

    # 4. optional folder exports
    sub_rows = None
    if config.writes_cub:
        loaders.write_cub(dd, out / "CUB_200_2011")
    if config.writes_sub:
        sub = world.sub_dataset(per_pairing=config.per_pairing)
        sub_rows = sub.num_rows
        loaders.write_sub(sub, out / "SUB")
    return WorldExport(config, world, out, dd, sheet, sub_rows, rate, deviating_fraction(world, dd["train"]))


def summary_markdown(export: WorldExport) -> str:
    """The Markdown summary: counts, settings, rendered groups, speed, the contact sheet."""
    s, world = export.summary(), export.world
    lines = [
        "# Bird world export",
        "",
        f"- classes: {world.num_classes}; train images: {s['train_images']}; test images: {s['test_images']}"
        + (f"; SUB images: {export.sub_images}" if export.sub_images is not None else ""),
        f"- image size: {s['image_size']} px; seed: {s['seed']}; deviation rate: {s['deviation_rate']}"
        f" (train images with at least one deviating label: {export.deviating:.0%})",
        f"- rendered groups ({len(world.rendered_groups)}): {', '.join(world.rendered_groups)}",
        f"- rendered attributes: {len(world.rendered_attributes)} of {world.vocab.num_attributes}",
        f"- render speed measured here: {export.render_rate:.0f} images/s",
        "",
        "![contact sheet](contact_sheet.png)",
        "",
    ]
    return "\n".join(lines)


def write_world_summary(export: WorldExport, out: str | Path | None = None) -> Path:
    """Write ``contact_sheet.png``, ``summary.json`` and ``summary.md`` under ``out`` (default:
    the export's folder); returns the path of ``summary.md``."""
    out = export.out if out is None else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    export.sheet.save(out / "contact_sheet.png")
    _, path = write_report(
        out,
        export.summary(),
        summary_markdown(export),
        results_name="summary.json",
        report_name="summary.md",
        nan_as_null=False,
    )
    return path
