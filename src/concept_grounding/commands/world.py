"""``concept-grounding world``: render the bird world, export it, draw a contact sheet.

Writes under ``--out``: ``hf/`` (the DatasetDict, ``save_to_disk``), ``contact_sheet.png``,
``summary.md`` and ``summary.json``; with ``--format cub``/``sub``/``all`` also the
CUB_200_2011 folder (``CUB_200_2011/``) and the SUB-layout folder (``SUB/``). The job lives in
:mod:`concept_grounding.world.export` (``run_world_export`` writes the exports under the
config's ``out`` as it renders; ``WorldExport.save`` writes the summary).
"""

from __future__ import annotations

import argparse

from concept_grounding import settings
from concept_grounding.commands._types import output_dir
from concept_grounding.jobs import Job
from concept_grounding.world.config import WorldConfig
from concept_grounding.world.export import WorldExportConfig, run_world_export

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]

JOB = Job("world", WorldExportConfig, run_world_export)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out``, then the settings :class:`WorldConfig` and :class:`WorldExportConfig` declare."""
    parser.add_argument("--out", required=True, type=output_dir, help="output folder")
    settings.add_arguments(parser, WorldConfig)
    settings.add_arguments(parser, WorldExportConfig)


def config_from_args(args: argparse.Namespace) -> WorldExportConfig:
    """The job's configuration from the parsed arguments (their types have checked each flag)."""
    return settings.from_args(WorldExportConfig, args, world=settings.from_args(WorldConfig, args), out=args.out)


def run(args: argparse.Namespace) -> int:
    export = JOB.run(config_from_args(args))
    export.save(args.out)
    s = export.summary()
    print(
        f"wrote {export.out} ({s['train_images']} train / {s['test_images']} test images, "
        f"{export.render_rate:.0f} images/s)"
    )
    return 0
