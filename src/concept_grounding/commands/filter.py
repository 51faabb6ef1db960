"""``concept-grounding filter``: SUB's VQA filter over a generated image folder.

Reads ``<in>/metadata.jsonl`` (from ``concept-grounding generate``), scores every image's
multiple-choice question, keeps the top 10 % per pairing, and writes ``<out>/metadata.jsonl``
(kept rows, with ``target_probability``; ``file_name`` is the absolute path of the image in ``<in>``) plus
``filter_report.json`` / ``filter_report.md``. ``--validate-on-world`` first measures the
scorer on the bird world's exact counterfactuals (AUROC of p(S+) on edits vs originals, S+
accuracy; :func:`concept_grounding.judge.validate_scorer_on_world`) and writes
``scorer_validation.json`` / ``.md``; without ``--in`` it only validates. The job lives in
:mod:`concept_grounding.tdg.filter_job` (``FilterConfig``, ``filter_folder``, whose result's
``save`` writes the files); this module parses the arguments, maps them onto the config and
prints.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding import settings
from concept_grounding.commands._types import existing_dir, positive_int
from concept_grounding.jobs import Job
from concept_grounding.tdg.filter_job import FilterConfig, FilterJobResult, filter_folder

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]

JOB = Job("filter", FilterConfig, filter_folder)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    settings.add_arguments(parser, FilterConfig, defaults={"input": None})
    parser.add_argument(
        "--cub-root",
        type=existing_dir,
        default=None,
        help="CUB_200_2011 tree whose class-level labels --check-groups compares with (default: the bird world's)",
    )
    parser.add_argument(
        "--validate-on-world",
        type=positive_int,
        nargs="?",
        const=1,
        default=0,
        metavar="N",
        help="first validate the scorer on N exact bird-world edits per SUB pairing (N: 1 when the"
        " flag is given bare) and their originals: AUROC and S+ accuracy (default: 0, no validation)",
    )
    parser.add_argument(
        "--size",
        type=positive_int,
        default=128,
        help="image side of the validation world in pixels (--validate-on-world)",
    )
    # the flag's name before the image side had one name everywhere: still accepted, not listed
    parser.add_argument(
        "--world-size", dest="size", type=positive_int, default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )


def _attribute_judge(spec: str):
    """A judge's name or saved folder (a ``bench`` concept model, a world judge) as the filter's
    attribute judge (torch loads here)."""
    from concept_grounding.judge import attribute_judge

    return attribute_judge(spec)


def class_values(cub_root: Path | None) -> dict[str, set[str]]:
    """Each class's class-level attribute names: a CUB tree's, or the bird world's."""
    from concept_grounding.loaders.class_table import class_attribute_names, cub_class_matrix

    if cub_root is not None:
        return class_attribute_names(*cub_class_matrix(cub_root))
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig())
    return class_attribute_names(tuple(world.class_names), world.class_attributes)


def world_validation(per_pairing: int, size: int):
    """``scorer -> report``: the scorer on ``per_pairing`` exact bird-world edits per SUB pairing
    (:func:`concept_grounding.judge.validate_scorer_on_world`), at ``size`` px."""
    from functools import partial

    from concept_grounding.judge import validate_scorer_on_world
    from concept_grounding.world import BirdWorld, WorldConfig

    return partial(validate_scorer_on_world, world=BirdWorld(WorldConfig(image_size=size)), per_pairing=per_pairing)


def config_from_args(args: argparse.Namespace) -> FilterConfig:
    """The job's configuration (inputs and models are checked when the job runs)."""
    check = tuple(getattr(args, "check_groups", None) or ())
    validate = world_validation(args.validate_on_world, args.size) if getattr(args, "validate_on_world", 0) else None
    return settings.from_args(
        FilterConfig,
        args,
        judge_loader=_attribute_judge,
        check_groups=check,
        class_values=class_values(getattr(args, "cub_root", None)) if check else None,
        validate=validate,
    )


def run(args: argparse.Namespace) -> int:
    from concept_grounding.errors import options_as_flags

    with options_as_flags(settings.flags(FilterConfig)):  # errors name the flags, not the config's fields
        JOB(config_from_args(args), args.out, report=_print)
    return 0


def _print(result: FilterJobResult, report: Path) -> None:
    """The scorer's validation table (when asked), then what the filter kept."""
    if result.validation is not None:
        print(result.validation.to_markdown())
    if result.config.input is not None:
        print(f"kept {len(result.kept)} of {result.generated} images; report: {report}")
