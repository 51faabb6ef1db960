"""What ``evaluate_sub`` adds on top of a model's own forward passes.

A torchvision ResNet-18 (random weights, 112 concept outputs, a plain ``nn.Module``) reads
224 px images normalised with the ImageNet statistics. The SUB sample is the bird world's
SUB export (``--n`` images, 64 px renders upsampled to 224 by the preprocessing, as a real
SUB image would be resized). The sample is cut into ``--rounds`` chunks; for each chunk,
in one run and interleaved:

* **forward**: the model's own ``model(batch)`` on the chunk's preprocessed batches
  (decoding and preprocessing done beforehand, outside the timer);
* **evaluate_sub**: the whole harness on the same chunk and batch size: decoding,
  preprocessing, the forward passes, the sigmoid, the score matrix, the metric.

The two alternate which goes first from round to round (so load drifts on a shared
machine fall on both), after one untimed warm-up batch; the median of the per-round
ratios is printed beside the ratio of the sums.

The ratio (sum of evaluate_sub times) / (sum of forward times) is the harness overhead
plus one; the target is <= 1.10. Images/s of ``evaluate_sub`` are printed too. Both wall
time and this process's CPU time (all its threads, ``time.process_time``) are taken: on a
machine shared with other jobs the wall ratio swings with their load, the CPU ratio much
less (it counts the work the harness adds, even where a thread hides it from the wall clock).

    python benchmarks/bench_sub.py                  # 2,000 images, batch 64, 16 rounds
    python benchmarks/bench_sub.py --n 256 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import time


def sub_sample(n: int, image_size: int, seed: int):
    """The first ``n`` images of the world's SUB export (enough images per pairing to reach ``n``)."""
    from concept_grounding.evaluation import load_sub_source

    per_pairing = 1
    while True:
        data = load_sub_source(image_size=image_size, seed=seed, per_pairing=per_pairing)
        if len(data) >= n:
            return data.select(range(n))
        per_pairing += 1 + (n - len(data)) // max(len(data) // per_pairing, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="SUB images")
    parser.add_argument("--size", type=int, default=224, help="model input side (px)")
    parser.add_argument("--render-size", type=int, default=64, help="world render side (px)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=16, help="interleaved chunks")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch
    import torchvision

    from concept_grounding.evaluation import evaluate_sub, make_preprocess
    from concept_grounding.evaluation.preprocessing import IMAGENET_MEAN, IMAGENET_STD

    start = time.perf_counter()
    data = sub_sample(args.n, args.render_size, args.seed)
    print(
        f"SUB sample: {len(data)} world images at {args.render_size} px ({time.perf_counter() - start:.0f} s to render)"
    )
    torch.manual_seed(args.seed)
    model = torchvision.models.resnet18(weights=None, num_classes=112).eval()
    preprocess = make_preprocess(size=args.size, mean=IMAGENET_MEAN, std=IMAGENET_STD)
    print(f"ResNet-18 at {args.size} px, batch {args.batch_size}, {torch.get_num_threads()} torch threads")

    with torch.inference_mode():  # warm-up: oneDNN builds its kernels on the first call of a shape
        model(preprocess(data[: args.batch_size]["image"]))
    bounds = [round(i * len(data) / args.rounds) for i in range(args.rounds + 1)]
    forward_s = evaluate_s = forward_cpu = evaluate_cpu = 0.0
    per_round: list[float] = []

    def forward_only(chunk) -> tuple[float, float]:
        batches = [preprocess(chunk[i : i + args.batch_size]["image"]) for i in range(0, len(chunk), args.batch_size)]
        with torch.inference_mode():
            t0, c0 = time.perf_counter(), time.process_time()
            for batch in batches:
                model(batch)
            return time.perf_counter() - t0, time.process_time() - c0

    def harness(chunk) -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        evaluate_sub(
            model, chunk, concept_names="cbm_112", preprocess=preprocess, batch_size=args.batch_size, progress=False
        )
        return time.perf_counter() - t0, time.process_time() - c0

    for r in range(args.rounds):
        chunk = data.select(range(bounds[r], bounds[r + 1]))
        if r % 2 == 0:
            (f, fc), (e, ec) = forward_only(chunk), harness(chunk)
        else:
            (e, ec), (f, fc) = harness(chunk), forward_only(chunk)
        forward_s, evaluate_s = forward_s + f, evaluate_s + e
        forward_cpu, evaluate_cpu = forward_cpu + fc, evaluate_cpu + ec
        per_round.append(e / f)
        print(
            f"  round {r + 1}/{args.rounds}: {len(chunk)} images, forward {forward_s:.1f} s, "
            f"evaluate_sub {evaluate_s:.1f} s so far"
        )
    ratio = evaluate_s / forward_s
    median = statistics.median(per_round)
    print(f"forward only:  {forward_s:.1f} s ({len(data) / forward_s:.1f} images/s)")
    print(f"evaluate_sub:  {evaluate_s:.1f} s ({len(data) / evaluate_s:.1f} images/s)")
    cpu_ratio = evaluate_cpu / forward_cpu
    print(f"CPU time:      forward {forward_cpu:.1f} s, evaluate_sub {evaluate_cpu:.1f} s")
    print(
        f"ratio evaluate_sub / forward: wall {ratio:.3f} (sums), {median:.3f} (median of {len(per_round)} rounds); "
        f"CPU {cpu_ratio:.3f}; target <= 1.10: {'PASS' if max(ratio, cpu_ratio) <= 1.10 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
