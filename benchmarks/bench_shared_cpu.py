"""A job's CPU time alone and beside one busy process, under the old and the new thread policy.

The job is the real command in a subprocess: ``concept-grounding generate`` on the shipped world Flux
(``--images`` TDG pairs, ``--steps`` steps, 32 px), its CPU time (user + system, from ``wait4``),
wall time and involuntary context switches. The busy process is one more Python process doing
256 x 256 matrix products in a loop on one BLAS thread, started before the job and running until
it ends. Policies: ``old`` is ``CONCEPT_GROUNDING_THREADS=off`` (the runtimes' defaults: a thread
per core, idle OpenMP threads spinning); ``new`` is the default (:mod:`concept_grounding.cpu`:
threads sized to the free cores, idle threads asleep). Each of the four configurations runs once
untimed, then ``--rounds`` interleaved rounds; printed: the median CPU time of each and, per
policy, the ratio beside / alone (target <= 1.3x, docs/guide/development.md), and new / old. On a
machine that other jobs already load, "alone" is not alone: compare new with old there.

    python benchmarks/bench_shared_cpu.py              # about 4 minutes on an idle 2-core machine
    python benchmarks/bench_shared_cpu.py --rounds 5 --images 8
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from concept_grounding.cpu import THREAD_VARS, THREADS_ENV, WAIT_POLICY

PAIRINGS = ("035.Purple_Finch", ("has_breast_color::blue", "has_crown_color::black"))
#: one busy process: matrix products on one BLAS thread, forever (killed after the job)
BUSY = "import numpy as np\na = np.random.rand(256, 256)\nwhile True:\n    a = a @ a\n    a /= np.abs(a).max()\n"
POLICIES = {"old": "off", "new": "auto"}


@dataclass(frozen=True)
class Run:
    """One job run: CPU seconds (user + system, all its threads), wall seconds, involuntary switches."""

    cpu: float
    wall: float
    switches: int


def job_env(policy: str) -> dict[str, str]:
    """The job's environment: ``policy``'s :data:`THREADS_ENV`, no thread or wait variable set by the caller."""
    env = {k: v for k, v in os.environ.items() if k not in (THREADS_ENV, *THREAD_VARS, *WAIT_POLICY)}
    return env | {THREADS_ENV: POLICIES[policy]}


def run_job(policy: str, busy: bool, args: argparse.Namespace) -> Run:
    """Run ``generate`` once into a fresh folder, beside a busy process when ``busy``."""
    spinner = None
    if busy:
        spinner = subprocess.Popen(
            [sys.executable, "-c", BUSY], env=os.environ | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        )
        time.sleep(1.0)  # running before the job starts and samples the load
    try:
        with tempfile.TemporaryDirectory() as out:
            command = [
                sys.executable,
                "-m",
                "concept_grounding.cli",
                "generate",
                "--out",
                str(Path(out) / "g"),
                "--classes",
                PAIRINGS[0],
                "--attributes",
                *PAIRINGS[1],
                "--images-per-pairing",
                str(args.images),
                "--steps",
                str(args.steps),
                "--batch-size",
                str(args.images),
                "--yes",
            ]
            start = time.perf_counter()
            job = subprocess.Popen(command, env=job_env(policy), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            _, status, usage = os.wait4(job.pid, 0)
            wall = time.perf_counter() - start
            if status != 0:
                raise RuntimeError(f"generate failed ({status}): {job.stderr.read().decode()[-2000:]}")
            job.stderr.close()
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    return Run(usage.ru_utime + usage.ru_stime, wall, usage.ru_nivcsw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of each configuration")
    parser.add_argument("--images", type=int, default=4, help="TDG pairs per pairing (two pairings)")
    parser.add_argument("--steps", type=int, default=8, help="denoising steps")
    args = parser.parse_args()
    configs = [(policy, busy) for policy in POLICIES for busy in (False, True)]
    load = os.getloadavg()
    for policy, busy in configs:  # untimed: warm caches
        run_job(policy, busy, args)
    runs: dict[tuple[str, bool], list[Run]] = {c: [] for c in configs}
    for r in range(args.rounds):
        for policy, busy in configs[r % len(configs) :] + configs[: r % len(configs)]:
            runs[(policy, busy)].append(run_job(policy, busy, args))
    print(
        f"generate: {2 * args.images} TDG pairs, {args.steps} steps, world Flux; {args.rounds} rounds; "
        f"{os.cpu_count()} CPUs, load average {load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    print("| policy | beside | CPU s (median) | wall s | involuntary switches |")
    print("|---|---|---|---|---|")
    median = {c: statistics.median(run.cpu for run in runs[c]) for c in configs}
    for policy, busy in configs:
        rs = runs[(policy, busy)]
        print(
            f"| {policy} | {'one busy process' if busy else 'nothing'} | {median[(policy, busy)]:.1f} "
            f"[{min(r.cpu for r in rs):.1f}, {max(r.cpu for r in rs):.1f}] | "
            f"{statistics.median(r.wall for r in rs):.1f} | {statistics.median(r.switches for r in rs):.0f} |"
        )
    for policy in POLICIES:
        ratio = median[(policy, True)] / median[(policy, False)]
        print(
            f"{policy}: CPU time beside a busy process / alone = {ratio:.2f}x (target <= 1.3x: "
            f"{'met' if ratio <= 1.3 else 'not met'})"
        )
    for busy in (False, True):
        print(
            f"new / old CPU time {'beside a busy process' if busy else 'alone'}: "
            f"{median[('new', busy)] / median[('old', busy)]:.2f}x"
        )


if __name__ == "__main__":
    main()
