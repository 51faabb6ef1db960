"""ConceptBed's composition categories on a world Flux: how often it draws what the prompt asks.

    .venv/bin/python benchmarks/bench_world_compositions.py --pipeline DIR --out DIR [--device cuda]

Uses the shipped composition judge (``--train-judge``: trains one on the pipeline's world,
cached under ``--out``), validates it on held-out compositions, generates every prompt of
:func:`experiments.world_compositions.composition_prompts` and writes
``results.json``, ``report.md`` (the table with the judge's validation beside it) and
``contact_sheet.png`` (8 images per category, one row each).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pipeline", type=Path, default=None, help="world Flux folder (default: the shipped one)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default="cpu", help="torch device of the pipeline and the judge's training")
    p.add_argument(
        "--train-judge",
        action="store_true",
        help="train the composition judge on the pipeline's world (default: the shipped one)",
    )
    p.add_argument("--species", type=int, default=None, help="only the first N species of the world")
    p.add_argument("--judge-per-class", type=int, default=200, help="training compositions per species")
    p.add_argument("--judge-epochs", type=int, default=25)
    p.add_argument("--validation-per-class", type=int, default=20, help="held-out compositions per species")
    p.add_argument("--images", type=int, default=2, help="images per prompt")
    p.add_argument("--batch", type=int, default=64, help="images per pipeline call")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", dest="progress", action="store_false")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import numpy as np
    from experiments.world_compositions import compositions_markdown, measure_compositions
    from PIL import Image

    from concept_grounding.judge.composition import composition_set, train_composition_judge, validate_composition_judge
    from concept_grounding.world import BirdWorld
    from concept_grounding.worldflux.loader import trained_world_config, world_flux_settings
    from concept_grounding.worldflux.source import WorldFlux

    t0 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    world = BirdWorld(trained_world_config(args.pipeline))
    if args.species:
        from dataclasses import replace

        world = BirdWorld(replace(world.config, class_names=world.class_names[: args.species]))
    folder = args.out / f"composition-judge-n{args.judge_per_class}-e{args.judge_epochs}-seed{args.seed}"
    if not args.train_judge:
        from concept_grounding.judge import create_judge

        judge = create_judge("composition-judge")
    elif (folder / "config.json").is_file():
        from concept_grounding.judge import create_judge

        judge = create_judge("composition-judge", path=folder)
    else:
        train = composition_set(world, args.judge_per_class, 0, seed=args.seed)
        judge = train_composition_judge(
            train,
            world.num_classes,
            epochs=args.judge_epochs,
            seed=args.seed,
            device=args.device,
            progress=args.progress,
        )
        judge.save_pretrained(folder)
    held_out = composition_set(world, args.validation_per_class, 10_000, seed=args.seed + 1)
    validation = validate_composition_judge(judge, held_out)
    print("judge validation:", json.dumps(validation), flush=True)
    t1 = time.perf_counter()
    pipe = WorldFlux(args.pipeline).resolve().load().to(args.device)
    pipe.set_progress_bar_config(disable=True)
    kw = world_flux_settings(args.pipeline).call_kwargs()
    result = measure_compositions(pipe, world, judge, validation, kw, args.images, args.batch, args.seed)
    sheet = result.pop("images")
    rows = [np.concatenate(list(v) + [np.zeros_like(v[0])] * (8 - len(v)), axis=1) for v in sheet.values()]
    Image.fromarray(np.concatenate(rows, axis=0)).resize((8 * 96, len(rows) * 96), Image.NEAREST).save(
        args.out / "contact_sheet.png"
    )
    result.update(
        pipeline=str(args.pipeline or "world"),
        judge_seconds=t1 - t0,
        generate_seconds=time.perf_counter() - t1,
        rows=list(sheet),
        settings=vars(args) | {"out": str(args.out), "pipeline": str(args.pipeline)},
    )
    (args.out / "results.json").write_text(json.dumps(result, indent=1, default=str))
    table = compositions_markdown(result)
    (args.out / "report.md").write_text(f"# Compositions drawn by {result['pipeline']}\n\n{table}\n")
    print(table, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
