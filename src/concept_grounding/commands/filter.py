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
from concept_grounding.errors import UsageError
from concept_grounding.jobs import Job
from concept_grounding.tdg.filter_job import FilterConfig, build_scorer, filter_folder

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
    import numpy as np

    from concept_grounding.vocabulary import load_vocabulary

    vocab = load_vocabulary()
    if cub_root is not None:
        from concept_grounding.bench.data import class_matrix
        from concept_grounding.loaders import load_cub

        train = load_cub(cub_root, min_class_count=None, progress=False)["train"]
        names = tuple(train.features["label"].names)
        table = class_matrix(train, len(names), vocab.num_attributes)
    else:
        from concept_grounding.world import BirdWorld, WorldConfig

        world = BirdWorld(WorldConfig())
        names, table = tuple(world.class_names), world.class_attributes
    return {c: {vocab.attributes[j] for j in np.flatnonzero(row)} for c, row in zip(names, table)}


def config_from_args(args: argparse.Namespace) -> FilterConfig:
    """The job's configuration (inputs and models are checked when the job runs)."""
    check = tuple(getattr(args, "check_groups", None) or ())
    if check:
        from concept_grounding.vocabulary import load_vocabulary

        unknown = [g for g in check if g not in load_vocabulary().groups]
        if unknown:
            raise UsageError(
                f"unknown attribute group(s) {unknown}",
                argument="--check-groups",
                hint="groups are written like bill_color, wing_pattern",
            )
    return settings.from_args(
        FilterConfig,
        args,
        judge_loader=_attribute_judge,
        check_groups=check,
        class_values=class_values(getattr(args, "cub_root", None)) if check else None,
    )


def validate_scorer(scorer, args: argparse.Namespace) -> None:
    """Validate ``scorer`` on the world (``--validate-on-world``), write and print the table."""
    import json

    from concept_grounding.fileio import atomic_write_lines
    from concept_grounding.judge import validate_scorer_on_world
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=args.size))
    report = validate_scorer_on_world(scorer, world, per_pairing=args.validate_on_world)
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_lines(args.out / "scorer_validation.json", [json.dumps(report.to_dict(), indent=1)])
    atomic_write_lines(args.out / "scorer_validation.md", [report.to_markdown()])
    print(report.to_markdown())


def run(args: argparse.Namespace) -> int:
    from concept_grounding.errors import options_as_flags

    with options_as_flags(settings.flags(FilterConfig)):  # errors name the flags, not the config's fields
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    if args.input is None and not args.validate_on_world:
        raise UsageError("is required (or pass --validate-on-world to validate the scorer only)", argument="--in")
    config = config_from_args(args)
    scorer = None
    if args.validate_on_world:
        scorer = build_scorer(config)
        validate_scorer(scorer, args)
    if args.input is None:
        return 0
    result = filter_folder(config, scorer)  # JOB.run, with the scorer validated above
    report = result.save(args.out)
    print(f"kept {len(result.kept)} of {result.generated} images; report: {report}")
    return 0
