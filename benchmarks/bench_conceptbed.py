"""ConceptBed's costs on the world, measured in one run (each ratio beside its target):

* oracle scoring batched against a per-image loop (target >= 5x);
* generation of N images per concept batched against one image per pipeline call (target >= 3x),
  on the shipped world Flux;
* the composition VQA oracle's scoring batched against a per-image loop (target >= 5x),
  and against a per-(image, question) loop (reported beside it, no target);
* question generation for many images' prompts batched against a per-prompt loop.

    .venv/bin/python benchmarks/bench_conceptbed.py [--images 480] [--generate 16] [--threads 1]
        [--repeats 3] [--only oracles]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from concept_grounding.conceptbed import ConceptWorld, task_species
from concept_grounding.judge import ConceptBedJudgeSpec, train_conceptbed_judge
from concept_grounding.vocabulary import load_vocabulary


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def _interleaved(fns: list, repeats: int) -> tuple[list, list[float]]:
    """Each of ``fns``' output and best wall time (s) of ``repeats`` runs after a warm-up run, the
    functions run in turn (a load spike on the shared machine hits all of them alike)."""
    outs = [fn() for fn in fns]
    best = [min(ts) for ts in zip(*[[_timed(fn)[1] for fn in fns] for _ in range(repeats)])]
    return outs, best


def _vqa(world, images: np.ndarray, repeats: int) -> None:
    """The composition VQA oracle: batched (one ``p_yes`` call per prompt over all images) against
    the per-image loop (one call per image with all of the prompt's questions: the baseline)
    and, beside it, a per-(image, question) loop (one question per call, like a VQA model's
    forward pass per question, ConceptBed App. F)."""
    from concept_grounding.conceptbed.compositions import VQAJudge, concept_prompts, questions
    from concept_grounding.judge import create_judge

    vqa = VQAJudge(create_judge("composition-judge"), create_judge("world-judge"))
    n = len(images)
    workloads = {
        "'a photo of two V* in the sky' (count, scene)": [questions("a photo of two V* in the sky")[1:]],
        "every composition prompt of a concept": [questions(p)[1:] for _, p, _ in concept_prompts(world, 0)],
    }
    for name, prompts in workloads.items():
        nq, t_b, t_l, t_q = sum(len(qs) for qs in prompts), 0.0, 0.0, 0.0
        for qs in prompts:  # per prompt: the best of each path, summed over the prompts
            (batched, loop, single), (b, lo, q) = _interleaved(
                [
                    lambda qs=qs: vqa.p_yes(images, qs, 0, world),
                    lambda qs=qs: np.concatenate([vqa.p_yes(images[i : i + 1], qs, 0, world) for i in range(n)]),
                    lambda qs=qs: np.concatenate(
                        [
                            np.concatenate([vqa.p_yes(images[i : i + 1], [q], 0, world) for q in qs], axis=1)
                            for i in range(n)
                        ]
                    ),
                ],
                repeats,
            )
            assert np.allclose(batched, loop, atol=1e-4) and np.allclose(batched, single, atol=1e-4)
            t_b, t_l, t_q = t_b + b, t_l + lo, t_q + q
        print(
            f"VQA oracle, {name}: {len(prompts)} prompt(s), {n} images x {nq} questions: batched {t_b:.3f} s, "
            f"per-image loop {t_l:.3f} s, ratio {t_l / t_b:.1f}x (target >= 5x); "
            f"per-(image, question) loop {t_q:.3f} s, ratio {t_q / t_b:.1f}x"
        )


def _question_generation(world, n: int, repeats: int) -> None:
    """Question generation for ``n`` images' prompts (a concept's composition prompts, cycled):
    :func:`questions_of` (each unique prompt parsed once) against :func:`questions` per prompt."""
    from concept_grounding.conceptbed.compositions import concept_prompts, questions, questions_of

    unique = [p for _, p, _ in concept_prompts(world, 0)]
    prompts = [unique[i % len(unique)] for i in range(n)]
    (batched, loop), (t_b, t_l) = _interleaved(
        [lambda: questions_of(prompts), lambda: [questions(p) for p in prompts]], repeats
    )
    assert batched == loop
    print(
        f"question generation, {n} prompts ({len(unique)} unique): batched {t_b * 1e3:.3f} ms, per-prompt loop "
        f"{t_l * 1e3:.3f} ms, ratio {t_l / t_b:.1f}x (target >= 5x)"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=480, help="images the oracles score")
    p.add_argument("--generate", type=int, default=16, help="images generated per concept")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="VQA and question timings: best of this many runs, in turn (after a warm-up)",
    )
    p.add_argument(
        "--only", choices=("all", "oracles"), default="all", help="'oracles': skip the (slow) generation section"
    )
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    classes = task_species(load_vocabulary(), "object")[:12]
    cw = ConceptWorld(classes=classes)
    oracle = train_conceptbed_judge(
        ConceptBedJudgeSpec("species", "medium", per_class=10, epochs=2, classes=classes), cw.world
    )
    per = max(1, args.images // len(classes))
    images = np.concatenate([cw.renders(c, per, "concept_real") for c in range(len(classes))])
    batched, t_batched = _timed(lambda: oracle.scores(images, batch_size=256))
    loop, t_loop = _timed(lambda: np.concatenate([oracle.scores(images[i : i + 1]) for i in range(len(images))]))
    assert np.allclose(batched, loop, atol=1e-5)
    print(
        f"oracle scoring, {len(images)} images: batched {t_batched:.3f} s, per-image loop {t_loop:.3f} s, "
        f"ratio {t_loop / t_batched:.1f}x (target >= 5x)"
    )

    _vqa(cw.world, images, args.repeats)
    _question_generation(cw.world, len(images), args.repeats)

    if args.only == "oracles":
        return
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
    print(
        f"generation, {n} images of the world Flux (20 steps, true CFG): batched {t_batched:.2f} s, one per call "
        f"{t_single:.2f} s, ratio {t_single / t_batched:.2f}x (target >= 3x); max pixel difference {same}"
    )


if __name__ == "__main__":
    main()
