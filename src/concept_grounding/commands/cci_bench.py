"""``concept-grounding cci-bench``: the CCI paper's faithfulness tables across CLIPs, one command each.

* ``--task classification --images DIR [--class-names FILE]``: Table 1 (zero-shot
  classification Del@1/@5, Ins@1/@5) on an ImageNet-style folder (one folder per class).
* ``--task retrieval --coco DIR``: Table 2 (Del/Ins IR@k, TR@k) on a COCO Karpathy folder
  (``dataset_coco.json`` and its images; ``--split``, default ``test``).

Without ``--images`` / ``--coco`` the bird world is exported in that layout under
``OUT/data`` (exact masks beside) and used. ``--models`` takes several CLIPs (and the preset
``paper``); each row of the table is one model x method (CCI, random, Grad-CAM, Grad-ECLIP,
MaskCLIP, rollout). A model whose tower CCI cannot mask appears as refused with the reason.
Everything is loaded and checked before any file is written. The harness lives in
:mod:`concept_grounding.cci.tables`, the layouts in :mod:`concept_grounding.cci.layouts`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding.commands._types import existing_dir, existing_file, int_at_least, positive_int

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from concept_grounding.cci.tables import METHODS

    parser.add_argument("--task", choices=("classification", "retrieval"), default="classification",
                        help="Table 1 (classification) or Table 2 (retrieval)")
    parser.add_argument("--images", type=existing_dir, default=None,
                        help="ImageNet-style folder, one sub-folder per class (default: the world exported there)")
    parser.add_argument("--class-names", type=existing_file, default=None,
                        help="class names: one per line in sorted-folder order, or '<folder> <name>' lines")
    parser.add_argument("--coco", type=existing_dir, default=None,
                        help="COCO folder with the Karpathy split dataset_coco.json (default: the world exported there)")
    parser.add_argument("--split", default="test", help="Karpathy split to use")
    parser.add_argument("--models", nargs="+", default=["tiny"],
                        help="CLIPs: open_clip arch[:pretrained], transformers id or folder, WorldCLIP folder, "
                             "tiny[:seed] (config-built, random weights), or the preset 'paper'")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS, help="explanation methods")
    parser.add_argument("--steps", type=positive_int, default=10, help="deletion / insertion fractions (steps + 1 points)")
    parser.add_argument("--clusters", type=positive_int, default=7, help="K of CCI's k-means")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="images per batch")
    parser.add_argument("--max-images", type=positive_int, default=None,
                        help="first N images per class (classification) or of the split (retrieval)")
    parser.add_argument("--replacement", choices=("blur", "noise", "mean"), default="blur", help="what deleted pixels become")
    parser.add_argument("--size", type=int_at_least(32), default=64, help="input size of tiny models and of world exports")
    parser.add_argument("--world-images", type=positive_int, default=4,
                        help="world images per class (classification) or in all (x 4, retrieval) when exporting")
    parser.add_argument("--seed", type=int, default=0, help="seed of the world, the k-means and tiny models")
    parser.add_argument("--device", default="cpu", help="e.g. cpu, cuda")
    parser.add_argument("--out", type=Path, default=Path("reports/cci-bench"), help="report folder")
    parser.add_argument("--no-progress", action="store_true", help="show no progress bars")


def _data(args: argparse.Namespace):
    """The task's data set, read from its flag's folder or exported from the world."""
    from concept_grounding.cci.layouts import (
        export_world_image_folder, export_world_karpathy, read_image_folder, read_karpathy,
    )
    from concept_grounding.errors import UsageError

    if args.task == "classification":
        if args.coco is not None:
            raise UsageError("is for --task retrieval", argument="--coco")
        root, names = args.images, args.class_names
        if root is None:
            root = export_world_image_folder(args.out / "data" / "images", per_class=args.world_images,
                                             image_size=args.size, seed=args.seed)
            names = names or root / "class_names.txt"
        return read_image_folder(root, names, max_per_class=args.max_images)
    if args.images is not None:
        raise UsageError("is for --task classification", argument="--images")
    root = args.coco or export_world_karpathy(args.out / "data" / "coco", num_images=4 * args.world_images,
                                              image_size=args.size, seed=args.seed)
    return read_karpathy(root, args.split, max_images=args.max_images)


def run(args: argparse.Namespace) -> int:
    from concept_grounding.cci.faithfulness import Replacement
    from concept_grounding.cci.tables import classification_table, load_table_models, retrieval_table, write_cci_tables

    models = load_table_models(args.models, image_size=args.size, device=args.device)
    data = _data(args)
    table = classification_table if args.task == "classification" else retrieval_table
    rows = table(models, data, methods=args.methods, steps=args.steps, clusters=args.clusters, seed=args.seed,
                 batch_size=args.batch_size, replacement=Replacement(args.replacement, seed=args.seed),
                 progress=not args.no_progress)
    source = args.images or args.coco or "the bird world (exported under data/)"
    header = (f"{len(data.paths)} images from {source}; {args.steps + 1} fractions, replacement {args.replacement}, "
              f"K = {args.clusters}, seed {args.seed}. Models: " + ", ".join(f"{n} ({h.description})" for n, h in models))
    candidates = len(data.class_names) if args.task == "classification" else len(data.paths)
    if candidates <= 5:
        header += (f" With {candidates} {'classes' if args.task == 'classification' else 'images'} the top 5 always hold "
                   "the target: the @5 columns are 100 % by construction (this data cannot supply them).")
    report = write_cci_tables(rows, args.out, args.task, header=header)
    print(f"wrote {report}")
    return 0
