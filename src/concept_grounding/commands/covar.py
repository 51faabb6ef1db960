"""``concept-grounding covar``: build COVAR on the world or an image folder, evaluate a CLIP, diagnose errors.

Steps: (1) render ``--objects`` world birds (image, mask, label), or take them from ``--images``
(one sub-folder per class, with given masks in ``masks/``), and build their COVAR
variants (``--backgrounds`` procedural backgrounds, or one generated background per
``--inpaint-prompts`` with ``--inpaint-model``, x identity + 11 transforms); (2) zero-shot classify every
variant with class prompts; (3) explain the predicted class with CCI and split the errors
into BG-Er / Fine-Er / FG-Er (judge: the world's class attribute vectors, or the prompts'
text embeddings); (4) on the untransformed birds, the known-truth checks for CCI and the
baselines: share of importance inside the bird mask and the pointing game against the
visible parts, plus Deletion/Insertion AUCs. Writes under ``--out``: ``accuracy_bg_er.png``,
``shares.png``, ``overlays.png``, ``covar.json``, ``report.md`` (and ``dataset/`` with
``--save-dataset``). The job lives in :mod:`concept_grounding.cci.covar_job` (``run_covar``,
``CovarResult.save``), its settings in :mod:`concept_grounding.cci.covar_config` (``CovarConfig``).
"""

from __future__ import annotations

import argparse

from concept_grounding import settings
from concept_grounding.cci.covar_config import CovarConfig
from concept_grounding.cci.covar_job import run_covar
from concept_grounding.jobs import Job, add_job_arguments

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]

JOB = Job("covar", CovarConfig, run_covar)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out`` and the settings :class:`~concept_grounding.cci.covar_config.CovarConfig` declares (the
    judge's default follows ``--images``)."""
    add_job_arguments(parser, JOB)
    parser.set_defaults(judge=None)  # config_from_args picks it: text with --images, else attributes


def config_from_args(args: argparse.Namespace) -> CovarConfig:
    """The job's configuration from the parsed (and model-resolved) arguments."""
    from concept_grounding.errors import UsageError

    if args.images is not None and args.judge == "attributes":
        raise UsageError(
            "needs the world's class attribute vectors; use --judge text with --images", argument="--judge"
        )
    judge = args.judge or ("text" if args.images is not None else "attributes")
    if (args.detector is None) != (args.segmenter is None):
        raise UsageError(
            "give --detector and --segmenter together (a grounded segmenter)",
            argument="--detector" if args.detector is None else "--segmenter",
        )
    if args.detector is not None and args.images is None:
        raise UsageError("computes masks for --images (the world's are exact)", argument="--detector")
    return settings.from_args(
        CovarConfig,
        args,
        judge=judge,
        mask_cache=str(args.mask_cache or args.out / "mask_cache") if args.detector else None,
    )


def run(args: argparse.Namespace) -> int:
    from concept_grounding.cci.loading import builtin_clip
    from concept_grounding.hub import resolve_model_spec

    # named models first (before torch): a model that cannot be loaded fails within seconds
    if not builtin_clip(args.model):
        args.model = resolve_model_spec(
            args.model,
            "--model",
            pretrained=args.pretrained,
            pretrained_argument="--pretrained",
            accept=("folder", "name"),
        ).target
    if args.inpaint_model:
        args.inpaint_model = resolve_model_spec(args.inpaint_model, "--inpaint-model", family="hub").target
    for flag in ("detector", "segmenter"):
        if getattr(args, flag):
            setattr(args, flag, resolve_model_spec(getattr(args, flag), f"--{flag}", family="hub").target)
    JOB(config_from_args(args), args.out)
    return 0
