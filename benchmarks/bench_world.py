"""Bird-world render speed on one core: images/s at 128 px against the 200/s target.

Also, measured in the same run, the two costs of a SUB-style export (``world`` / ``publish``
/ the bench's world data): ``BirdWorld.edited`` (renders only the edited bird) against
``counterfactual(sample(i))`` (renders both), and PNG encoding at the exports' zlib level
(``PNG_COMPRESS_LEVEL``) against PIL's default 6, with the bytes each writes.

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
    from concept_grounding.world.dataset import PNG_COMPRESS_LEVEL

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
    target = "has_crown_color::pink"
    for i in range(m):
        world.counterfactual(world.sample(i), target)
    pair_rate = m / (time.perf_counter() - t0)
    print(
        f"bird world @ {args.size}px, 1 thread: {rate:.1f} images/s wall-clock, "
        f"{cpu_rate:.1f} images per CPU-second "
        f"(target {TARGET:.0f}/s, ratio {cpu_rate / TARGET:.2f}); "
        f"sample+counterfactual pairs: {pair_rate:.1f}/s wall-clock"
    )

    both = _cpu_seconds(lambda: [world.counterfactual(world.sample(i), target).edited for i in range(m)])
    edited = _cpu_seconds(lambda: [world.edited(i, target)[0] for i in range(m)])
    print(
        f"SUB export, {m} edits: edited() {edited / m * 1e3:.2f} ms vs counterfactual(sample()) "
        f"{both / m * 1e3:.2f} ms per edit (CPU), ratio {edited / both:.2f}"
    )

    images = [world.sample(i).image for i in range(m)]
    for level in (PNG_COMPRESS_LEVEL, 6):
        sizes: list[int] = []
        seconds = _cpu_seconds(lambda sizes=sizes, level=level: sizes.extend(_png_size(a, level) for a in images))
        print(
            f"PNG zlib level {level}: {seconds / m * 1e3:.2f} ms and {sum(sizes) / len(sizes) / 1e3:.1f} kB "
            f"per {args.size} px image (CPU)"
        )


def _cpu_seconds(work) -> float:
    """CPU seconds of one call of ``work`` (robust to a busy machine)."""
    c0 = time.process_time()
    work()
    return time.process_time() - c0


def _png_size(array, level: int) -> int:
    """Bytes of ``array`` as a PNG at zlib ``level``."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG", compress_level=level)
    return len(buffer.getvalue())


if __name__ == "__main__":
    main()
