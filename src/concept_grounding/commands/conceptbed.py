"""``concept-grounding conceptbed``: ConceptBed's concept-alignment tables on the bird world.

Learners learn each concept ``V*`` (held-out species, their attributes, four styles) from ``--m``
images and generate ``--images`` per concept; validated oracles score them: Table 1 (CCD per
learner and task), Table 7 (accuracy, MSP, ECE, CCD), Table 8 (oracle capacities), the
DINO-style cosine baseline, Figs. 4-5. Writes ``report.md``, ``results.json``, the figures and the
generated images under ``--out``; trained oracles are cached under ``--cache`` (default ``OUT/oracles``) and the
learners' weights under ``OUT/learned``. ``--export-concepts``, ``--generated`` and ``--learned`` bring a learner
trained elsewhere (docs/conceptbed/bring_your_own.md). The job lives in :mod:`concept_grounding.conceptbed.job`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding import settings
from concept_grounding.conceptbed.byo_export import ExportedConcepts, export_or_run
from concept_grounding.conceptbed.config import ConceptBedConfig
from concept_grounding.jobs import Job, add_job_arguments

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]


JOB = Job("conceptbed", ConceptBedConfig, export_or_run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out`` and the settings of :class:`~concept_grounding.conceptbed.config.ConceptBedConfig`."""
    add_job_arguments(parser, JOB)


def config_from_args(args: argparse.Namespace):
    """The job's configuration from the parsed arguments (cache and work folders under ``--out``)."""
    from concept_grounding.conceptbed.byo import byo_source
    from concept_grounding.conceptbed.learners import check_learners

    learners = check_learners(args.learners or ())
    byo_source(args.generated, args.learned, args.name, learners)
    return settings.from_args(
        JOB.config, args, cache=str(args.cache or args.out / "oracles"), work=str(args.out / "learned")
    )


def _print(result: object, path: Path) -> None:
    """The one line of ``--export-concepts`` (a run's report says the rest)."""
    if isinstance(result, ExportedConcepts):
        print(result.line)


def run(args: argparse.Namespace) -> int:
    from concept_grounding.progress import log_lines

    config = config_from_args(args)
    with log_lines():
        JOB(config, args.out, report=_print)
    return 0
