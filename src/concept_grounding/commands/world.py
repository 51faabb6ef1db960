"""``concept-grounding world``: render the bird world, export it, draw a contact sheet.

Writes under ``--out``: ``hf/`` (the DatasetDict, ``save_to_disk``), ``contact_sheet.png``,
``summary.md`` and ``summary.json``; with ``--format cub``/``sub``/``all`` also the
CUB_200_2011 folder (``CUB_200_2011/``) and the SUB-layout folder (``SUB/``). The job and its
summary writer live in :mod:`concept_grounding.world.export` (``run_world_export``,
``write_world_summary``).
"""

from __future__ import annotations

import argparse

from concept_grounding.commands._types import (
    class_name,
    closed_unit_interval,
    int_at_least,
    nonnegative_int,
    output_dir,
    positive_int,
)
from concept_grounding.world.config import WorldConfig
from concept_grounding.world.export import WorldExportConfig, run_world_export, write_world_summary


__all__ = ["add_arguments", "run", "config_from_args"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=output_dir, help="output folder")
    parser.add_argument("--size", type=int_at_least(32), default=128, help="image side in pixels (>= 32)")
    parser.add_argument("--train-per-class", type=nonnegative_int, default=10, help="training images per class")
    parser.add_argument("--test-per-class", type=nonnegative_int, default=5, help="test images per class")
    parser.add_argument("--seed", type=int, default=0, help="world seed (same seed, same birds)")
    parser.add_argument("--deviation-rate", type=closed_unit_interval, default=0.1, help="per-image, per-group label deviation rate")
    parser.add_argument("--classes", nargs="*", type=class_name, default=None, help="CUB class folder names (default: SUB's 33)")
    parser.add_argument("--per-pairing", type=positive_int, default=1, help="SUB images per (class, attribute) pairing")
    parser.add_argument("--format", choices=("hf", "cub", "sub", "all"), default="hf",
                        help="hf: the DatasetDict only (hf/); cub: also CUB_200_2011/; sub: also SUB/; all: all three")


def config_from_args(args: argparse.Namespace) -> WorldExportConfig:
    """The job's configuration from the parsed arguments (their types have checked each flag)."""
    world = WorldConfig(image_size=args.size, class_names=tuple(args.classes) if args.classes else None,
                        deviation_rate=args.deviation_rate, seed=args.seed)
    return WorldExportConfig(world, train_per_class=args.train_per_class, test_per_class=args.test_per_class,
                             per_pairing=args.per_pairing, formats=args.format)


def run(args: argparse.Namespace) -> int:
    export = run_world_export(config_from_args(args), args.out)
    write_world_summary(export)
    s = export.summary()
    print(f"wrote {export.out} ({s['train_images']} train / {s['test_images']} test images, "
          f"{export.render_rate:.0f} images/s)")
    return 0
