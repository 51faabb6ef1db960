"""CCD of each ConceptBed learner against its training steps on the bird world (docs/conceptbed/convergence.md).

Per learner and concept, the learner at step 0 (``prepare_learner``: V* added, nothing trained) and after each
budget of ``--learn-steps`` (a fresh ``FluxLearner.fit``, the path ``conceptbed`` runs) generates images that the
task's oracle scores (ConceptBed Eq. 3 through :class:`~concept_grounding.conceptbed.scoring.Scored`); each point
carries its bootstrap 95 % interval over concepts and images (:mod:`concept_grounding.conceptbed.intervals`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from concept_grounding.conceptbed.concepts import TASK_JUDGE, Concept, ConceptWorld
from concept_grounding.conceptbed.learners import DEFAULT_LR, FLUX_LEARNERS, FluxLearner
from concept_grounding.conceptbed.scoring import Scored

__all__ = ["ConvergenceConfig", "run_convergence", "convergence_plot", "moved_budget", "moved_at"]


@dataclass(frozen=True)
class ConvergenceConfig:
    """What one convergence run measures (``--quick``'s sizes by default)."""

    task: str = "object"
    concepts: int = 2
    m: int = 8
    real: int = 8
    images: int = 8
    steps: tuple[int, ...] = (0, 30, 100, 300)
    learners: tuple[str, ...] = tuple(FLUX_LEARNERS)
    seed: int = 0
    boot: int = 1000
    oracle_per_class: int = 40
    oracle_epochs: int = 8
    capacity: str = "medium"
    cache: str | None = None
    work: str = "convergence-work"
    threads: int = 1
    notes: dict[str, Any] = field(default_factory=dict)


def _oracle(config: ConvergenceConfig) -> Any:
    from concept_grounding.judge.conceptbed import ConceptBedJudgeSpec, load_or_train, require_valid

    spec = ConceptBedJudgeSpec(
        TASK_JUDGE[config.task], config.capacity, config.oracle_per_class, config.oracle_epochs, config.seed, 32, None
    )
    return require_valid(load_or_train(spec, config.cache))


def _untrained(name: str, learner: FluxLearner, concept: Concept, folder: Path) -> FluxLearner:
    """``learner`` at step 0: V* added to the base pipeline as the learner's own set-up adds it, nothing trained."""
    from concept_grounding.learners import LearnConfig
    from concept_grounding.learners.train import prepare_learner

    method = FLUX_LEARNERS[name]
    config = LearnConfig(
        method=method,
        model=learner.model_path(),
        images=folder,
        token=learner.token,
        init_word=learner.init_word,
        class_prompt=learner.class_prompt,
        steps=1,
        lr=DEFAULT_LR[method],
        seed=learner.seed,
    )
    learner.size = int(concept.train.shape[1])
    learner.pipe = prepare_learner(learner.base_pipeline(), config).pipe
    return learner


def _images_at(name: str, steps: int, concept: Concept, config: ConvergenceConfig) -> np.ndarray:
    """``config.images`` images of ``concept`` by learner ``name`` after ``steps`` steps."""
    from PIL import Image

    folder = Path(config.work) / name.replace(" ", "_") / concept.name / f"steps_{steps}"
    learner = FluxLearner(name, steps=max(steps, 1), seed=config.seed, prior_cache=str(Path(config.work) / "priors"))
    if steps == 0:
        images = folder / "train_images"
        images.mkdir(parents=True, exist_ok=True)
        for i, image in enumerate(concept.train):
            Image.fromarray(image).save(images / f"{i:04d}.png")
        _untrained(name, learner, concept, images)
    else:
        learner.fit(concept, folder)
    return learner.generate(concept.prompts, config.images, config.seed)


def run_convergence(config: ConvergenceConfig, progress: bool = True) -> dict[str, Any]:
    """``{"config", "ccd": {learner: [per step]}, "interval": {learner: [[lo, hi] per step]}, "seconds", ...}``."""
    from concept_grounding.cpu import limited_threads

    with limited_threads(config.threads):
        oracle = _oracle(config)
        cw = ConceptWorld(m=config.m, real=config.real, seed=config.seed)
        concepts = cw.concepts(config.task, config.concepts)
        out: dict[str, Any] = {"ccd": {}, "interval": {}, "seconds": {}, "per_concept": {}}
        for name in config.learners:
            for key in out:
                out[key][name] = []
            for steps in config.steps:
                t0 = time.perf_counter()
                scored = Scored("classifier")
                for concept in concepts:
                    images = _images_at(name, steps, concept, config)
                    scored.add(oracle.scores(images), oracle.scores(concept.real), concept.label)
                out["ccd"][name].append(scored.result()["ccd"])
                out["interval"][name].append(scored.interval("ccd", config.boot, config.seed))
                out["per_concept"][name].append([float(v) for v in scored.result()["per_concept_ccd"]])
                out["seconds"][name].append(time.perf_counter() - t0)
                if progress:
                    print(f"{name} @ {steps}: CCD {out['ccd'][name][-1]:.4f} {out['interval'][name][-1]}", flush=True)
    out["config"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in config.__dict__.items()}
    out["concepts"] = [c.name for c in concepts]
    out["oracle_accuracy"] = oracle.accuracy
    return out


def moved_budget(results: dict[str, Any]) -> int | None:
    """The fewest steps at which every learner's CCD interval lies apart from (excludes) its step-0 CCD, or ``None``.

    >>> r = {"config": {"steps": [0, 30, 100]}, "ccd": {"a": [0.9, 0.8, 0.5]},
    ...      "interval": {"a": [[0.8, 1.0], [0.7, 0.95], [0.4, 0.6]]}}
    >>> moved_budget(r)
    100
    """
    steps = results["config"]["steps"]
    for k, s in enumerate(steps):
        if s == 0:
            continue
        if all(not (lo <= ccd[0] <= hi) for ccd, (lo, hi) in _at(results, k)):
            return int(s)
    return None


def moved_at(results: dict[str, Any]) -> dict[str, int | None]:
    """Per learner, the fewest steps whose CCD interval excludes its step-0 CCD (``None``: never within the run)."""
    steps = results["config"]["steps"]
    out: dict[str, int | None] = {}
    for name, ccd in results["ccd"].items():
        bounds = results["interval"][name]
        out[name] = next((int(s) for s, (lo, hi) in zip(steps, bounds) if s and not lo <= ccd[0] <= hi), None)
    return out


def _at(results: dict[str, Any], k: int) -> list[tuple[list[float], list[float]]]:
    return [(results["ccd"][name], results["interval"][name][k]) for name in results["ccd"]]


def convergence_plot(results: dict[str, Any], path: Path) -> Path:
    """CCD (with its 95 % interval) against learner steps, one line per learner; steps on a symlog axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps: Sequence[int] = results["config"]["steps"]
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    for name, values in results["ccd"].items():
        lo, hi = np.asarray(results["interval"][name]).T
        line = ax.plot(steps, values, marker="o", label=name)[0]
        ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.15)
    ax.set_xscale("symlog", linthresh=30)
    ax.set_xticks(list(steps), [str(s) for s in steps])
    ax.set_xlabel("learner steps")
    ax.set_ylabel("CCD (lower is better)")
    ax.set_title(f"{results['config']['task']}: {len(results['concepts'])} concepts, 95 % bootstrap", fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    """``python benchmarks/experiments/conceptbed_convergence.py --out docs/conceptbed``: the figure and its JSON."""
    import argparse
    import json

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder of convergence.png and convergence.json")
    p.add_argument("--work", type=Path, default=Path("convergence-work"), help="learners' weights and prior images")
    p.add_argument("--cache", default=None, help="oracle cache folder (default: none, trained here)")
    p.add_argument("--steps", type=int, nargs="+", default=list(ConvergenceConfig.steps))
    p.add_argument("--learners", nargs="+", default=list(ConvergenceConfig.learners))
    p.add_argument("--concepts", type=int, default=ConvergenceConfig.concepts)
    p.add_argument("--images", type=int, default=ConvergenceConfig.images)
    p.add_argument("--threads", type=int, default=ConvergenceConfig.threads)
    args = p.parse_args(argv)
    config = ConvergenceConfig(
        concepts=args.concepts,
        images=args.images,
        steps=tuple(args.steps),
        learners=tuple(args.learners),
        cache=args.cache,
        work=str(args.work),
        threads=args.threads,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    results = run_convergence(config)
    results["cost"] = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
    results["moved_budget"] = moved_budget(results)
    results["moved_at"] = moved_at(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "convergence.json").write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    convergence_plot(results, args.out / "convergence.png")
    print(f"moved budget: {results['moved_budget']}; {results['cost']}")


if __name__ == "__main__":
    main()
