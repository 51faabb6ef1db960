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
``--save-dataset``). The job and its report writer live in :mod:`concept_grounding.cci.covar_job`
(``run_covar``, ``write_covar_report``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding.cci.covar_job import INPAINT_PROMPTS, CovarConfig, run_covar, write_covar_report
from concept_grounding.commands._types import (
    closed_unit_interval, existing_dir, existing_file, float_range, multiple_of, output_dir, positive_int,
    world_clip_side,
)

#: a cosine similarity
COSINE = float_range(-1.0, 1.0)


__all__ = ["add_arguments", "run", "config_from_args"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=output_dir, help="output folder")
    parser.add_argument("--objects", type=positive_int, default=4, help="world birds to vary")
    parser.add_argument("--backgrounds", type=positive_int, default=20, help="backgrounds per bird")
    parser.add_argument("--size", type=world_clip_side, default=64, help="world image side in pixels (a multiple of 8, >= 32)")
    parser.add_argument("--model", default=None, help="WorldCLIP folder, open_clip name or transformers id/path "
                        "(default: tiny config-built open_clip CLIP, random weights)")
    parser.add_argument("--pretrained", default=None,
                        help="open_clip weights tag for an architecture --model (e.g. openai), a weights file, or "
                             "'random' for random weights on purpose (an architecture without it is refused)")
    parser.add_argument("--clusters", type=positive_int, default=7, help="K of the k-means over patch tokens")
    parser.add_argument("--images", type=existing_dir, default=None,
                        help="an image folder (one sub-folder per class, masks in masks/<class>/<stem>.png) whose "
                             "images replace the world birds (default: the world)")
    parser.add_argument("--class-names", type=existing_file, default=None,
                        help="class names of --images: one per line in sorted-folder order, or '<folder> <name>' lines")
    parser.add_argument("--detector", default=None,
                        help="zero-shot object detector (OWL-ViT, OWLv2, Grounding DINO; Hub id or folder) that, with "
                             "--segmenter, computes the masks --images lacks")
    parser.add_argument("--segmenter", default=None, help="SAM checkpoint (Hub id or folder) segmenting the detected box")
    parser.add_argument("--detector-threshold", type=closed_unit_interval, default=0.1, help="the detector's box score threshold")
    parser.add_argument("--mask-cache", type=Path, default=None,
                        help="folder caching computed masks, one PNG per image (default: OUT/mask_cache)")
    parser.add_argument("--judge", choices=("attributes", "text"), default=None,
                        help="Fine-Er judge (default: attributes on the world, text with --images)")
    parser.add_argument("--judge-threshold", type=COSINE, default=None,
                        help="cosine above which two classes are similar (default: the 90th percentile of class pairs)")
    parser.add_argument("--threshold", type=closed_unit_interval, default=0.5,
                        help="map binarisation, fraction of the maximum, in [0, 1]")
    parser.add_argument("--steps", type=positive_int, default=10, help="Deletion/Insertion steps")
    parser.add_argument("--seed", type=int, default=0, help="seed of the world, the backgrounds and the k-means")
    parser.add_argument("--save-dataset", action="store_true", help="save the COVAR dataset with save_to_disk")
    parser.add_argument("--inpaint-model", default=None,
                        help="diffusers inpainting checkpoint (Hub id or folder): generate object-free backgrounds "
                        "from --inpaint-prompts instead of the procedural ones (--backgrounds is then ignored; "
                        "default: procedural backgrounds)")
    parser.add_argument("--inpaint-prompts", nargs="+", default=list(INPAINT_PROMPTS), metavar="PROMPT",
                        help="one generated background per prompt (--inpaint-model)")
    parser.add_argument("--inpaint-size", type=multiple_of(8, why="the VAE downsamples by 8"), default=512, help="generation side in pixels (--inpaint-model)")
    parser.add_argument("--inpaint-steps", type=positive_int, default=30, help="denoising steps (--inpaint-model)")


def config_from_args(args: argparse.Namespace) -> CovarConfig:
    """The job's configuration from the parsed (and model-resolved) arguments."""
    from concept_grounding.errors import UsageError

    if args.images is not None and args.judge == "attributes":
        raise UsageError("needs the world's class attribute vectors; use --judge text with --images", argument="--judge")
    judge = args.judge or ("text" if args.images is not None else "attributes")
    if (args.detector is None) != (args.segmenter is None):
        raise UsageError("give --detector and --segmenter together (a grounded segmenter)",
                         argument="--detector" if args.detector is None else "--segmenter")
    if args.detector is not None and args.images is None:
        raise UsageError("computes masks for --images (the world's are exact)", argument="--detector")
    return CovarConfig(objects=args.objects, backgrounds=args.backgrounds, size=args.size, model=args.model, pretrained=args.pretrained,
                       clusters=args.clusters, judge=judge, judge_threshold=args.judge_threshold,
                       threshold=args.threshold, steps=args.steps, seed=args.seed, inpaint_model=args.inpaint_model,
                       inpaint_prompts=tuple(args.inpaint_prompts), inpaint_size=args.inpaint_size,
                       inpaint_steps=args.inpaint_steps, images=None if args.images is None else str(args.images),
                       class_names_file=None if args.class_names is None else str(args.class_names),
                       detector=args.detector, segmenter=args.segmenter, detector_threshold=args.detector_threshold,
                       mask_cache=str(args.mask_cache or args.out / "mask_cache") if args.detector else None)


def run(args: argparse.Namespace) -> int:
    from concept_grounding.hub import resolve_model, resolve_model_spec

    # named models first (before torch): a model that cannot be loaded fails within seconds
    if args.model:
        args.model = resolve_model_spec(args.model, "--model", pretrained=args.pretrained,
                                        pretrained_argument="--pretrained", accept=("folder", "name")).target
    if args.inpaint_model:
        args.inpaint_model = resolve_model(args.inpaint_model, "--inpaint-model")
    for flag in ("detector", "segmenter"):
        if getattr(args, flag):
            setattr(args, flag, resolve_model(getattr(args, flag), f"--{flag}"))
    config = config_from_args(args)
    write_covar_report(run_covar(config), args.out, save_dataset=args.save_dataset)
    return 0
