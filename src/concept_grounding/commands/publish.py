"""``concept-grounding publish``: build every Hub repo as a folder, offline; ``--push`` uploads them.

See :mod:`concept_grounding.publish` for the repos and the folder layout. Every check
(namespace and repo names, ``--bench``, ``--out``, the token with ``--push``) runs
before anything is rendered or written. The job and its settings live in
:mod:`concept_grounding.publish.job` (``PublishJobConfig``, ``run_publish``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding import settings
from concept_grounding.jobs import Job
from concept_grounding.progress import log_lines
from concept_grounding.publish.job import UPLOAD_SETTINGS, WORLD_SETTINGS, PublishJobConfig, run_publish

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]

#: it builds the repo folders under ``--out`` as it goes (then uploads them with ``--push``)
JOB = Job("publish", PublishJobConfig, run_publish)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The settings :class:`PublishJobConfig` declares, in three groups, and ``--out`` (any
    path: the build refuses a file or a folder it did not make, naming ``--out``)."""
    names = {s.name for s in settings.settings_of(PublishJobConfig)}
    settings.add_arguments(parser, PublishJobConfig, exclude=names - {"namespace"})
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        help="folder for one sub-folder per repo (new, empty, or made by an earlier publish)",
    )
    settings.add_arguments(parser, PublishJobConfig, exclude=names - {"bench", "wheel"})
    groups = (
        ("bird world datasets (the `concept-grounding world` settings)", WORLD_SETTINGS),
        ("upload", UPLOAD_SETTINGS),
    )
    for title, group in groups:
        settings.add_arguments(parser.add_argument_group(title), PublishJobConfig, exclude=names - set(group))


def config_from_args(args: argparse.Namespace) -> PublishJobConfig:
    """The job's configuration from the parsed arguments (the world settings are checked when it runs)."""
    return settings.from_args(PublishJobConfig, args, out=args.out)


def run(args: argparse.Namespace) -> int:
    with log_lines():
        result = JOB.run(config_from_args(args))
        result.save(args.out)
    for line in result.lines():
        print(line)
    return 0
