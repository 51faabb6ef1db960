"""``concept-grounding bench``: train or load concept models and score them on SUB.

With no arguments it runs on the bird world: renders train / test images and the exact
counterfactuals, trains the CBM family, a CEM, a post-hoc CBM and a small CLIP, and
writes ``report.md``, ``results.json``, plots, the models and ``config.json`` to ``--out``.
"""

from __future__ import annotations

import argparse

from concept_grounding import settings
from concept_grounding.bench.config import BenchConfig
from concept_grounding.bench.runner import run_bench_job
from concept_grounding.jobs import Job, add_out_argument
from concept_grounding.progress import log_lines

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]

#: ``config -> run -> result -> save`` (:mod:`concept_grounding.jobs`): the run writes its models
#: under ``config.out`` as it goes; the result's ``save`` writes the report.
JOB = Job("bench", BenchConfig, run_bench_job)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out``, the world settings :class:`~concept_grounding.world.WorldConfig` declares (at the
    bench's defaults, :data:`~concept_grounding.bench.config.BENCH_WORLD`), the settings
    :class:`~concept_grounding.bench.config.BenchConfig` declares, and the model flags (named
    models are resolved before the config is built; ``--crop-size`` joins ``--backbone``)."""
    from concept_grounding.bench.config import BENCH_WORLD
    from concept_grounding.world.config import WorldConfig

    add_out_argument(parser, help="report folder", default="reports/bench")
    settings.add_arguments(parser, WorldConfig, exclude=("deviation_rate",), defaults=BENCH_WORLD)
    settings.add_arguments(parser, BenchConfig)
    parser.add_argument(
        "--model",
        dest="clip_model",
        action="append",
        default=None,
        help="also evaluate a named open_clip / transformers model or local path in Table 2; repeat it "
        "for several, or 'paper' for SUB Table 2's six (CLIP B/32 and L/14, SigLIP B/16 and "
        "SO400M/16, SigLIP 2 B/16, EVA02-CLIP L/14, each with its weights; default: only the "
        "world CLIP)",
    )
    parser.add_argument(
        "--pretrained",
        default=None,
        help="open_clip weights tag for an architecture --model (e.g. openai), a weights file, or "
        "'random' for random weights on purpose (an architecture without it is refused)",
    )
    parser.add_argument(
        "--crop-size",
        type=int,
        default=None,
        help="standard backbones: crop side in px (default 224, Inception-v3 299)",
    )


def clip_models(names: list[str], pretrained: str | None) -> list[tuple[str, str | None]]:
    """``--model`` values as ``(name, weights tag)``: ``paper`` expands to SUB Table 2's six
    (:data:`~concept_grounding.bench.config.PAPER_CLIP_MODELS`, their own tags); every other
    name takes ``--pretrained``.

    >>> clip_models(["paper"], None)[0], clip_models(["ViT-B-16", "org/clip"], "openai")
    (('ViT-B-32', 'openai'), [('ViT-B-16', 'openai'), ('org/clip', 'openai')])
    """
    from concept_grounding.bench.config import PAPER_CLIP_MODELS

    out: list[tuple[str, str | None]] = []
    for name in names:
        out += list(PAPER_CLIP_MODELS) if name == "paper" else [(name, pretrained)]
    return out


def _is_open_clip_name(name: str) -> bool:
    """Whether ``name`` is an open_clip architecture (the names a weights tag applies to)."""
    import open_clip

    return name in open_clip.list_models()


def config_from_args(args: argparse.Namespace, named: list[tuple[str, str | None]] = ()) -> BenchConfig:
    """The run's configuration from the parsed arguments and the resolved ``(model, weights tag)`` of ``--model``."""
    from concept_grounding.bench.config import BENCH_WORLD
    from concept_grounding.world import WorldConfig

    world = settings.from_args(WorldConfig, args, deviation_rate=BENCH_WORLD.deviation_rate)
    return settings.from_args(
        BenchConfig,
        args,
        world=world,
        clip_model=tuple(n for n, _ in named) or None,
        clip_pretrained=tuple(t for _, t in named) or None,
        backbone={"kind": args.backbone, "crop_size": args.crop_size} if args.crop_size else args.backbone,
        out=args.out,
    )


def run(args: argparse.Namespace) -> int:
    from concept_grounding.bench.config import check_classes
    from concept_grounding.errors import UsageError
    from concept_grounding.hub import resolve_model_spec

    # 1. argument combinations and named models / datasets, before any training
    check_classes(args.class_names or None, "--classes")
    if args.cub_root and not args.sub:
        raise UsageError(
            "--cub-root needs a SUB source to build the SUB evaluation",
            argument="--sub",
            hint="pass --sub Jessica-bader/SUB or a local copy",
        )
    if args.sub:
        args.sub = resolve_model_spec(args.sub, "--sub", family="dataset").target
    if args.sub and not args.cub_root:  # a curated SUB of the world's classes, or a one-line error naming --cub-root
        from concept_grounding.bench.data import check_world_sub

        check_world_sub(args.sub, config_from_args(args, []))
    named = clip_models(args.clip_model or [], args.pretrained)
    named = [
        (
            resolve_model_spec(
                name, "--model", pretrained=tag, pretrained_argument="--pretrained", accept=("folder", "name")
            ).target,
            tag if _is_open_clip_name(name) else None,
        )
        for name, tag in named
    ]

    with log_lines():
        print(f"wrote {JOB(config_from_args(args, named), args.out)}")
    return 0
