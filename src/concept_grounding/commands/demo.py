"""``concept-grounding demo``: the main job on the bird world, end to end.

Runs each stage into its own sub-folder of ``--out`` and writes an index ``README.md`` that
links them. A stage that fails stops the demo with its error; stages already written stay on
disk. The job lives in :mod:`concept_grounding.demo` (``run_demo``), its settings in
:mod:`concept_grounding.demo_config` (``DemoConfig``) and its stages in
:mod:`concept_grounding.demo_stages`; this module parses the arguments and logs.
"""

from __future__ import annotations

import argparse
import logging

from concept_grounding import settings
from concept_grounding.demo import run_demo
from concept_grounding.demo_config import DemoConfig
from concept_grounding.jobs import Job, add_job_arguments
from concept_grounding.progress import log_lines

__all__ = ["JOB", "add_arguments", "run"]

logger = logging.getLogger("concept_grounding.demo")

JOB = Job("demo", DemoConfig, run_demo)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_job_arguments(parser, JOB, out_default=DemoConfig.out, out_help="report folder")


def run(args: argparse.Namespace) -> int:
    config = settings.from_args(DemoConfig, args, out=args.out)
    config.stage_names  # an unknown stage fails before any stage runs  # noqa: B018
    with log_lines():
        index = JOB(config, args.out)
        logger.info("report written to %s", index)
    return 0
