"""``concept-grounding diagnose``: BG-Er / Fine-Er / FG-Er of a CLIP's errors on an image folder.

``--images DIR``: an ImageNet-style folder, or CounterAnimals' layout (``easy`` / ``hard``, or
``common`` / ``counter``, sub-folders, each one folder per class), whose shares are given per
subset, for each of ``--models`` in one table. Masks come from the folder's ``masks/`` or from a
grounded segmenter (``--detector`` and ``--segmenter``, computed once per image, cached under
``--mask-cache`` and reused by every model); with both, the report states how far the
diagnosis with computed masks agrees with the one with the given masks. The job lives in
:mod:`concept_grounding.cci.diagnose_job` (``DiagnoseConfig``, ``run_diagnose``, ``DiagnoseResult.save``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding import settings
from concept_grounding.cci.diagnose_job import DiagnoseConfig, run_diagnose
from concept_grounding.jobs import Job, add_job_arguments

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]

JOB = Job("diagnose", DiagnoseConfig, run_diagnose)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_job_arguments(parser, JOB, out_help="report folder", out_default=Path("reports/diagnose"))


def check_segmenter_pair(args: argparse.Namespace) -> None:
    """The grounded segmenter's two checkpoints are given together or not at all."""
    from concept_grounding.errors import UsageError

    if (args.detector is None) != (args.segmenter is None):
        raise UsageError(
            "give --detector and --segmenter together (a grounded segmenter)",
            argument="--detector" if args.detector is None else "--segmenter",
        )


def config_from_args(args: argparse.Namespace) -> DiagnoseConfig:
    """The job's configuration from the parsed (and model-resolved) arguments; the mask cache
    defaults to ``OUT/mask_cache``."""
    check_segmenter_pair(args)
    return settings.from_args(
        DiagnoseConfig, args, mask_cache=str(args.mask_cache or args.out / "mask_cache") if args.detector else None
    )


def run(args: argparse.Namespace) -> int:
    from concept_grounding.cci.table_models import resolve_table_models
    from concept_grounding.hub import resolve_model_spec

    check_segmenter_pair(args)  # before any name is resolved
    resolve_table_models(args.models)
    for flag in ("detector", "segmenter"):
        if getattr(args, flag):
            setattr(args, flag, resolve_model_spec(getattr(args, flag), f"--{flag}", family="hub").target)
    print(f"wrote {JOB(config_from_args(args), args.out)}")
    return 0
