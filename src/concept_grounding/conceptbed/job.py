"""``concept-grounding conceptbed``: ConceptBed's Tables 1, 7 and 8 and Figs. 4-5 on the bird world.

Steps: (1) check the learners and train (or load) the oracles, refusing any below
:data:`~concept_grounding.judge.conceptbed_spec.CONCEPTBED_BAR` before anything else; (2) draw the concepts of each task
(:class:`~.concepts.ConceptWorld`); (3) per learner and concept, ``fit`` then ``generate`` N
images; (4) score them with the task's oracle (CCD and Table 7 through
:func:`concept_grounding.metrics.concept_confidence_deviation`), the DINO-style cosine with
``--encoder`` and, for Table 8, the species tasks' CCD under each oracle capacity; (5) the Fig. 5
sensitivity: CCD of real images under growing Gaussian noise. ``save`` writes ``results.json``,
``report.md``, ``fig4_contact_sheet.png``, ``fig5_sensitivity.png`` and ``generated/<learner>/<task>/<concept>/``.
A row brought from elsewhere (``--generated`` / ``--learned``, :mod:`.byo`) is scored beside the learners.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import UsageError
from ..settings import manifest
from ..world.styles import STYLES
from .byo import ByoSource, byo_source, check_source, learner_factory, save_generated
from .concepts import TASK_JUDGE, Concept, ConceptWorld
from .config import COMPOSITION, ConceptBedConfig, concept_tasks
from .learners import check_learners, make_learner
from .report import render_report
from .scoring import STATISTICS, Scored, clip_image_embedder, pairwise_cosine, split_half_cosine, table7_row
from .table2 import CompositionRun
from .table3 import RatingCollector

if TYPE_CHECKING:
    from ..judge.conceptbed import ConceptBedJudge

__all__ = ["ConceptBedResult", "run_conceptbed", "NOISE_LEVELS"]

logger = logging.getLogger(__name__)
#: Fig. 5's perturbation: std of the Gaussian noise added to real images (grey levels)
NOISE_LEVELS: tuple[float, ...] = (0.0, 16.0, 32.0, 64.0, 96.0, 128.0)


@dataclass
class ConceptBedResult:
    """Everything ``save`` writes; ``results`` is the JSON (module docstring)."""

    config: ConceptBedConfig
    results: dict[str, Any]
    sheet: list[tuple[str, np.ndarray]] = field(default_factory=list, repr=False)
    ratings: RatingCollector | None = field(default=None, repr=False)
    generated: dict[tuple[str, str], list[np.ndarray]] = field(default_factory=dict, repr=False)

    def save(self, out: str | Path) -> Path:
        from .figures import contact_sheet, sensitivity_plot

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(self.results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        contact_sheet(self.sheet, out / "fig4_contact_sheet.png")
        sensitivity_plot(self.results["sensitivity"], out / "fig5_sensitivity.png")
        if self.ratings is not None:
            self.ratings.save(out / "ratings")
        if self.config.keep_generated:
            save_generated(out, self.generated, self.results["concepts"])
        report = out / "report.md"
        report.write_text(render_report(self.results), encoding="utf-8")
        self.write_eval_results(out)
        return report

    def write_eval_results(self, out: Path) -> list[Path]:
        """``out/eval_results/<learner>/conceptbed.yaml`` per learner: its CCD per task (Table 1;
        lower is better) on the bird world's concepts (the world dataset, ``bird-world``)."""
        from ..eval_results import result_entries, write_eval_results

        notes = f"concept-grounding conceptbed, CCD (lower is better), seed {self.config.seed}"
        return [
            path
            for learner, row in self.results["table1"].items()
            if (
                path := write_eval_results(
                    out,
                    learner,
                    "conceptbed",
                    result_entries("bird-world", {f"ccd/{t}": v for t, v in row.items()}, notes=notes),
                )
            )
        ]


def _oracles(config: ConceptBedConfig) -> tuple[dict[str, ConceptBedJudge], dict[str, ConceptBedJudge]]:
    """(oracle per task kind, species oracle per Table 8 capacity), each validated."""
    from ..judge.conceptbed import ConceptBedJudgeSpec, load_or_train, require_valid

    def spec(kind: str, capacity: str) -> ConceptBedJudgeSpec:
        return ConceptBedJudgeSpec(
            kind, capacity, config.oracle_per_class, config.oracle_epochs, config.seed, 32, config.classes
        )

    kinds = sorted({TASK_JUDGE[t] for t in concept_tasks(config)})
    oracles = {k: require_valid(load_or_train(spec(k, config.capacity), config.cache)) for k in kinds}
    table8 = {}
    if any(TASK_JUDGE[t] == "species" for t in concept_tasks(config)):
        for cap in config.table8:
            table8[cap] = (
                oracles["species"]
                if cap == config.capacity
                else require_valid(load_or_train(spec("species", cap), config.cache), "--table8")
            )
    for oracle in oracles.values():
        logger.info("%s (%s) on held-out renders", oracle.report, oracle.spec.capacity)
    return oracles, table8


def _score(oracle: ConceptBedJudge, cw: ConceptWorld, concept: Concept, images: np.ndarray, scored: Scored) -> None:
    """Add one concept's generated ``images`` (and its real images) to ``scored``; the attribute
    oracle is asked about the attributes the concept's species has (class level)."""
    attrs = None
    if oracle.spec.kind == "attributes":
        attrs = np.flatnonzero(cw.world.class_attributes[concept.label][list(oracle.attributes)])
    scored.add(oracle.scores(images), oracle.scores(concept.real), concept.label, attrs)


def _mode(oracle: ConceptBedJudge) -> str:
    return "vqa" if oracle.spec.kind == "attributes" else "classifier"


def _sensitivity(
    oracles: dict[str, ConceptBedJudge], cw: ConceptWorld, concepts: dict[str, list[Concept]], seed: int
) -> dict[str, list[float]]:
    """Fig. 5: per task, the CCD of its real images under each :data:`NOISE_LEVELS` noise."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[float]] = {"noise": list(NOISE_LEVELS)}
    for task, items in concepts.items():
        oracle = oracles[task]
        row = []
        for sigma in NOISE_LEVELS:
            scored = Scored(_mode(oracle))
            for c in items:
                noisy = np.clip(c.real + rng.normal(0.0, sigma, c.real.shape), 0, 255).astype(np.uint8)
                _score(oracle, cw, c, noisy, scored)
            row.append(scored.result()["ccd"])
        out[task] = row
    return out


def _truth(
    table8: dict[str, ConceptBedJudge], oracle: ConceptBedJudge, capacity: str, cw: ConceptWorld, concept: Concept
):
    """What simulated raters of ``concept``'s images follow: the probability of the concept by
    another capacity of the species oracle where Table 8 has one, else by the task's oracle
    (the attribute oracle: the mean probability of the species' class attributes)."""
    other = next((o for cap, o in table8.items() if cap != capacity), None)
    judge = other if oracle.spec.kind == "species" and other is not None else oracle

    def truth(images: np.ndarray) -> np.ndarray:
        probs = judge.scores(images)
        if judge.spec.kind == "attributes":
            attrs = np.flatnonzero(cw.world.class_attributes[concept.label][list(judge.attributes)])
            return probs[:, attrs].mean(1) if len(attrs) else np.full(len(images), np.nan)
        return probs[:, concept.label]

    return truth


def _folder_setup(
    config: ConceptBedConfig, learners: tuple[str, ...], tasks: list[str], source: ByoSource | None = None
) -> tuple[dict[str, ConceptBedJudge], dict[str, list[Concept]]]:
    """``--concept-folder``: every check first (:func:`.folder.check_concept_folder`, then the loaders'
    image checks, and ``source``'s), then each task's oracle trained on the folder until it meets its bar on the
    held-out real images (or refused), and the concepts with those as their real references."""
    from .folder import check_concept_folder, folder_concepts, folder_oracle, relabel

    check_concept_folder(
        config.concept_folder,
        m=config.m,
        real=config.real,
        tasks=config.tasks,
        learners=learners,
        image_size=config.image_size,
        model=config.model,
    )
    found = folder_concepts(config.concept_folder, config.m, config.image_size, tasks, config.real)
    if source is not None:
        known = {t: [c.name for c in items] for t, items in found.items()}
        chosen = {t: items[: config.concepts] for t, items in found.items()}
        check_source(source, chosen, known, config.images, config.model)
    oracles, concepts = {}, {}
    for task, items in found.items():
        oracle, held = folder_oracle(
            task, items, config.capacity, config.oracle_epochs, config.seed, config.concept_folder
        )
        oracles[task] = oracle
        concepts[task] = relabel(items, held)[: config.concepts]
    return oracles, concepts


def _short_tasks(asked: int, concepts: dict[str, list[Concept]]) -> dict[str, int]:
    """Tasks holding fewer than ``asked`` (``--concepts``) concepts -> how many they hold, each said in one line.

    Such a task scores every concept it holds rather than refusing the run: a run's tasks differ in
    size (the world's ``domain`` holds its four styles, a folder what it holds), and one small task
    should not stop the others; the report says which cells rest on fewer concepts.
    """
    short = {t: len(items) for t, items in concepts.items() if len(items) < asked}
    for task, n in short.items():
        logger.warning("--concepts %d: %s holds %d concept(s); its cells score those %d", asked, task, n, n)
    return short


def _intervals(
    scored: dict[tuple[str, str], Scored],
    scored8: dict[tuple[str, str], Scored],
    learners: tuple[str, ...],
    tasks: list[str],
    t7_task: str,
    seed: int,
) -> dict[str, Any]:
    """``[lo, hi]`` 95 % bootstrap intervals over concepts and images of Tables 1, 7 and 8 (:mod:`.intervals`)."""
    caps = list(dict.fromkeys(cap for cap, _ in scored8))
    return {
        "table1": {l: {t: scored[l, t].interval("ccd", seed=seed) for t in tasks} for l in learners},
        "table7": {l: {m: scored[l, t7_task].interval(m, seed=seed) for m in STATISTICS} for l in learners},
        "table8": {cap: {l: scored8[cap, l].interval("ccd", seed=seed) for l in learners} for cap in caps},
    }


def _threads() -> int:
    """The torch CPU threads this run computed with (its floating-point sums may depend on them)."""
    import torch

    return int(torch.get_num_threads())


def run_conceptbed(config: ConceptBedConfig) -> ConceptBedResult:
    """Run ConceptBed (module docstring); nothing is written but the learners' weights
    (under ``config.work``) and passing oracles (under ``config.cache``)."""
    from tqdm.auto import tqdm

    config = config.effective()
    learners = check_learners(config.learners or ())
    source = byo_source(config.generated, config.learned, config.name, learners)
    if not learners and source is None:
        raise UsageError(
            "no learner to score: name one, or bring a row with --generated / --learned", argument="--learners"
        )
    tasks = concept_tasks(config)
    table_tasks = [t for t in config.tasks if t != COMPOSITION]
    cw = ConceptWorld(m=config.m, real=config.real, seed=config.seed, classes=config.classes)
    if config.concept_folder:
        oracles, concepts = _folder_setup(config, learners, tasks, source)
        table8_oracles: dict[str, ConceptBedJudge] = {}
    else:
        concepts = {t: cw.concepts(t, config.concepts) for t in tasks}
        if source is not None:  # checked before any oracle trains
            known = {t: STYLES if t == "domain" else cw.held_out(t) for t in tasks}
            check_source(source, concepts, known, config.images, config.model)
        kinds, table8_oracles = _oracles(config)
        oracles = {t: kinds[TASK_JUDGE[t]] for t in tasks}
    short = _short_tasks(config.concepts, concepts)  # before any learner runs
    collector = RatingCollector()
    composition = (
        CompositionRun.setup(
            cw, concepts["object"], oracles["object"], config.images, config.seed, config.model, collector
        )
        if COMPOSITION in config.tasks
        else None
    )
    work = Path(config.work) if config.work else None
    settings = {
        "model": config.model,
        "steps": config.steps,
        "seed": config.seed,
        "device": config.device,
        "prior_cache": str(work / "priors") if work else None,
    }  # one set of prior images per run
    make = learner_factory(source, lambda name: make_learner(name, cw, concepts, settings), settings)
    learners = (*learners, source.name) if source is not None else learners
    scored = {(l, t): Scored(_mode(oracles[t])) for l in learners for t in tasks}
    scored8 = {(cap, l): Scored("classifier") for cap in table8_oracles for l in learners}
    generated: dict[tuple[str, str], list[np.ndarray]] = {}
    sheet: list[tuple[str, np.ndarray]] = []
    jobs = [(l, t, c) for l in learners for t in tasks for c in concepts[t]]
    for learner_name, task, concept in tqdm(jobs, desc="conceptbed", leave=False):
        learner = make(learner_name)
        folder = (work / learner_name.replace(" ", "_") / task / concept.name) if work else Path(".")
        learner.fit(concept, folder)
        images = learner.generate(concept.prompts, config.images, config.seed)
        _score(oracles[task], cw, concept, images, scored[learner_name, task])
        if table8_oracles and TASK_JUDGE[task] == "species":
            for cap, oracle in table8_oracles.items():
                _score(oracle, cw, concept, images, scored8[cap, learner_name])
        generated.setdefault((learner_name, task), []).append(images)
        if task in table_tasks:
            collector.add_concept(
                learner_name, task, concept, images, _truth(table8_oracles, oracles[task], config.capacity, cw, concept)
            )
        if composition is not None and task == "object" and (source is None or learner_name != source.name):
            composition.score(learner_name, learner, concept)
        if concept is concepts[task][0]:
            if learner_name == learners[0]:
                sheet.append((f"{task}: {concept.name} (train)", concept.train))
            sheet.append((f"{task}: {learner_name}", images))
    embed = clip_image_embedder(config.encoder)
    table1 = {l: {t: scored[l, t].result()["ccd"] for t in table_tasks} for l in learners}
    dino = {
        l: {t: pairwise_cosine(embed, generated[l, t], [c.real for c in concepts[t]]) for t in table_tasks}
        for l in learners
    }
    ceiling = {t: split_half_cosine(embed, [c.real for c in concepts[t]]) for t in table_tasks}
    t7_task = next(t for t in ("object", "fine_grained_object", "domain", "fine_grained_attribute") if t in tasks)
    results = {
        "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in manifest(config).items()}
        | {"threads": _threads()},
        "table1": table1,
        "table7_task": t7_task,
        "table7": {l: table7_row(scored[l, t7_task].result()) for l in learners},
        "table8": {cap: {l: scored8[cap, l].result()["ccd"] for l in learners} for cap in table8_oracles},
        "intervals": _intervals(scored, scored8, learners, table_tasks, t7_task, config.seed),
        "baselines": {"dino": dino, "dino_ceiling": ceiling, "encoder": config.encoder},
        "oracles": {
            t: {
                "kind": oracles[t].spec.kind,
                "capacity": oracles[t].spec.capacity,
                "epochs": oracles[t].spec.epochs,  # a folder's oracle: the schedule that met the bar
                "accuracy": oracles[t].accuracy,
            }
            for t in tasks
        },
        "table8_oracles": {cap: o.accuracy for cap, o in table8_oracles.items()},
        "concepts": {t: [c.name for c in concepts[t]] for t in tasks},
        "concepts_asked": config.concepts,
        "short_tasks": short,
        "sensitivity": _sensitivity(oracles, cw, {t: concepts[t] for t in table_tasks}, config.seed),
    }
    if composition is not None:
        comp = composition.results()
        results["oracles"]["vqa"] = comp.pop("vqa")
        results["intervals"]["table2"] = comp.pop("table2_intervals")
        results.update(comp)
        sheet += composition.sheet
    detail = collector.table(results, config.ratings, config.seed)
    results["table3"] = detail.pop("table3")
    results["table3_detail"] = detail
    return ConceptBedResult(config, results, sheet, collector, generated)
