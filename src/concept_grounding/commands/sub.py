"""``concept-grounding sub``: SUB accuracy of any model, written as a report folder.

``--model`` takes a saved project model folder, ``path/to/file.py:factory`` or
``package.module:factory`` (returning the model, optionally with its transform and concept
names), or an open_clip / transformers CLIP name or path. ``--sub`` takes a local SUB copy
or the Hub id; without it the bird world's SUB export is used. Under ``accelerate launch``
the images are split across the processes; the main process writes the report.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments", "run"]


def _floats(text: str) -> tuple[float, ...]:
    values = tuple(float(v) for v in text.split(","))
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"expected three comma-separated numbers (R,G,B), got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True,
                        help="saved model folder, file.py:factory, package.module:factory, or a CLIP name / path")
    parser.add_argument("--sub", default=None, help="SUB source: local copy or 'Jessica-bader/SUB' (default: the world's)")
    parser.add_argument("--split", default=None, help="split of the SUB source (default: its only one, or 'test')")
    parser.add_argument("--cub-root", default=None,
                        help="CUB_200_2011 folder whose class-level labels give S- to sources without it (SUB's Hub copy)")
    parser.add_argument("--out", type=Path, default=Path("reports/sub"), help="report folder")
    parser.add_argument("--protocol", choices=("paper", "official"), default="paper",
                        help="'paper' (docs/sub_accuracy.md) or 'official' (SUB's published evaluation code)")
    parser.add_argument("--concept-names", default=None,
                        help="the model's columns: cub_312, cbm_112, sub, or a file with one name (or index) per line")
    parser.add_argument("--index-base", choices=("cub_312", "cbm_112"), default="cub_312",
                        help="what integer concept names index")
    parser.add_argument("--output", default=None, help="which part of a tuple / dict / dataclass output holds the concepts")
    parser.add_argument("--outputs", choices=("logits", "probabilities"), default=None,
                        help="the concept output is logits (default) or probabilities")
    parser.add_argument("--image-size", type=int, default=None, help="resize images to this side (px)")
    parser.add_argument("--mean", type=_floats, default=None, help="per-channel mean, e.g. 0.485,0.456,0.406")
    parser.add_argument("--std", type=_floats, default=None, help="per-channel std, e.g. 0.229,0.224,0.225")
    parser.add_argument("--include-none", action="store_true", help="open-vocabulary: add the 'none' prompt (paper)")
    parser.add_argument("--device", default=None, help="e.g. cpu, cuda, cuda:1 (default: where the model is)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default=None,
                        help="precision the model runs in (default: the model's own)")
    parser.add_argument("--batch-size", type=int, default=64, help="images per forward pass")
    parser.add_argument("--world-size", type=int, default=64, help="world SUB export: image side (px)")
    parser.add_argument("--world-seed", type=int, default=0, help="world SUB export: seed")
    parser.add_argument("--per-pairing", type=int, default=1, help="world SUB export: images per (class, attribute)")
    parser.add_argument("--classes", nargs="*", default=None, help="world SUB export: class folder names (default: 33)")
    parser.add_argument("--save-scores", action="store_true", help="also write the score matrix (scores.npz)")
    parser.add_argument("--no-progress", action="store_true", help="show no progress bars")


def _concept_names(text: str | None):
    if text is None or text in ("cub_312", "all", "cbm_112", "sub"):
        return text
    path = Path(text)
    if not path.is_file():
        raise ValueError(f"--concept-names {text!r}: not a named set (cub_312, cbm_112, sub) or a file")
    lines = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    return [int(v) if v.isdigit() else v for v in lines]


def _source_options(args: argparse.Namespace) -> dict:
    if args.sub is None:
        return {"image_size": args.world_size, "seed": args.world_seed, "per_pairing": args.per_pairing,
                "classes": args.classes}
    options: dict = {"split": args.split}
    if args.cub_root:
        from concept_grounding.bench.data import class_matrix
        from concept_grounding.loaders import load_cub
        from concept_grounding.vocabulary import load_vocabulary

        train = load_cub(args.cub_root, min_class_count=None, progress=not args.no_progress)["train"]
        names = tuple(train.features["label"].names)
        options.update(class_attributes=class_matrix(train, len(names), load_vocabulary().num_attributes),
                       class_names=names)
    return options


def run(args: argparse.Namespace) -> int:
    from concept_grounding.evaluation import evaluate_sub, load_model
    from concept_grounding.evaluation.distributed import process_info

    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {args.batch_size}")
    overrides = dict(concept_names=_concept_names(args.concept_names), output=args.output, outputs=args.outputs,
                     mean=args.mean, std=args.std)
    if args.index_base != "cub_312":
        overrides["index_base"] = args.index_base
    output = args.output
    if output is not None and output.lstrip("-").isdigit():
        overrides["output"] = int(output)
    model = load_model(args.model, image_size=args.image_size, include_none=args.include_none, device=args.device,
                       **overrides)
    result = evaluate_sub(model, args.sub, protocol=args.protocol, batch_size=args.batch_size, device=args.device,
                          dtype=args.dtype, progress=not args.no_progress, source_options=_source_options(args))
    result.model = args.model
    if process_info().is_main:
        result.save(args.out, scores=args.save_scores)
        print(f"s+ {result.s_plus:.4f} (chance {result.chance_s_plus:.4f})  "
              f"s- {result.s_minus:.4f} (chance {result.chance_s_minus:.4f})  "
              f"{result.num_images} images, {result.images_per_second:.1f} images/s")
        print(f"wrote {args.out / 'report.md'}")
    return 0
