"""``concept-grounding curate``: SUB's curation by human answers (Sec. 4.3, App. E).

Reads the candidates (``--candidates``: a ``generate`` / ``filter`` folder with
``metadata.jsonl``) and the answers (``--annotations``: the ``annotate`` store or its Parquet
export), applies SUB App. E's rules (docs/human_validation.md) and writes the curated dataset in SUB's Hub layout
(``<out>/dataset``, which ``load_sub`` reads), the report, Figs. 6 and 9 and the annotations
as Parquet. The job is :func:`concept_grounding.curation.curate_job.run_curate`
(:class:`~concept_grounding.curation.curate_inputs.CurateConfig` declares the flags).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding import settings
from concept_grounding.curation.curate_inputs import CurateConfig
from concept_grounding.curation.curate_job import run_curate
from concept_grounding.curation.curate_report import CurateResult
from concept_grounding.jobs import Job, add_job_arguments

__all__ = ["JOB", "add_arguments", "run"]

JOB = Job("curate", CurateConfig, run_curate)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_job_arguments(parser, JOB, out_help="folder for the dataset and the report")


def run(args: argparse.Namespace) -> int:
    JOB(settings.from_args(CurateConfig, args), args.out, report=_print)
    return 0


def _print(res: CurateResult, report: Path) -> None:
    """What was kept (and the human s+ / s- when answers scored it), and the report written."""
    human = ""
    if res.human is not None:
        b, g = res.human["binary"], res.human["group"]
        human = (
            f"; Human s+/s- binary {100 * b['s_plus']:.1f}/{100 * b['s_minus']:.1f}, "
            f"group {100 * g['s_plus']:.1f}/{100 * g['s_minus']:.1f}"
        )
    print(
        f"kept {len(res.kept)} images, {int(res.attributes.kept.sum())} of {len(res.attributes)} attributes"
        f"{human}; report: {report}"
    )
