"""``concept-grounding explain``: CCI maps and overlays for images and texts -> PNG report.

Images come from ``--images`` (files) or, by default, the bird world; texts from
``--texts`` (one per image, or one shared) or, by default, the class prompt of each
world image's class. Writes under ``--out``: ``explain.png`` (image, CCI overlay, clusters,
and with ``--baselines`` Grad-CAM and rollout overlays), ``explain.json`` (drops, weights,
similarities per image) and ``report.md``. The job and its report writer live in
:mod:`concept_grounding.cci.explain_job` (``run_explain``, ``write_explain_report``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding.cci.explain_job import ExplainConfig, check_text_count, run_explain, write_explain_report
from concept_grounding.commands._types import existing_file, output_dir, positive_int
from concept_grounding.commands.covar import WORLD_SIZE
from concept_grounding.errors import UsageError


__all__ = ["add_arguments", "run", "config_from_args"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=output_dir, help="output folder")
    parser.add_argument("--images", nargs="*", type=existing_file, default=None, help="image files (default: world samples)")
    parser.add_argument("--texts", nargs="*", default=None, help="one text per image, or one for all (default: each world bird's class prompt)")
    parser.add_argument("--num", type=positive_int, default=4, help="world samples when --images is not given")
    parser.add_argument("--size", type=WORLD_SIZE, default=64,
                        help="world image side / tiny model input size (a multiple of 8, >= 32)")
    parser.add_argument("--model", default=None, help="WorldCLIP folder, open_clip name or transformers id/path "
                        "(default: tiny config-built open_clip CLIP, random weights)")
    parser.add_argument("--pretrained", default=None,
                        help="open_clip weights tag for an architecture --model (e.g. openai), a weights file, or "
                             "'random' for random weights on purpose (an architecture without it is refused)")
    parser.add_argument("--clusters", type=positive_int, default=7, help="K of the k-means")
    parser.add_argument("--seed", type=int, default=0, help="seed of the world samples, the k-means and the tiny model")
    parser.add_argument("--method", choices=("fast", "hook"), default="fast",
                        help="fast: cut a cluster by deleting its tokens; hook: by masking its attention")
    parser.add_argument("--baselines", action="store_true", help="also draw Grad-CAM and attention rollout")


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
    return ExplainConfig(images=images, texts=list(args.texts) if args.texts else None, num=args.num,
                         size=args.size, model=args.model, pretrained=args.pretrained, clusters=args.clusters, seed=args.seed,
                         method=args.method, baselines=args.baselines)


def run(args: argparse.Namespace) -> int:
    from concept_grounding.hub import resolve_model_spec

    if args.model:  # first, before torch: a model that cannot be loaded fails within seconds
        args.model = resolve_model_spec(args.model, "--model", pretrained=args.pretrained,
                                        pretrained_argument="--pretrained", accept=("folder", "name")).target
    config = config_from_args(args)
    write_explain_report(run_explain(config), args.out)
    return 0
