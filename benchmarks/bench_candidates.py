"""Time candidate attribute selection (SUB Sec. 4.2) batched against a per-image loop.

CUB-sized by default: 11,788 images x 45 attributes (SUB's 32 substitution attributes and
the first values of further groups, 45 in all), answered by the tiny random open_clip
CLIP scorer (:func:`~concept_grounding.tdg.filter_scorers.tiny_clip_scorer`, 32 px, no download).

* **batched**: :func:`~concept_grounding.tdg.candidates.attribute_probabilities`, one
  question per group asked of ``--batch-size`` images per call;
* **per-image loop**: the same questions asked one image at a time (what a plain loop over
  the dataset does), timed on ``--loop-images`` images and scaled to the full count
  (the per-image cost is flat);

then the threshold selection (:func:`~concept_grounding.tdg.candidates.select_attributes`)
on the full answers. Both paths give the same probabilities (checked on the loop's images).

Usage: ``python benchmarks/bench_candidates.py [--images 11788] [--loop-images 200]
[--batch-size 256] [--threads 2]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def attributes_45(vocab) -> list[str]:
    """SUB's 32 substitution attributes, then the first value of other groups, up to 45."""
    chosen = list(dict.fromkeys(vocab.sub_substitutions.values()))
    for columns in vocab.groups.values():
        if len(chosen) >= 45:
            break
        name = vocab.attributes[columns[0]]
        if name not in chosen:
            chosen.append(name)
    return chosen[:45]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=11788)
    parser.add_argument("--loop-images", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch
    from PIL import Image

    from concept_grounding.tdg.candidates import attribute_probabilities, select_attributes
    from concept_grounding.tdg.filter_scorers import tiny_clip_scorer
    from concept_grounding.vocabulary import load_vocabulary

    torch.set_num_threads(args.threads)
    vocab = load_vocabulary()
    attributes = attributes_45(vocab)
    groups = {vocab.group_of(a) for a in attributes}
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (args.images, 32, 32, 3), dtype=np.uint8)
    images = [Image.fromarray(p) for p in pixels]
    labels = rng.random((args.images, len(attributes))) < 0.1
    scorer = tiny_clip_scorer(image_size=32)

    start = time.perf_counter()
    loop = np.concatenate(
        [attribute_probabilities(scorer, [im], attributes, vocab, batch_size=1) for im in images[: args.loop_images]]
    )
    loop_s = (time.perf_counter() - start) * args.images / args.loop_images

    start = time.perf_counter()
    batched = attribute_probabilities(scorer, images, attributes, vocab, batch_size=args.batch_size)
    batched_s = time.perf_counter() - start
    start = time.perf_counter()
    selection = select_attributes(batched, labels, attributes)
    select_s = time.perf_counter() - start

    diff = float(np.abs(batched[: args.loop_images] - loop).max())
    print(
        f"{args.images} images x {len(attributes)} attributes ({len(groups)} groups), tiny CLIP scorer, "
        f"{args.threads} thread(s)"
    )
    print(f"per-image loop: {loop_s:.1f} s (timed on {args.loop_images} images, scaled)")
    print(f"batched ({args.batch_size} per call): {batched_s:.1f} s  -> {loop_s / batched_s:.1f}x faster")
    print(f"threshold selection over the grid: {select_s * 1000:.1f} ms; {len(selection.kept)} kept (random answers)")
    print(f"largest difference batched vs loop: {diff:.2e}")


if __name__ == "__main__":
    main()
