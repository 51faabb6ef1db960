"""``concept-grounding cci-bench``: the CCI paper's faithfulness tables across CLIPs, one command each.

* ``--task classification --images DIR [--class-names FILE]``: Table 1 (zero-shot
  classification Del@1/@5, Ins@1/@5) on an ImageNet-style folder (one folder per class).
* ``--task retrieval --coco DIR``: Table 2 (Del/Ins IR@k, TR@k) on a COCO Karpathy folder
  (``dataset_coco.json`` and its images; ``--split``, default ``test``).

Without ``--images`` / ``--coco`` the bird world is exported in that layout under
``OUT/data`` (exact masks beside) and used. ``--models`` takes several CLIPs (and the preset
``paper``); each row of the table is one model x method (CCI, random, Grad-CAM, Grad-ECLIP,
MaskCLIP, rollout). A model whose tower CCI cannot mask appears as refused with the reason.
Everything is loaded and checked before any file is written. The job (config, run, result)
lives in :mod:`concept_grounding.cci.tables_job`, the harness in
:mod:`concept_grounding.cci.tables`, the layouts in :mod:`concept_grounding.cci.layouts`.
"""

from __future__ import annotations

import argparse

from concept_grounding import settings
from concept_grounding.cci.tables_job import CciBenchConfig, run_cci_bench
from concept_grounding.jobs import Job, add_job_arguments

__all__ = ["JOB", "add_arguments", "run"]

JOB = Job("cci-bench", CciBenchConfig, run_cci_bench)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_job_arguments(
        parser,
        JOB,
        out_default="reports/cci-bench",
        out_help="report folder (the world is exported under OUT/data when no folder is given)",
    )


def run(args: argparse.Namespace) -> int:
    from concept_grounding.cci.table_models import resolve_table_models

    resolve_table_models(args.models)  # first, before torch: a model that cannot be loaded fails within seconds
    report = JOB(settings.from_args(CciBenchConfig, args, out=args.out), args.out)
    print(f"wrote {report}")
    return 0
