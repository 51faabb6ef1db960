"""CCD of each ConceptBed learner against its training steps on the bird world (docs/conceptbed/convergence.md).

Per learner and concept, the learner at step 0 (``prepare_trainer``: V* added, nothing trained) and after each
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
from concept_grounding.conceptbed.learners import FLUX_LEARNERS, FluxLearner
from concept_grounding.conceptbed.scoring import Scored

__all__ = ["ConvergenceConfig", "run_convergence", "collect", "convergence_plot", "moved_budget", "moved_at"]


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
    from concept_grounding.learners.methods import METHODS
    from concept_grounding.learners.train import prepare_trainer

    method = FLUX_LEARNERS[name]
    config = LearnConfig(
        method=method,
        model=learner.model_path(),
        images=folder,
        token=learner.token,
        init_word=learner.init_word,
        class_prompt=learner.class_prompt,
        steps=1,
        lr=METHODS[method].world_lr,
        seed=learner.seed,
    )
    learner.size = int(concept.train.shape[1])
    learner.pipe = prepare_trainer(learner.base_pipeline(), config).pipe
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


def run_convergence(config: ConvergenceConfig, progress: bool = True) -> list[dict[str, Any]]:
    """One point per (learner, steps): ``{"learner", "steps", "ccd", "interval", "per_concept", "seconds"}``, each
    also appended to ``work/points.jsonl`` as soon as it is measured (an interrupted run keeps what it measured)."""
    import json

    from concept_grounding.cpu import limited_threads

    log = Path(config.work) / "points.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    points = []
    with limited_threads(config.threads):
        oracle = _oracle(config)
        concepts = ConceptWorld(m=config.m, real=config.real, seed=config.seed).concepts(config.task, config.concepts)
        for name in config.learners:
            for steps in config.steps:
                t0 = time.perf_counter()
                scored = Scored("classifier")
                for concept in concepts:
                    images = _images_at(name, steps, concept, config)
                    scored.add(oracle.scores(images), oracle.scores(concept.real), concept.label)
                result = scored.result()
                point = {
                    "learner": name,
                    "steps": steps,
                    "ccd": result["ccd"],
                    "interval": scored.interval("ccd", config.boot, config.seed),
                    "per_concept": [float(v) for v in result["per_concept_ccd"]],
                    "seconds": time.perf_counter() - t0,
                    "concepts": [c.name for c in concepts],
                    "oracle_accuracy": oracle.accuracy,
                }
                points.append(point)
                with log.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(point) + "\n")
                if progress:
                    print(f"{name} @ {steps}: CCD {point['ccd']:.4f} {point['interval']}", flush=True)
    return points


def collect(points: Sequence[dict[str, Any]], config: ConvergenceConfig) -> dict[str, Any]:
    """The figure's JSON from points (of one or more runs): ``ccd`` / ``interval`` / ``seconds`` per learner and
    step (``None`` where a step was not measured), the steps measured, the budget rule's answers.

    >>> pts = [{"learner": "A", "steps": 0, "ccd": 0.9, "interval": [0.8, 1.0]},
    ...        {"learner": "A", "steps": 30, "ccd": 0.5, "interval": [0.4, 0.6]}]
    >>> r = collect(pts, ConvergenceConfig(steps=(0, 30, 100)))
    >>> r["ccd"], r["moved_at"]
    ({'A': [0.9, 0.5, None]}, {'A': 30})
    """
    steps = sorted({int(p["steps"]) for p in points} | set(config.steps))
    learners = list(dict.fromkeys(p["learner"] for p in points))
    at = {(p["learner"], int(p["steps"])): p for p in points}
    out: dict[str, Any] = {"ccd": {}, "interval": {}, "seconds": {}, "per_concept": {}}
    for name in learners:
        for key in out:
            out[key][name] = [at[name, s].get(key) if (name, s) in at else None for s in steps]
    out["config"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in config.__dict__.items()} | {"steps": steps}
    out["concepts"] = next((p["concepts"] for p in points if "concepts" in p), [])
    out["oracle_accuracy"] = next((p["oracle_accuracy"] for p in points if "oracle_accuracy" in p), None)
    out["moved_budget"], out["moved_at"] = moved_budget(out), moved_at(out)
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
        cells = _at(results, k)
        if all(bounds is not None and not bounds[0] <= ccd[0] <= bounds[1] for ccd, bounds in cells):
            return int(s)
    return None


def moved_at(results: dict[str, Any]) -> dict[str, int | None]:
    """Per learner, the fewest steps whose CCD interval excludes its step-0 CCD (``None``: never within the run)."""
    steps = results["config"]["steps"]
    out: dict[str, int | None] = {}
    for name, ccd in results["ccd"].items():
        bounds = results["interval"][name]
        out[name] = next(
            (int(s) for s, b in zip(steps, bounds) if s and b is not None and not b[0] <= ccd[0] <= b[1]), None
        )
    return out


def _at(results: dict[str, Any], k: int) -> list[tuple[list[float], list[float] | None]]:
    return [(results["ccd"][name], results["interval"][name][k]) for name in results["ccd"]]


def convergence_plot(results: dict[str, Any], path: Path) -> Path:
    """CCD (with its 95 % interval) against learner steps, one line per learner; steps on a symlog axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps: Sequence[int] = results["config"]["steps"]
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    for name, values in results["ccd"].items():
        keep = [k for k, v in enumerate(values) if v is not None]
        x = [steps[k] for k in keep]
        lo, hi = np.asarray([results["interval"][name][k] for k in keep]).T
        line = ax.plot(x, [values[k] for k in keep], marker="o", label=name)[0]
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.15)
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
    p.add_argument("--points", type=Path, nargs="*", default=[], help="points.jsonl of earlier runs to plot beside")
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
    earlier = [json.loads(line) for path in args.points for line in path.read_text(encoding="utf-8").splitlines()]
    t0, c0 = time.perf_counter(), time.process_time()
    results = collect(earlier + run_convergence(config), config)
    results["cost"] = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "convergence.json").write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    convergence_plot(results, args.out / "convergence.png")
    print(f"moved budget: {results['moved_budget']}; {results['cost']}")


if __name__ == "__main__":
    main()
