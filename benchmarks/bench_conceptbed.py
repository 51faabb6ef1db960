"""ConceptBed's costs on the world, measured in one run (issue 43's targets beside each ratio):

* oracle scoring batched against a per-image loop (target >= 5x);
* generation of N images per concept batched against one image per pipeline call (target >= 3x),
  on the shipped world Flux;
* the composition VQA oracle's scoring batched against a per-image loop (target >= 5x).

    .venv/bin/python benchmarks/bench_conceptbed.py [--images 480] [--generate 16] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from concept_grounding.conceptbed import ConceptWorld, OracleSpec, task_species, train_oracle
from concept_grounding.vocabulary import load_vocabulary


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=480, help="images the oracles score")
    p.add_argument("--generate", type=int, default=16, help="images generated per concept")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    classes = task_species(load_vocabulary(), "object")[:12]
    cw = ConceptWorld(classes=classes)
    oracle = train_oracle(OracleSpec("species", "medium", per_class=10, epochs=2, classes=classes), cw)
    per = max(1, args.images // len(classes))
    images = np.concatenate([cw.renders(c, per, "concept_real") for c in range(len(classes))])
    batched, t_batched = _timed(lambda: oracle.probabilities(images, batch_size=256))
    loop, t_loop = _timed(lambda: np.concatenate([oracle.probabilities(images[i:i + 1]) for i in range(len(images))]))
    assert np.allclose(batched, loop, atol=1e-5)
    print(f"oracle scoring, {len(images)} images: batched {t_batched:.3f} s, per-image loop {t_loop:.3f} s, "
          f"ratio {t_loop / t_batched:.1f}x (target >= 5x)")

    from concept_grounding.conceptbed.compositions import CompositionOracle, questions
    from concept_grounding.judge import load_world_judge
    from concept_grounding.judge.composition import load_composition_judge

    vqa = CompositionOracle(load_composition_judge(), load_world_judge())
    qs = questions("a photo of two V* in the sky")
    world = cw.world
    batched, t_batched = _timed(lambda: vqa.p_yes(images, qs[1:], 0, world))
    loop, t_loop = _timed(lambda: np.concatenate([vqa.p_yes(images[i:i + 1], qs[1:], 0, world) for i in range(len(images))]))
    assert np.allclose(batched, loop, atol=1e-4)
    print(f"VQA oracle, {len(images)} images x {len(qs) - 1} questions: batched {t_batched:.3f} s, per-image loop "
          f"{t_loop:.3f} s, ratio {t_loop / t_batched:.1f}x (target >= 5x)")

    from concept_grounding.conceptbed.learners import FluxLearner

    learner = FluxLearner("Textual Inversion", token="bird")  # the base world Flux, V* read as "bird"
    learner.pipe = learner.base_pipeline()
    learner.pipe.set_progress_bar_config(disable=True)
    prompts = ["a photo of a V*", "a photo of two V*"]
    n = args.generate
    learner.generate(prompts, 2, 0)  # warm-up
    batched, t_batched = _timed(lambda: learner.generate(prompts, n, 0))
    single, t_single = _timed(lambda: np.concatenate([learner.generate([prompts[i % 2]], 1, i) for i in range(n)]))
    same = int(np.abs(batched.astype(int) - single).max())
    print(f"generation, {n} images of the world Flux (20 steps, true CFG): batched {t_batched:.2f} s, one per call "
          f"{t_single:.2f} s, ratio {t_single / t_batched:.2f}x (target >= 3x); max pixel difference {same}")


if __name__ == "__main__":
    main()
