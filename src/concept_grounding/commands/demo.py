"""``concept-grounding demo``: the main job on the bird world, end to end.

Runs each stage into its own sub-folder of ``--out`` and writes an index
``README.md`` that links them. A stage that fails stops the demo with its error; stages
already written stay on disk.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

from concept_grounding.commands._types import int_at_least, output_dir, positive_int
from concept_grounding.errors import UsageError

logger = logging.getLogger(__name__)

Stage = Callable[[Path, argparse.Namespace], str]

#: the world classes of ``--quick`` runs (tests, smoke runs)
QUICK_CLASSES: tuple[str, ...] = ("017.Cardinal", "073.Blue_Jay", "019.Gray_Catbird", "129.Song_Sparrow")


def _command(argv: list[str]) -> None:
    """Run another sub-command in-process; its error propagates (and stops the demo)."""
    from concept_grounding.cli import dispatch

    dispatch(argv)


def _stage_world(out: Path, args: argparse.Namespace) -> str:
    argv = ["world", "--out", str(out), "--seed", str(args.seed), "--format", "all"]
    if args.quick:
        argv += ["--size", "48", "--train-per-class", "1", "--test-per-class", "1", "--classes", *QUICK_CLASSES]
    else:
        argv += ["--size", str(args.size), "--train-per-class", str(args.train_per_class),
                 "--test-per-class", str(args.test_per_class)]
    _command(argv)
    summary = json.loads((out / "summary.json").read_text())
    return (
        f"[bird world](world/summary.md): {summary['train_images']} train / {summary['test_images']} test"
        f" images, {summary['sub_images']} SUB counterfactuals, exported as datasets, CUB_200_2011 and SUB folders"
    )


def _stage_bench(out: Path, args: argparse.Namespace) -> str:
    argv = ["bench", "--out", str(out), "--seed", str(args.seed)]
    if args.quick:
        argv += ["--image-size", "32", "--train-per-class", "2", "--test-per-class", "1", "--epochs", "1",
                 "--clip-epochs", "1", "--models", "CBM (ind.)", "CBM (joint)", "CBM (ind., per-img.)",
                 "--classes", *QUICK_CLASSES]
    _command(argv)
    results = json.loads((out / "results.json").read_text())
    trained = [r for r in results["table1"] if not r.get("reference")]
    below = sum(r["s_plus"] < 0.5 for r in trained)
    return (
        f"[SUB benchmark](bench/report.md): Tables 1-2, CGIM, concept existence and location;"
        f" {below} of {len(trained)} binary concept models detect substituted attributes below chance"
    )


def _tdg_pairs(images: Path, path: Path) -> list[dict]:
    """A sheet of (reference | guide) pairs, one row per generated image; returns the records."""
    from PIL import Image, ImageDraw

    from concept_grounding.vocabulary import class_display_name

    records = [json.loads(line) for line in (images / "metadata.jsonl").read_text().splitlines() if line.strip()]
    tiles = [(Image.open(images / r["file_name"]).convert("RGB"), Image.open(images / r["guide_file_name"]).convert("RGB"),
              f"{class_display_name(r['reference_class'])} + {r['target_attribute'].split('::')[-1]}") for r in records]
    side, label = 96, 160
    sheet = Image.new("RGB", (label + 2 * side, side * max(1, len(tiles))), "white")
    draw = ImageDraw.Draw(sheet)
    for row, (ref, guide, text) in enumerate(tiles):
        draw.text((4, row * side + side // 2 - 6), text, fill="black")
        sheet.paste(ref.resize((side, side)), (label, row * side))
        sheet.paste(guide.resize((side, side)), (label + side, row * side))
    sheet.save(path)
    return records


def _stage_tdg(out: Path, args: argparse.Namespace) -> str:
    images = out / "images"
    argv = ["generate", "--out", str(images), "--save-guides", "--seed", str(args.seed),  # the shipped world Flux
            "--classes", "073.Blue_Jay",
            "017.Cardinal", "--attributes", "has_crown_color::black", "has_breast_pattern::spotted",
            "has_bill_shape::needle"]
    argv += ["--images-per-pairing", "1", "--steps", "4", "--size", "32"] if args.quick else [
        "--images-per-pairing", "4", "--steps", "20", "--size", "32"]
    _command(argv)
    oracle = out.parent / "bench" / "models" / "cbm-ind-per-img"
    scorer = ["--scorer", "oracle", "--oracle", str(oracle)] if oracle.is_dir() else ["--scorer", "tiny-clip"]
    _command(["filter", "--in", str(images), "--out", str(out / "filter"), *scorer])
    count = len(_tdg_pairs(images, out / "pairs.png"))
    judge = "the world attribute oracle (the bench's per-image CBM)" if oracle.is_dir() else "a random tiny CLIP"
    return (
        f"[Tied Diffusion](tdg/filter/filter_report.md): {count} tied pairs ([reference | guide](tdg/pairs.png))"
        " from the world-trained Flux shipped with the package (32 px; its measured quality is in"
        " concept_grounding/assets/world_flux/README.md) and the VQA filter report,"
        f" judged by {judge}"
    )


def _stage_cci(out: Path, args: argparse.Namespace) -> str:
    """CCI maps and COVAR on the CLIP the bench stage trained (a random tiny CLIP without it)."""
    clip = out.parent / "bench" / "models" / "world-clip"
    model = ["--model", str(clip)] if clip.is_dir() else []
    size = json.loads((clip / "config.json").read_text())["image_size"] if clip.is_dir() else 64
    n, objects, backgrounds = (2, 2, 2) if args.quick else (6, 8, 5)
    _command(["explain", "--out", str(out / "explain"), "--num", str(n), "--size", str(size), "--baselines",
              "--seed", str(args.seed), *model])
    _command(["covar", "--out", str(out / "covar"), "--objects", str(objects), "--backgrounds", str(backgrounds),
              "--size", str(size), "--seed", str(args.seed), *model])
    which = "the world CLIP trained by the bench stage" if model else "a random tiny CLIP (no bench stage ran)"
    return (
        f"[CCI explanations](cci/explain/report.md) and [COVAR diagnosis](cci/covar/report.md) on {which}:"
        " cluster maps beside Grad-CAM and rollout, accuracy and BG-Er / FG-Er per transform"
    )


STAGES: dict[str, Stage] = {
    "world": _stage_world,
    "bench": _stage_bench,
    "tdg": _stage_tdg,
    "cci": _stage_cci,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=output_dir, default=Path("reports/demo"), help="report folder")
    parser.add_argument("--size", type=int_at_least(32), default=128, help="image size of the bird world (px)")
    parser.add_argument("--train-per-class", type=positive_int, default=12)
    parser.add_argument("--test-per-class", type=positive_int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="tiny settings everywhere (tests, smoke runs)")
    parser.add_argument("--resume", action="store_true", help="skip stages that finished in an earlier run")
    parser.add_argument(
        "--stages",
        default=",".join(STAGES),
        help=f"comma-separated subset of: {', '.join(STAGES)}",
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        raise UsageError(f"unknown stage(s) {unknown}; known: {list(STAGES)}", argument="--stages")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    lines, timings = [], {}
    for name in stages:
        done = out / name / ".done"
        if args.resume and done.is_file():
            logger.info("== %s == (done in an earlier run, skipped)", name)
            line, timings[name] = json.loads(done.read_text())
            lines.append(f"- {line}")
            continue
        logger.info("== %s ==", name)
        start = time.perf_counter()
        line = STAGES[name](out / name, args)
        timings[name] = round(time.perf_counter() - start, 2)
        done.write_text(json.dumps([line, timings[name]]))
        lines.append(f"- {line}")
        logger.info("%s done in %.1f s", name, timings[name])
    (out / "timings.json").write_text(json.dumps(timings, indent=2))
    (out / "README.md").write_text(
        "# concept-grounding demo report\n\n" + "\n".join(lines) + "\n\nStage timings (s): "
        + ", ".join(f"{k} {v}" for k, v in timings.items()) + "\n"
    )
    logger.info("report written to %s", out / "README.md")
    if "bench" in stages:
        logger.info("try the Space on these models: concept-grounding space --artifacts %s", out / "bench")
    return 0
