"""``concept-grounding world``: render the bird world, export it, draw a contact sheet.

Writes under ``--out``: ``hf/`` (the DatasetDict, ``save_to_disk``), ``contact_sheet.png``,
``summary.md`` and ``summary.json``; with ``--format cub``/``sub``/``all`` also the
CUB_200_2011 folder (``CUB_200_2011/``) and the SUB-layout folder (``SUB/``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from concept_grounding.commands._types import (
    class_name,
    closed_unit_interval,
    int_at_least,
    nonnegative_int,
    output_dir,
    positive_int,
)


__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=output_dir, help="output folder")
    parser.add_argument("--size", type=int_at_least(32), default=128, help="image side in pixels (>= 32)")
    parser.add_argument("--train-per-class", type=nonnegative_int, default=10)
    parser.add_argument("--test-per-class", type=nonnegative_int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--deviation-rate", type=closed_unit_interval, default=0.1, help="per-image, per-group label deviation rate")
    parser.add_argument("--classes", nargs="*", type=class_name, default=None, help="CUB class folder names (default: SUB's 33)")
    parser.add_argument("--per-pairing", type=positive_int, default=1, help="SUB images per (class, attribute) pairing")
    parser.add_argument("--format", choices=("hf", "cub", "sub", "all"), default="hf")


def _loaders():
    try:
        from concept_grounding import loaders
    except ImportError as err:  # written by another part of the project
        raise RuntimeError(
            "--format cub/sub needs concept_grounding.loaders (write_cub / write_sub), which is not installed"
        ) from err
    return loaders


def _showcase_pairs(world, count: int = 6):
    """Counterfactual pairs for the sheet: varied SUB targets, only real changes."""
    targets = [
        "has_crown_color::pink", "has_bill_shape::needle", "has_underparts_color::red",
        "has_breast_pattern::spotted", "has_wing_color::white", "has_tail_pattern::multi-colored",
        "has_eye_color::yellow", "has_primary_color::blue", "has_throat_color::yellow",
    ]
    pairs, k = [], 0
    for target in targets:
        for _ in range(10):
            cf = world.counterfactual(world.sample(k), target)
            k += 1
            if cf.changed_parts:
                pairs.append(cf)
                break
        if len(pairs) == count:
            break
    return pairs


def run(args: argparse.Namespace) -> int:
    from concept_grounding.world import BirdWorld, WorldConfig
    from concept_grounding.world.contact_sheet import contact_sheet

    config = WorldConfig(
        image_size=args.size,
        class_names=tuple(args.classes) if args.classes else None,
        deviation_rate=args.deviation_rate,
        seed=args.seed,
    )
    world = BirdWorld(config)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    # 1. render speed (images/s on this machine, rendering only)
    t0 = time.perf_counter()
    probe = list(world.samples(range(60)))
    rate = len(probe) / (time.perf_counter() - t0)

    # 2. the CUB-layout DatasetDict
    dd = world.to_dataset_dict(args.train_per_class, args.test_per_class)
    dd.save_to_disk(str(out / "hf"))

    # 3. contact sheet
    sheet = contact_sheet(probe[:18], _showcase_pairs(world), columns=6, class_names=world.class_names)
    sheet.save(out / "contact_sheet.png")

    # 4. optional folder exports
    sub_rows = None
    if args.format in ("cub", "all"):
        _loaders().write_cub(dd, out / "CUB_200_2011")
    if args.format in ("sub", "all"):
        sub = world.sub_dataset(per_pairing=args.per_pairing)
        sub_rows = sub.num_rows
        _loaders().write_sub(sub, out / "SUB")

    # 5. summary
    import numpy as np

    labels = np.asarray(dd["train"]["attributes"], dtype=np.uint8)
    cls = np.asarray(dd["train"]["label"])
    deviating = float((labels != world.class_attributes[cls]).any(axis=1).mean()) if len(cls) else 0.0
    summary = {
        "image_size": config.image_size,
        "seed": config.seed,
        "deviation_rate": config.deviation_rate,
        "num_classes": world.num_classes,
        "classes": list(world.class_names),
        "train_images": dd["train"].num_rows,
        "test_images": dd["test"].num_rows,
        "sub_images": sub_rows,
        "rendered_groups": list(world.rendered_groups),
        "rendered_attributes": len(world.rendered_attributes),
        "images_with_a_deviating_label": deviating,
        "render_images_per_second": round(rate, 1),
        "format": args.format,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    lines = [
        "# Bird world export",
        "",
        f"- classes: {world.num_classes}; train images: {summary['train_images']}; test images: {summary['test_images']}"
        + (f"; SUB images: {sub_rows}" if sub_rows is not None else ""),
        f"- image size: {config.image_size} px; seed: {config.seed}; deviation rate: {config.deviation_rate}"
        f" (train images with at least one deviating label: {deviating:.0%})",
        f"- rendered groups ({len(world.rendered_groups)}): {', '.join(world.rendered_groups)}",
        f"- rendered attributes: {len(world.rendered_attributes)} of {world.vocab.num_attributes}",
        f"- render speed measured here: {rate:.0f} images/s",
        "",
        "![contact sheet](contact_sheet.png)",
        "",
    ]
    (out / "summary.md").write_text("\n".join(lines))
    print(f"wrote {out} ({summary['train_images']} train / {summary['test_images']} test images, {rate:.0f} images/s)")
    return 0
