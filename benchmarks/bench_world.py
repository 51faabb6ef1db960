"""Bird-world render speed on one core: images/s at 128 px against the 200/s target.

Run: ``python benchmarks/bench_world.py [--n 1000] [--size 128]``.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402

TARGET = 200.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="images to render")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=args.size, seed=args.seed))
    for i in range(20):  # warm-up
        world.sample(i)
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(args.n):
        world.sample(i)
    rate = args.n / (time.perf_counter() - t0)
    cpu_rate = args.n / (time.process_time() - c0)  # per CPU-second: robust to a busy machine
    t0 = time.perf_counter()
    m = max(args.n // 5, 1)
    for i in range(m):
        world.counterfactual(world.sample(i), "has_crown_color::pink")
    pair_rate = m / (time.perf_counter() - t0)
    print(f"bird world @ {args.size}px, 1 thread: {rate:.1f} images/s wall-clock, "
          f"{cpu_rate:.1f} images per CPU-second "
          f"(target {TARGET:.0f}/s, ratio {cpu_rate / TARGET:.2f}); "
          f"sample+counterfactual pairs: {pair_rate:.1f}/s wall-clock")


if __name__ == "__main__":
    main()
