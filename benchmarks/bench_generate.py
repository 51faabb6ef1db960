"""Throughput of ``concept-grounding generate`` on the world Flux: pairs per call and processes.

1. **Pairs per call** (``--batch-size``), in this process with one torch thread:
   ``generate_images`` writes the same ``--pairs`` TDG pairs (one SUB pairing of the
   world, fixed seeds, 20 steps, true CFG 4, PNG files and sidecars) into a fresh folder
   at batch sizes 1, 2, 4 and 8, timed with
   :func:`~concept_grounding.tdg.timing.interleave` (each batch size once untimed, then
   ``--rounds`` rounds in rotating order). Printed: pairs per second of wall time and per
   CPU-second, the speed-up over batch 1, and where batching stops helping (the first
   batch size whose successor gains less than ``--gain`` on CPU time).
2. **Processes**: the real command in subprocesses, ``--pairs`` pairs at
   ``--process-batch`` pairs per call: 1 process with 1 torch thread, 1 process with 2
   threads, and 2 processes with 1 thread each under ``python -m torch.distributed.run``
   (accelerate's ``PartialState`` gives each process every second chunk). Each process
   runs ``run_generate`` as the command does and times it from a barrier after its
   imports to the merged metadata (model load, plan, generation, writing); the slowest
   process gives the run's seconds. The configurations alternate over ``--rounds`` rounds.

    python benchmarks/bench_generate.py              # about 5 minutes on 2 cores
    python benchmarks/bench_generate.py --pairs 16 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PAIRING = ("073.Blue_Jay", "has_crown_color::yellow")


def batch_section(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from concept_grounding.tdg.generate import generate_images
    from concept_grounding.tdg.generate_config import GenerateConfig
    from concept_grounding.tdg.plan import Pairing, plan_jobs
    from concept_grounding.tdg.timing import interleave
    from concept_grounding.worldflux import load_world_flux
    from concept_grounding.worldflux.source import WorldFlux

    torch.set_num_threads(1)
    model = WorldFlux().resolve()  # its size, prompt length and true CFG
    pipe = load_world_flux()
    jobs = plan_jobs([Pairing(*PAIRING)], args.pairs, base_seed=0)

    def writer(batch: int):
        def run() -> None:
            with tempfile.TemporaryDirectory() as out:
                config = GenerateConfig(
                    out=Path(out), num_inference_steps=args.steps, guidance_scale=3.5, batch_size=batch
                )
                assert generate_images(pipe, jobs, config, model, progress=False) == len(jobs)

        return run

    result = interleave({f"batch {b}": writer(b) for b in args.batch_sizes}, rounds=args.rounds, warmup=1)
    print(f"\n== pairs per call: world Flux, {args.pairs} pairs per run, {args.steps} steps, 1 torch thread")
    print(result.report(unit=args.pairs, unit_name="s/pair"))
    rows = {}
    for b in args.batch_sizes:
        t = result.timings[f"batch {b}"]
        rows[b] = {
            "pairs_per_s_wall": args.pairs / t.spread("wall").median,
            "pairs_per_cpu_s": args.pairs / t.spread("cpu").median,
        }
    first = args.batch_sizes[0]
    stop = args.batch_sizes[-1]
    for b, nxt in zip(args.batch_sizes, args.batch_sizes[1:]):
        if rows[nxt]["pairs_per_cpu_s"] < rows[b]["pairs_per_cpu_s"] * (1 + args.gain):
            stop = b
            break
    for b, row in rows.items():
        cpu_ratio = result.ratio(f"batch {first}", f"batch {b}", "cpu")
        wall_ratio = result.ratio(f"batch {first}", f"batch {b}", "wall")
        row.update(speedup_cpu=vars(cpu_ratio), speedup_wall=vars(wall_ratio))
        print(
            f"  batch {b}: {row['pairs_per_s_wall']:.3f} pairs/s (wall), {row['pairs_per_cpu_s']:.3f} pairs per CPU-s; "
            f"speed-up over batch {first}: CPU {cpu_ratio.format(2, 'x')}, wall {wall_ratio.format(2, 'x')}"
        )
    print(f"  batching stops helping (next size gains < {100 * args.gain:.0f} % on CPU time) at batch {stop}")
    return {"per_batch": rows, "stops_helping_at": stop, **result.as_dict()}


def worker(args: argparse.Namespace) -> None:
    """One process of the process section: ``run_generate`` as the command runs it, timed
    from a barrier after the imports to the end (model load, generation, writing, merge)."""
    import torch
    from accelerate import PartialState

    import concept_grounding.tdg.pipeline  # noqa: F401  (imports diffusers: start-up, not generation)
    from concept_grounding.tdg.generate_config import GenerateConfig
    from concept_grounding.tdg.generate_job import run_generate
    from concept_grounding.worldflux.source import WorldFlux, world_pairings

    state = PartialState(cpu=not torch.cuda.is_available())  # as run_generate makes it
    config = GenerateConfig(
        out=args.worker,
        model=WorldFlux(),
        pairings=world_pairings(),
        classes=(PAIRING[0],),
        attributes=(PAIRING[1],),
        images_per_pairing=args.pairs,
        num_inference_steps=args.steps,
        batch_size=args.process_batch,
    )
    state.wait_for_everyone()
    start, cpu = time.perf_counter(), time.process_time()
    result = run_generate(config)
    print(
        json.dumps(
            {
                "rank": state.process_index,
                "seconds": time.perf_counter() - start,
                "cpu_s": time.process_time() - cpu,
                "written": result.written,
            }
        ),
        flush=True,
    )


def _command(out: Path, args: argparse.Namespace, processes: int) -> list[str]:
    script = [
        str(Path(__file__).resolve()),
        "--worker",
        str(out),
        "--pairs",
        str(args.pairs),
        "--steps",
        str(args.steps),
        "--process-batch",
        str(args.process_batch),
    ]
    if processes == 1:
        return [sys.executable, *script]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes), *script]


def process_section(args: argparse.Namespace) -> dict[str, Any]:
    configs = {"1 process x 1 thread": (1, 1), "1 process x 2 threads": (1, 2), "2 processes x 1 thread": (2, 1)}
    seconds: dict[str, list[float]] = {name: [] for name in configs}
    names = list(configs)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            processes, threads = configs[name]
            env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "gen"
                done = subprocess.run(_command(out, args, processes), env=env, capture_output=True, text=True)
                if done.returncode:
                    raise SystemExit(f"{name} failed:\n{done.stderr[-2000:]}")
                ranks = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"rank"')]
                if len(ranks) != processes or sum(r["written"] for r in ranks) != args.pairs:
                    raise SystemExit(f"{name}: expected {processes} processes writing {args.pairs} images, got {ranks}")
                seconds[name].append(max(r["seconds"] for r in ranks))  # the job ends with its slowest process
    print(
        f"\n== processes: run_generate as `concept-grounding generate` runs it, {args.pairs} pairs at "
        f"--batch-size {args.process_batch}, {args.rounds} alternating rounds (wall time from after the imports "
        "to the merged metadata, slowest process)"
    )
    rows = {}
    for name in names:
        rows[name] = {"seconds": seconds[name], "pairs_per_s": args.pairs / statistics.median(seconds[name])}
    base = rows[names[0]]["pairs_per_s"]
    for name, row in rows.items():
        row["speedup"] = row["pairs_per_s"] / base
        print(
            f"  {name:<24} {row['pairs_per_s']:.3f} pairs/s ({row['speedup']:.2f}x); runs "
            + ", ".join(f"{s:.1f}" for s in row["seconds"])
            + " s"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", choices=("batch", "processes"), default=["batch", "processes"])
    parser.add_argument("--pairs", type=int, default=8, help="TDG pairs per run")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--process-batch", type=int, default=4, help="--batch-size of the process runs")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gain", type=float, default=0.05, help="smallest gain that counts as helping")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--worker", type=Path, default=None, help=argparse.SUPPRESS
    )  # one process of the process section
    args = parser.parse_args()
    if args.worker is not None:
        return worker(args)
    results = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    if "batch" in args.sections:
        results["batch"] = batch_section(args)
    if "processes" in args.sections:
        results["processes"] = process_section(args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
