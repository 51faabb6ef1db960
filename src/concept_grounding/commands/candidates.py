"""``concept-grounding candidates classes|attributes|plan``: SUB's candidate selection (Sec. 4.2).

* ``classes``: 20 generated images per class (``--images``, a folder with ``metadata.jsonl``;
  default: world renders) named by ``--classifier`` (default: the world judge's species
  head); a class is kept at ``--min-accuracy`` (1.0) -> ``classes.json`` / ``classes.md``.
* ``attributes``: a VQA ``--scorer`` on a CUB tree (``--cub-root``; default: world renders
  with their exact labels); an attribute is kept at ``--min-accuracy`` (0.90) at its best
  answer-probability threshold in 0.60-0.95 -> ``attributes.json`` / ``.md`` / ``.png``.
* ``plan``: the kept classes x kept attributes each class lacks -> ``pairings.jsonl``, which
  ``concept-grounding generate --pairings`` reads (S-, guide bird, N per pairing).

The paper's settings are the defaults. Errors name these flags. The job is
:func:`concept_grounding.curation.candidates.run_candidates` (one config, ``step`` picks the
step; each step's flags are the settings it reads).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from concept_grounding import settings
from concept_grounding.curation.candidates import (
    STEP_DEFAULTS,
    STEPS,
    CandidatesConfig,
    run_candidates,
    step_settings,
)
from concept_grounding.jobs import Job, add_job_arguments

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]

JOB = Job("candidates", CandidatesConfig, run_candidates)

_HELP = {
    "classes": "reference classes a classifier recognises in generated images",
    "attributes": "attributes a VQA scorer answers reliably on CUB images",
    "plan": "kept classes x kept attributes -> a pairings file for `generate`",
}
#: the plan's inputs are required flags of its step
_REQUIRED = {"plan": {"classes_file": dataclasses.MISSING, "attributes_file": dataclasses.MISSING}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    steps = parser.add_subparsers(dest="step", required=True, metavar="STEP", parser_class=type(parser))
    every = {s.name for s in settings.settings_of(CandidatesConfig)}
    for step in STEPS:
        sub = steps.add_parser(step, help=_HELP[step], formatter_class=parser.formatter_class)
        add_job_arguments(
            sub,
            JOB,
            out_default=Path("reports/candidates"),
            out_help="report folder",
            exclude=tuple(every - set(step_settings(step))),
            defaults={**STEP_DEFAULTS[step], **_REQUIRED.get(step, {})},
        )


def config_from_args(args: argparse.Namespace) -> CandidatesConfig:
    """The step's configuration; for a plan on a CUB tree, its class table (read here)."""
    table = None
    if args.step == "plan" and args.cub_root is not None:
        from concept_grounding.bench.data import class_matrix
        from concept_grounding.loaders import load_cub
        from concept_grounding.vocabulary import load_vocabulary

        train = load_cub(args.cub_root, min_class_count=None, progress=False)["train"]
        names = tuple(train.features["label"].names)
        table = (names, class_matrix(train, len(names), load_vocabulary().num_attributes))
    return settings.from_args(CandidatesConfig, args, step=args.step, class_table=table)


def run(args: argparse.Namespace) -> int:
    result = run_candidates(config_from_args(args))
    report = result.save(args.out)
    if result.classes is not None:
        print(f"{len(result.classes.kept)} of {len(result.classes.class_names)} classes kept; wrote {report}")
    elif result.attributes is not None:
        selection = result.attributes.selection
        print(f"{len(selection.kept)} of {len(selection.attributes)} attributes kept; wrote {report}")
    else:
        print(f"{len(result.plan.pairings)} pairings; wrote {args.out / 'pairings.jsonl'}")
    return 0
