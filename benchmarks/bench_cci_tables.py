"""Time ``cci-bench``'s Table 1 harness batched against a per-image loop, in one run.

Three arms on the same world export (an ImageNet-style folder), the same tiny config-built
open_clip ViT and the same methods, interleaved in each round (the minimum over rounds is
the least disturbed by other load):

* **harness, batched**: :func:`~concept_grounding.cci.tables.classification_table` with
  ``--batch`` images per chunk (every fraction's perturbations stacked, ``--batch`` images per
  forward; the clean and fully replaced images scored once per chunk for all methods; the
  CLS-only last block of :func:`~concept_grounding.cci.fast.image_embeds`);
* **harness, per image**: the same function with ``batch_size=1`` (one image, one forward per
  perturbed image; the like-for-like ratio: only the batching differs);
* **per-image loop**: :func:`per_image_loop`, what the harness replaced (and what earlier runs
  of this benchmark timed as "per image"): one image at a time, each method's maps, then one
  forward of the model's own ``encode_image`` per fraction and mode, ends included;
* **scoring floor** (not a harness: a bound): :func:`scoring_floor`, only the forwards the
  batched harness cannot avoid (per image: 2 ends + methods x 2 modes x ``steps - 1``
  interior fractions), ``--batch`` images per :func:`~concept_grounding.cci.fast.image_embeds`
  call, no maps and no perturbation. per-image loop / scoring floor is the most the ratio
  could reach with every map and every bookkeeping step free.

The tables agree (``tests/cci/test_cci_tables.py``). Prints the wall-clock and CPU-time ratios
for each thread count, one thread first (the batching alone) and then every CPU of the machine
(as torch runs by default: a batch of images keeps every core busy, one image at a time cannot).
Target: per-image loop / harness batched >= 5 on this CPU.

Usage: ``python benchmarks/bench_cci_tables.py [--images-per-class 6] [--batch 32] [--size 64]
[--repeats 2] [--threads 1 2]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def per_image_loop(models, data, methods, steps: int) -> None:
    """The reference loop: per image, per method, one ``encode_image`` forward per perturbed image."""
    import torch
    import torch.nn.functional as F

    from concept_grounding.cci.backends import get_backend
    from concept_grounding.cci.explainers import build_explainer
    from concept_grounding.cci.faithfulness import classification_curves
    from concept_grounding.models.clip import class_caption

    for _, handle in models:
        explainers = {m: build_explainer(m, handle.model, batch_size=1) for m in methods}
        be = get_backend(handle.model)
        classes = F.normalize(handle.encode_text([class_caption(c) for c in data.class_names]).float(), dim=-1)
        for i in range(len(data.paths)):
            px = handle.pixels(data.images([i]))
            label = torch.as_tensor(data.labels[i : i + 1], dtype=torch.long)
            for explainer in explainers.values():
                maps = explainer(px, classes[label]).maps
                classification_curves(
                    lambda x, be=be, classes=classes: F.normalize(be.encode_image(x).float(), dim=-1) @ classes.T,
                    px,
                    maps,
                    label,
                    steps=steps,
                )


def scoring_floor(models, data, methods, steps: int, batch: int) -> None:
    """The batched harness's unavoidable forwards alone (module docstring): the clean images,
    repeated to ``len(data) * (2 + 2 * len(methods) * (steps - 1))`` images, ``batch`` per forward."""
    import torch

    from concept_grounding.cci.backends import get_backend
    from concept_grounding.cci.fast import image_embeds

    count = len(data.paths) * (2 + 2 * len(methods) * (steps - 1))
    for _, handle in models:
        be = get_backend(handle.model)
        ops = be.blocks()
        px = handle.pixels(data.images(range(min(batch, len(data.paths)))))
        px = px.repeat((batch + len(px) - 1) // len(px), 1, 1, 1)[:batch]
        with torch.inference_mode():
            for start in range(0, count, batch):
                image_embeds(be, px[: min(batch, count - start)], ops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images-per-class", type=int, default=6)
    parser.add_argument("--classes", type=int, default=6)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=sorted({1, os.cpu_count() or 1}),
        help="torch thread counts, each timed in turn (default: 1 and every CPU of this machine)",
    )
    parser.add_argument("--methods", nargs="+", default=["cci", "gradcam", "grad-eclip", "maskclip", "rollout"])
    args = parser.parse_args()

    import torch

    from concept_grounding.cci.layouts import export_world_image_folder, read_image_folder
    from concept_grounding.cci.table_models import load_table_models
    from concept_grounding.cci.tables import classification_table
    from concept_grounding.vocabulary import load_vocabulary

    classes = load_vocabulary().sub_classes[: args.classes]
    arms = {
        "harness, batched": lambda: classification_table(
            models, data, methods=args.methods, steps=args.steps, batch_size=args.batch, progress=False
        ),
        "harness, per image": lambda: classification_table(
            models, data, methods=args.methods, steps=args.steps, batch_size=1, progress=False
        ),
        "per-image loop": lambda: per_image_loop(models, data, args.methods, args.steps),
        "scoring floor": lambda: scoring_floor(models, data, args.methods, args.steps, args.batch),
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = export_world_image_folder(
            f"{tmp}/val", per_class=args.images_per_class, image_size=args.size, class_names=classes
        )
        data = read_image_folder(root, root / "class_names.txt")
        models = load_table_models(["random-clip"], image_size=args.size)
        for threads in args.threads:
            torch.set_num_threads(threads)
            load = os.getloadavg()
            timings: dict[str, list[tuple[float, float]]] = {arm: [] for arm in arms}
            for _ in range(args.repeats):
                for arm, run in arms.items():
                    wall, cpu = time.perf_counter(), time.process_time()
                    run()
                    timings[arm].append((time.perf_counter() - wall, time.process_time() - cpu))
            report(timings, args, threads, load, len(data.paths))


def report(
    timings: dict[str, list[tuple[float, float]]],
    args: argparse.Namespace,
    threads: int,
    load: tuple[float, float, float],
    n_images: int,
) -> None:
    """Print one thread count's best times and ratios."""
    best = {arm: (min(t[0] for t in ts), min(t[1] for t in ts)) for arm, ts in timings.items()}
    print(
        f"\n{n_images} images, {args.size} px, tiny open_clip ViT, methods {args.methods}, "
        f"{args.steps + 1} fractions, {threads} thread(s), batch {args.batch}; load average (1 min) "
        f"{load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end on {os.cpu_count()} CPUs"
    )
    for arm, (wall, cpu) in best.items():
        print(f"{arm:>20}: wall {wall:.2f} s, CPU {cpu:.2f} s")
    batched = best["harness, batched"]
    for arm in ("per-image loop", "harness, per image"):
        print(
            f"ratio {arm} / harness batched: wall {best[arm][0] / batched[0]:.2f}x, "
            f"CPU {best[arm][1] / batched[1]:.2f}x"
        )
    floor = best["scoring floor"]
    print(
        f"scoring floor: {floor[0] / batched[0]:.0%} of the batched harness's wall time; ceiling per-image loop / "
        f"scoring floor: wall {best['per-image loop'][0] / floor[0]:.2f}x, "
        f"CPU {best['per-image loop'][1] / floor[1]:.2f}x"
    )


if __name__ == "__main__":
    main()
