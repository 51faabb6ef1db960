"""``concept-grounding diagnose``: BG-Er / Fine-Er / FG-Er of a CLIP's errors on an image folder.

``--images DIR``: an ImageNet-style folder, or CounterAnimals' layout (``easy`` / ``hard``, or
``common`` / ``counter``, sub-folders, each one folder per class), whose shares are given per
subset, for each of ``--models`` in one table. Masks come from the folder's ``masks/`` or from a
grounded segmenter (``--detector`` and ``--segmenter``, computed once per image, cached under
``--mask-cache`` and reused by every model); with both, the report states how far the
diagnosis with computed masks agrees with the one with the given masks. The job lives in
:mod:`concept_grounding.cci.diagnose_job`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding.commands._types import closed_unit_interval, existing_dir, existing_file, int_at_least, positive_int

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--images", type=existing_dir, required=True,
                        help="ImageNet-style folder, or CounterAnimals' easy/hard (common/counter) layout")
    parser.add_argument("--class-names", type=existing_file, default=None,
                        help="class names: one per line in sorted-folder order, or '<folder> <name>' lines")
    parser.add_argument("--models", nargs="+", default=["tiny"],
                        help="CLIPs (as cci-bench: open_clip arch[:pretrained], transformers id or folder, WorldCLIP "
                             "folder, tiny[:seed], the preset 'paper'). Masks are computed once and reused by every model")
    parser.add_argument("--detector", default=None, help="zero-shot object detector (Hub id or folder) for computed masks")
    parser.add_argument("--segmenter", default=None, help="SAM checkpoint (Hub id or folder) for computed masks")
    parser.add_argument("--detector-threshold", type=closed_unit_interval, default=0.1, help="box score threshold")
    parser.add_argument("--mask-cache", type=Path, default=None, help="computed-mask cache (default: OUT/mask_cache)")
    parser.add_argument("--size", type=int_at_least(32), default=64, help="input size of the tiny default CLIP")
    parser.add_argument("--clusters", type=positive_int, default=7, help="K of CCI's k-means")
    parser.add_argument("--threshold", type=closed_unit_interval, default=0.5, help="map binarisation, fraction of the max")
    parser.add_argument("--max-images", type=positive_int, default=None, help="first N images per class")
    parser.add_argument("--seed", type=int, default=0, help="k-means and tiny-model seed")
    parser.add_argument("--out", type=Path, default=Path("reports/diagnose"), help="report folder")


def run(args: argparse.Namespace) -> int:
    from concept_grounding.cci.diagnose_job import run_diagnose, write_diagnose_report
    from concept_grounding.errors import UsageError
    from concept_grounding.hub import resolve_model_spec

    if (args.detector is None) != (args.segmenter is None):
        raise UsageError("give --detector and --segmenter together (a grounded segmenter)",
                         argument="--detector" if args.detector is None else "--segmenter")
    from concept_grounding.cci.tables import load_table_models

    models = [handle for _, handle in load_table_models([m or "tiny" for m in args.models], image_size=args.size)]
    segmenter = None
    if args.detector:
        from concept_grounding.cci.segment import GroundedSegmenter

        segmenter = GroundedSegmenter.from_pretrained(resolve_model_spec(args.detector, "--detector", family="hub").target,
                                                      resolve_model_spec(args.segmenter, "--segmenter", family="hub").target,
                                                      threshold=args.detector_threshold,
                                                      cache_dir=args.mask_cache or args.out / "mask_cache")
    results = [run_diagnose(args.images, class_names=args.class_names, model=model, size=args.size,
                            clusters=args.clusters, seed=args.seed, threshold=args.threshold, segmenter=segmenter,
                            max_per_class=args.max_images) for model in models]
    print(f"wrote {write_diagnose_report(results, args.out)}")
    return 0
