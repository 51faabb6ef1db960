"""Time ``cci-bench``'s Table 1 harness batched against a per-image loop, in one run.

Both run :func:`~concept_grounding.cci.tables.classification_table` on the same world export
(an ImageNet-style folder) with the same tiny config-built open_clip ViT and the same
methods; the only difference is ``batch_size`` (``--batch`` images per forward, against 1).
The tables they produce are equal (``tests/test_cci_tables.py`` checks it); this prints the
wall-clock and CPU-time ratios per-image / batched (target: >= 5 on the CPU). Rounds
interleave the two; the minimum over rounds is the least disturbed by other load.

Usage: ``python benchmarks/bench_cci_tables.py [--images-per-class 6] [--batch 32] [--size 64]
[--repeats 2] [--threads 1]``
"""

from __future__ import annotations

import argparse
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images-per-class", type=int, default=6)
    parser.add_argument("--classes", type=int, default=6)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--methods", nargs="+", default=["cci", "gradcam", "grad-eclip", "maskclip", "rollout"])
    args = parser.parse_args()

    import torch

    from concept_grounding.cci.layouts import export_world_image_folder, read_image_folder
    from concept_grounding.cci.tables import classification_table, load_table_models
    from concept_grounding.vocabulary import load_vocabulary

    torch.set_num_threads(args.threads)
    classes = load_vocabulary().sub_classes[: args.classes]
    with tempfile.TemporaryDirectory() as tmp:
        root = export_world_image_folder(f"{tmp}/val", per_class=args.images_per_class, image_size=args.size,
                                         class_names=classes)
        data = read_image_folder(root, root / "class_names.txt")
        models = load_table_models(["tiny"], image_size=args.size)
        timings: dict[int, list[tuple[float, float]]] = {args.batch: [], 1: []}
        for _ in range(args.repeats):
            for batch in (args.batch, 1):
                wall, cpu = time.perf_counter(), time.process_time()
                classification_table(models, data, methods=args.methods, steps=args.steps, batch_size=batch,
                                     progress=False)
                timings[batch].append((time.perf_counter() - wall, time.process_time() - cpu))
    best = {b: (min(t[0] for t in ts), min(t[1] for t in ts)) for b, ts in timings.items()}
    print(f"{len(data.paths)} images, {args.size} px, tiny open_clip ViT, methods {args.methods}, "
          f"{args.steps + 1} fractions, {args.threads} thread(s)")
    print(f"batched ({args.batch}): wall {best[args.batch][0]:.2f} s, CPU {best[args.batch][1]:.2f} s")
    print(f"per image (1):  wall {best[1][0]:.2f} s, CPU {best[1][1]:.2f} s")
    print(f"ratio per-image / batched: wall {best[1][0] / best[args.batch][0]:.2f}x, "
          f"CPU {best[1][1] / best[args.batch][1]:.2f}x")


if __name__ == "__main__":
    main()
