"""``concept-grounding learn``: learn a new concept V* from a few images with one of ConceptBed's
learners (Textual Inversion, DreamBooth, LoRA, Custom Diffusion) on a diffusers Flux.

``--images`` is the concept's folder (or, with ``--concepts``, a folder of concept folders,
sharded over processes when launched with ``accelerate launch`` / ``torchrun``). Rerun the same
command to resume. The job lives in :mod:`concept_grounding.learners.job`; the learner's
settings are :class:`~concept_grounding.learners.LearnConfig`'s.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding import settings
from concept_grounding.jobs import Job, add_job_arguments
from concept_grounding.learners.job import LearnJobConfig, LearnResult, run_learn

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]

#: resumable: it writes checkpoints and the learnt files under ``--out`` as it goes
JOB = Job("learn", LearnJobConfig, run_learn)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out``, ``--concepts``, then the learner's settings
    (:class:`~concept_grounding.learners.LearnConfig`, nested in the job's config)."""
    add_job_arguments(parser, JOB, out_help="output folder of the learnt concept (diffusers-loadable files)")


def config_from_args(args: argparse.Namespace) -> LearnJobConfig:
    """The job's configuration from the parsed arguments."""
    return settings.from_args(LearnJobConfig, args, out=args.out)


def run(args: argparse.Namespace) -> int:
    from concept_grounding.errors import options_as_flags

    with options_as_flags(settings.flags(LearnJobConfig)):
        JOB(config_from_args(args), args.out, report=_print)
    return 0


def _print(result: LearnResult, path: Path) -> None:
    """How many concepts were learnt, with which learner, and the main file written."""
    print(f"learnt {len(result.folders)} concept(s) with {result.config.learn.method}; {path}")
