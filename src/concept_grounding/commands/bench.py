"""``concept-grounding bench``: train or load concept models and score them on SUB.

With no arguments it runs on the bird world: renders train / test images and the exact
counterfactuals, trains the CBM family, a CEM, a post-hoc CBM and a small CLIP, and
writes ``report.md``, ``results.json``, plots, the models and ``config.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from concept_grounding.commands._types import (
    choice_of,
    class_name,
    existing_dir,
    int_at_least,
    nonnegative_float,
    nonnegative_int,
    output_dir,
    positive_int,
)

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from concept_grounding.bench.config import MODEL_VARIANTS, BenchConfig

    d = BenchConfig()
    parser.add_argument("--out", type=output_dir, default=Path("reports/bench"), help="report folder")
    parser.add_argument("--image-size", type=int_at_least(32), default=d.world.image_size,
                        help="world image side in pixels (on --cub-root: the side images are resized to)")
    parser.add_argument("--train-per-class", type=positive_int, default=d.train_per_class,
                        help="world training images per class")
    parser.add_argument("--test-per-class", type=positive_int, default=d.test_per_class, help="world test images per class")
    parser.add_argument("--sub-per-pairing", type=positive_int, default=d.sub_per_pairing,
                        help="world SUB counterfactuals per (class, attribute) pairing")
    parser.add_argument("--concepts", choices=("cbm_112", "rendered", "all"), default=d.concepts,
                        help="the concept set: Koh et al.'s 112 (on the world, those it renders), every attribute the world "
                             "renders, or all 312")
    parser.add_argument("--epochs", type=positive_int, default=d.epochs, help="training epochs of the concept models")
    parser.add_argument("--clip-epochs", type=positive_int, default=d.clip_epochs, help="training epochs of the world CLIP")
    parser.add_argument("--concept-loss-weight", type=nonnegative_float, default=d.concept_loss_weight,
                        help="weight of the concept loss in the joint CBM and the CEM")
    parser.add_argument("--models", nargs="*", type=choice_of(MODEL_VARIANTS, "model variant"), default=list(d.models),
                        metavar="NAME",
                        help=f"Table 1 variants (default: all of {list(MODEL_VARIANTS)})")
    parser.add_argument("--no-posthoc", action="store_true", help="skip the post-hoc CBM analysis")
    parser.add_argument("--no-clip", action="store_true", help="skip Table 2 (open-vocabulary models)")
    parser.add_argument("--cub-root", type=existing_dir, default=None, help="a CUB_200_2011 folder (load_cub) instead of the world (default: the world)")
    parser.add_argument("--sub", default=None, help="SUB source for --cub-root: 'Jessica-bader/SUB' or a local copy (default: none; required with --cub-root)")
    parser.add_argument("--min-class-count", type=nonnegative_int, default=d.min_class_count,
                        help="with --cub-root: keep class-level attributes on for >= this many classes (CBM rule)")
    parser.add_argument("--model", dest="clip_model", action="append", default=None,
                        help="also evaluate a named open_clip / transformers model or local path in Table 2; repeat it "
                             "for several, or 'paper' for SUB Table 2's six (CLIP B/32 and L/14, SigLIP B/16 and "
                             "SO400M/16, SigLIP 2 B/16, EVA02-CLIP L/14, each with its weights; default: only the "
                             "world CLIP)")
    parser.add_argument("--pretrained", default=None,
                        help="open_clip weights tag for an architecture --model (e.g. openai), a weights file, or "
                             "'random' for random weights on purpose (an architecture without it is refused)")
    parser.add_argument("--classes", nargs="*", type=class_name, default=None, help="world classes (CUB folder names; default SUB's 33)")
    parser.add_argument("--seed", type=int, default=d.world.seed, help="seed of the world and of every training run")
    parser.add_argument("--backbone", default=d.backbone,
                        help="cnn (small CNN), resnet18, resnet50, inception_v3 or timm:<name> (CUB augmentation inside)")
    parser.add_argument("--crop-size", type=int, default=None,
                        help="standard backbones: crop side in px (default 224, Inception-v3 299)")
    parser.add_argument("--backbone-weights", default=None, help="initial backbone weights: a local file or Hub id (default: the backbone's own initialisation)")


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


def run(args: argparse.Namespace) -> int:
    from concept_grounding.errors import UsageError
    from concept_grounding.hub import resolve_model, resolve_model_spec

    from concept_grounding.bench.config import check_classes

    # 1. argument combinations and named models / datasets, before any training
    check_classes(args.classes or None, "--classes")
    if args.cub_root and not args.sub:
        raise UsageError("--cub-root needs a SUB source to build the SUB evaluation", argument="--sub",
                         hint="pass --sub Jessica-bader/SUB or a local copy")
    if args.sub and not args.cub_root:
        raise UsageError("is read only with --cub-root (the world makes its own SUB)", argument="--sub")
    if args.sub:
        args.sub = resolve_model(args.sub, "--sub", repo_type="dataset")
    named = clip_models(args.clip_model or [], args.pretrained)
    named = [(resolve_model_spec(name, "--model", pretrained=tag, pretrained_argument="--pretrained",
                                 accept=("folder", "name")).target,
              tag if _is_open_clip_name(name) else None) for name, tag in named]

    from concept_grounding.bench import BenchConfig, run_bench
    from concept_grounding.bench.artifacts import BenchArtifacts
    from concept_grounding.world import WorldConfig

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    world = WorldConfig(image_size=args.image_size, class_names=tuple(args.classes) if args.classes else None,
                        seed=args.seed)
    config = BenchConfig(
        world=world, train_per_class=args.train_per_class, test_per_class=args.test_per_class,
        sub_per_pairing=args.sub_per_pairing, concepts=args.concepts, epochs=args.epochs,
        clip_epochs=args.clip_epochs, concept_loss_weight=args.concept_loss_weight, models=tuple(args.models),
        posthoc=not args.no_posthoc, clip=not args.no_clip, cub_root=str(args.cub_root) if args.cub_root else None, sub=args.sub, min_class_count=args.min_class_count,
        clip_model=tuple(n for n, _ in named) or None, clip_pretrained=tuple(t for _, t in named) or None,
        backbone={"kind": args.backbone, "crop_size": args.crop_size} if args.crop_size else args.backbone,
        backbone_weights=args.backbone_weights,
    )
    run_bench(config, args.out)
    print(f"wrote {BenchArtifacts(args.out).report_md}")
    return 0
