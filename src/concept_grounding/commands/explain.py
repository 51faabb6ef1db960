"""``concept-grounding explain``: CCI maps and overlays for images and texts -> PNG report.

Images come from ``--images`` (files) or, by default, the bird world; texts from
``--texts`` (one per image, or one shared) or, by default, the class prompt of each
world image's class; images may be of any size and aspect (each map is drawn at its own
image's size). The model is the shipped world CLIP unless ``--model`` names another
(``random-clip`` asks for random weights). Writes under ``--out``: ``explain.png`` (image, CCI
overlay, clusters, and with ``--baselines`` Grad-CAM, Grad-ECLIP, MaskCLIP and rollout overlays),
``explain.json`` (drops, weights, similarities per image) and ``report.md``. The job and its report writer live in
:mod:`concept_grounding.cci.explain_job` (``run_explain``, ``write_explain_report``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding import settings
from concept_grounding.cci.explain_job import ExplainConfig, check_text_count, run_explain
from concept_grounding.commands._types import existing_file
from concept_grounding.errors import UsageError
from concept_grounding.jobs import Job, add_job_arguments

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]

JOB = Job("explain", ExplainConfig, run_explain)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_job_arguments(parser, JOB)
    parser.add_argument(
        "--images", nargs="*", type=existing_file, default=None, help="image files (default: world samples)"
    )


def _read_image(path: Path):
    """``(H, W, 3) uint8`` of an image file; an unreadable one is a :class:`UsageError` naming it."""
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB"))
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as err:
        raise UsageError(f"not an image PIL can read ({type(err).__name__})", argument="--images", file=path) from None


def config_from_args(args: argparse.Namespace) -> ExplainConfig:
    """The job's configuration; text counts and image files are checked here, before any model loads."""
    if args.images and not args.texts:
        raise UsageError("give one text per image (or one for all) with --images", argument="--texts")
    n_images = len(args.images) if args.images else args.num
    if args.texts:
        try:
            check_text_count(len(args.texts), n_images)
        except ValueError as err:
            raise UsageError(str(err), argument="--texts") from None
    images = [_read_image(p) for p in args.images] if args.images else None
    return settings.from_args(ExplainConfig, args, images=images)


def run(args: argparse.Namespace) -> int:
    from concept_grounding.cci.loading import builtin_clip
    from concept_grounding.hub import resolve_model_spec

    if not builtin_clip(args.model):  # first, before torch: a model that cannot be loaded fails within seconds
        args.model = resolve_model_spec(
            args.model,
            "--model",
            pretrained=args.pretrained,
            pretrained_argument="--pretrained",
            accept=("folder", "name"),
        ).target
    JOB(config_from_args(args), args.out)
    return 0
