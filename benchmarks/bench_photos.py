"""Time the real-photos path in one run: the ``photos`` export, and batched Grad-CAM + deletion /
insertion on EfficientNet-Lite0 against the per-image loop.

* **export**: :func:`~concept_grounding.photos.export.run_photos` into a fresh folder (the stamps
  are fetched first, once, and not timed: the first fetch is a 161 MB download);
* **batched**: :func:`~concept_grounding.cci.tables.classifier_table_rows` (Grad-CAM and random,
  ``--steps`` fractions) with ``batch_size = --batch`` images per Grad-CAM call and per forward
  of the perturbed images;
* **per image**: the same with ``batch_size = 1`` (one image, one forward per perturbed image),
  the loop a script would write.

Both give the same Grad-CAM maps (the images do not interact) and so the same Grad-CAM AUCs; the
script prints the largest difference of those and the ratio per-image / batched (target >= 5x)
of wall-clock and CPU time. Rounds interleave the two; the minimum over rounds is the least
disturbed by other load on a shared machine.

Usage: ``python benchmarks/bench_photos.py [--per-class 1] [--batch 32] [--steps 10] [--repeats 2] [--threads N]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-class", type=int, default=1, help="images per class (46 classes)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()

    import torch

    from concept_grounding.cci.layouts import read_image_folder
    from concept_grounding.cci.tables import classifier_table_rows
    from concept_grounding.models.imagenet import load_imagenet_classifier
    from concept_grounding.photos.export import PhotosConfig, run_photos
    from concept_grounding.photos.stamps import fetch_stamps

    if args.threads:
        torch.set_num_threads(args.threads)
    fetch_stamps()
    with tempfile.TemporaryDirectory() as tmp:
        result, wall, cpu = _timed(lambda: run_photos(PhotosConfig(per_stamp=1, progress=False, out=Path(tmp))))
        print(
            f"export: {len(result.records)} images (256 px, every group, easy + hard) in {wall:.1f} s wall, "
            f"{cpu:.1f} s CPU ({len(result.records) / wall:.1f} images/s)"
        )
        data = read_image_folder(
            result.image_folder, result.image_folder / "class_names.txt", max_per_class=args.per_class
        )
        classifier = load_imagenet_classifier()
        best = {"batched": (1e9, 1e9), "per image": (1e9, 1e9)}
        rows = {}
        for _ in range(args.repeats):
            for name, batch in (("batched", args.batch), ("per image", 1)):
                rows[name], wall, cpu = _timed(
                    lambda b=batch: classifier_table_rows(
                        "efficientnet_lite0",
                        classifier,
                        data,
                        methods=("gradcam", "random"),
                        steps=args.steps,
                        batch_size=b,
                        progress=False,
                    )
                )
                best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    grad = {name: next(r for r in rs if r.method == "gradcam").scores for name, rs in rows.items()}
    diff = max(abs(grad["batched"][c] - grad["per image"][c]) for c in grad["batched"])
    print(f"{len(data.paths)} images, {args.steps + 1} fractions, Grad-CAM + random, threads {torch.get_num_threads()}")
    for name, (wall, cpu) in best.items():
        print(f"  {name:9s}: {wall:7.2f} s wall, {cpu:7.2f} s CPU")
    print(
        f"per image / batched: {best['per image'][0] / best['batched'][0]:.2f}x wall, "
        f"{best['per image'][1] / best['batched'][1]:.2f}x CPU; largest Grad-CAM AUC difference {diff:.2e}"
    )
    print("Grad-CAM " + ", ".join(f"{c} {100 * v:.1f}" for c, v in grad["batched"].items()))


if __name__ == "__main__":
    main()
