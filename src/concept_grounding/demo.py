"""The demo job: the main job on the bird world, end to end (``concept-grounding demo``, ``make demo``).

:func:`run_demo` (``DemoConfig -> DemoResult``) runs each stage into its own sub-folder of
``config.out`` as it goes (a stage that fails stops the demo with its error; stages already
written stay on disk, and ``resume`` skips them), then ``DemoResult.save(out)`` writes the
index ``README.md`` that links them and ``timings.json``.

Every stage calls the package's jobs directly
(:func:`~concept_grounding.world.export.run_world_export`,
:func:`~concept_grounding.bench.run_bench`,
:func:`~concept_grounding.curation.candidates.run_candidates`,
:func:`~concept_grounding.tdg.generate_job.run_generate`,
:func:`~concept_grounding.tdg.filter_job.run_filter`,
:func:`~concept_grounding.cci.explain_job.run_explain`,
:func:`~concept_grounding.cci.covar_job.run_covar`, and for the human stage the simulated
annotators, :func:`~concept_grounding.curation.curate_job.run_curate` and
:func:`~concept_grounding.evaluation.evaluate_sub`) and reads their result objects and the
bench's :class:`~concept_grounding.bench.artifacts.BenchArtifacts`; no stage goes through the
command line.

>>> DemoConfig(stages="world, bench").stage_names
('world', 'bench')
>>> DemoConfig(stages="world,nest").stage_names
Traceback (most recent call last):
...
concept_grounding.errors.UsageError: --stages: unknown stage(s) ['nest']; known: ['world', 'bench', 'candidates',
    'tdg', 'cci', 'human', 'conceptbed']
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .bench.artifacts import WORLD_CLIP_MODEL, BenchArtifacts
from .cpu import choose_threads, limited_threads, set_threads
from .errors import UsageError
from .settings import setting
from .validators import int_at_least, positive_int

if TYPE_CHECKING:  # torch and the renderer load when a stage runs, not when the CLI parses
    from .bench.config import BenchConfig
    from .conceptbed import ConceptBedConfig
    from .tdg.filter_job import FilterConfig
    from .tdg.generate_config import GenerateConfig
    from .world.export import WorldExportConfig

__all__ = [
    "STAGES",
    "DemoConfig",
    "DemoResult",
    "run_demo",
    "world_config",
    "bench_config",
    "generate_config",
    "filter_config",
]

logger = logging.getLogger(__name__)

Stage = Callable[[Path, "DemoConfig"], str]

#: the world classes of ``--quick`` runs (tests, smoke runs)
QUICK_CLASSES: tuple[str, ...] = ("017.Cardinal", "073.Blue_Jay", "019.Gray_Catbird", "129.Song_Sparrow")
#: the TDG stage's pairings: these classes x these target attributes (the ones they lack); the
#: first is the Space's opening pairing, whose guide the shipped judge finds S+ in
TDG_CLASSES: tuple[str, ...] = ("035.Purple_Finch", "017.Cardinal")
TDG_ATTRIBUTES: tuple[str, ...] = ("has_breast_color::blue", "has_crown_color::black", "has_bill_shape::needle")
#: the bench model that judges the TDG images when the bench stage ran (the world attribute judge)
TDG_ORACLE = "CBM (ind., per-img.)"


def world_config(config: DemoConfig) -> WorldExportConfig:
    """The world stage's export: ``--quick``: 48 px, one bird per class and split, 4 classes."""
    from .world.config import WorldConfig
    from .world.export import WorldExportConfig

    if config.quick:
        return WorldExportConfig(
            WorldConfig(image_size=48, class_names=QUICK_CLASSES, seed=config.seed),
            train_per_class=1,
            test_per_class=1,
            formats="all",
        )
    return WorldExportConfig(
        WorldConfig(image_size=config.size, seed=config.seed),
        train_per_class=config.train_per_class,
        test_per_class=config.test_per_class,
        formats="all",
    )


#: Table 1 rows the default demo leaves out: on the world every annotation is certain, so these
#: soft-label models are the per-image ones number for number (docs/sub_curation.md, Tables)
REPEATED_MODELS: tuple[str, ...] = ("CBM (ind., soft per-img.)", "CBM (joint, soft per-img.)")


def bench_config(config: DemoConfig) -> BenchConfig:
    """The bench stage's config: the defaults less :data:`REPEATED_MODELS` (``--full``: the defaults),
    or with ``--quick`` a 32 px, one-epoch run of three Table 1 models on :data:`QUICK_CLASSES`."""
    from .bench.config import BENCH_WORLD, MODEL_VARIANTS, BenchConfig
    from .world.config import WorldConfig

    if config.quick:
        return BenchConfig(
            WorldConfig(image_size=32, class_names=QUICK_CLASSES, seed=config.seed),
            train_per_class=2,
            test_per_class=1,
            epochs=1,
            clip_epochs=1,
            models=("CBM (ind.)", "CBM (joint)", "CBM (ind., per-img.)"),
        )
    models = tuple(MODEL_VARIANTS) if config.full else tuple(m for m in MODEL_VARIANTS if m not in REPEATED_MODELS)
    return BenchConfig(replace(BENCH_WORLD, seed=config.seed), models=models)


def _stage_world(out: Path, config: DemoConfig) -> str:
    from .world.export import run_world_export

    export = run_world_export(replace(world_config(config), out=out))
    export.save(out)
    summary = export.summary()
    return (
        f"[bird world](world/summary.md): {summary['train_images']} train / {summary['test_images']} test"
        f" images, {summary['sub_images']} SUB counterfactuals, exported as datasets, CUB_200_2011 and SUB folders"
    )


def _stage_bench(out: Path, config: DemoConfig) -> str:
    from .bench import run_bench

    results = run_bench(bench_config(config), out)
    trained = [r for r in results["table1"] if not r.get("reference")]
    below = sum(r["s_plus"] < 0.5 for r in trained)
    return (
        f"[SUB benchmark](bench/report.md): Tables 1-2, CGIM, concept existence and location;"
        f" {below} of {len(trained)} binary concept models detect substituted attributes below chance"
    )


def _stage_candidates(out: Path, config: DemoConfig) -> str:
    """SUB's candidate selection on the world (Sec. 4.2), the ``candidates`` job's three steps:
    the shipped world judge names 20 renders per class (``--quick``: 2 of :data:`QUICK_CLASSES`)
    and answers every group's question on 10 renders per class (``--quick``: 1), then the plan."""
    from .curation.candidates import CandidatesConfig, run_candidates

    classes = QUICK_CLASSES if config.quick else None
    step = CandidatesConfig(classes=classes, world_seed=config.seed, progress=False)
    chosen = run_candidates(replace(step, per_class=2 if config.quick else 20))
    chosen.save(out)
    chosen, names = chosen.classes, chosen.classes.class_names
    attributes = run_candidates(
        replace(step, step="attributes", per_class=1 if config.quick else 10, min_accuracy=None)
    )
    attributes.save(out)
    attributes = attributes.attributes.selection
    if not chosen.kept or not attributes.kept:
        return (
            f"[candidates](candidates/classes.md): {len(chosen.kept)} of {len(names)} classes and "
            f"{len(attributes.kept)} of {len(attributes.attributes)} attributes kept; no plan"
        )
    plan = run_candidates(
        replace(step, step="plan", classes_file=out / "classes.json", attributes_file=out / "attributes.json")
    )
    plan.save(out)
    pairings = plan.plan.pairings
    return (
        f"[candidates](candidates/plan.md) (SUB Sec. 4.2, the world judge): {len(chosen.kept)} of {len(names)}"
        f" classes, {len(attributes.kept)} of {len(attributes.attributes)} attributes"
        f" ([table](candidates/attributes.md)), {len(pairings)} candidate pairings"
    )


def _read_records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metadata.jsonl").read_text().splitlines() if line.strip()]


def _tdg_sheet(images: Path, prompting: Path, path: Path) -> list[dict]:
    """A sheet with one row per generated pairing image: prompting-only c_R | TDG reference |
    TDG guide, each with the shipped judge's verdict under it (S+ found? species kept?; for
    the guide, S+ shown?); pairings of a group the judge is not validated on say so. Returns
    the TDG records, each with its verdicts added."""
    from PIL import Image

    from .curation.generated_sheet import judge_captions
    from .judge import create_judge, judge_validated_groups
    from .plotting import verdict_sheet
    from .vocabulary import attribute_phrase, class_display_name, load_vocabulary

    vocab, judge, validated = load_vocabulary(), create_judge("world-judge"), judge_validated_groups()
    records = _read_records(images)
    if not records:  # nothing generated: no sheet
        return records
    baseline = {(r["reference_class"], r["target_attribute"], r["image_index"]): r for r in _read_records(prompting)}
    columns = {
        "prompting only": [
            Image.open(
                prompting / baseline[(r["reference_class"], r["target_attribute"], r["image_index"])]["file_name"]
            ).convert("RGB")
            for r in records
        ],
        "TDG reference": [Image.open(images / r["file_name"]).convert("RGB") for r in records],
        "TDG guide": [Image.open(images / r["guide_file_name"]).convert("RGB") for r in records],
    }
    captions = {}
    for name, ims in columns.items():
        captions[name], v = judge_captions(judge, ims, records, guide=name == "TDG guide")
        if name == "TDG reference":
            for k, r in enumerate(records):
                r.update(s_plus_found=bool(v["s_plus_found"][k]), species_kept=bool(v["species_kept"][k]))
    verdict_sheet(
        [[columns[name][i] for name in columns] for i in range(len(records))],
        [[captions[name][i] for name in columns] for i in range(len(records))],
        [
            f"{class_display_name(r['reference_class'])}\n+ {attribute_phrase(r['target_attribute'])}"
            + (
                ""
                if validated is None or vocab.group_of(r["target_attribute"]) in validated
                else "\n(judge not validated)"
            )
            for r in records
        ],
        list(columns),
        path,
        title="Shipped judge's verdicts (green: S+ found and species kept)",
    )
    return records


def generate_config(images: Path, config: DemoConfig) -> GenerateConfig:
    """The TDG stage's generation: the shipped world Flux at 32 px on :data:`TDG_CLASSES` x
    :data:`TDG_ATTRIBUTES`, guides saved; ``--quick``: 1 image per pairing and 4 steps, else 4 and 20."""
    from .tdg.generate_config import GenerateConfig
    from .worldflux.source import WorldFlux, world_pairings

    per_pairing, steps = (1, 4) if config.quick else (4, 20)
    return GenerateConfig(
        out=images,
        model=WorldFlux(),
        pairings=world_pairings(),
        classes=TDG_CLASSES,
        attributes=TDG_ATTRIBUTES,
        images_per_pairing=per_pairing,
        seed=config.seed,
        num_inference_steps=steps,
        size=32,
        save_guides=True,
    )


def filter_config(images: Path, out: Path, oracle: Path) -> FilterConfig:
    """The TDG stage's VQA filter: judged by the bench's :data:`TDG_ORACLE` (a concept model as
    an attribute judge) when ``oracle`` is its saved folder, else by a random tiny CLIP."""
    from .tdg.filter_job import FilterConfig

    if not oracle.is_dir():
        return FilterConfig(input=images, out=out, scorer="tiny-clip")
    from .judge import attribute_judge

    return FilterConfig(input=images, out=out, scorer="oracle", oracle=str(oracle), judge_loader=attribute_judge)


def _stage_tdg(out: Path, config: DemoConfig) -> str:
    from .tdg.filter_job import run_filter
    from .tdg.generate_job import run_generate
    from .worldflux.loader import WORLD_TDG_EXPECTATION

    images, prompting = out / "images", out / "prompting"
    generated = run_generate(generate_config(images, config))
    run_generate(replace(generate_config(prompting, config), method="prompting", save_guides=False))
    logger.info(
        "wrote %d new images (%d planned) and their prompting-only baselines", generated.written, generated.planned
    )
    oracle = BenchArtifacts(out.parent / "bench").model_dir(TDG_ORACLE)
    filtered = run_filter(filter_config(images, out / "filter", oracle))
    logger.info("kept %d of %d images", len(filtered.kept), filtered.generated)
    judged = _tdg_sheet(images, prompting, out / "pairs.png")
    found = sum(r["s_plus_found"] and r["species_kept"] for r in judged)
    judge = "the world attribute oracle (the bench's per-image CBM)" if oracle.is_dir() else "a random tiny CLIP"
    return (
        f"[Tied Diffusion](tdg/filter/filter_report.md): {len(judged)} tied pairs beside prompting-only images"
        f" ([prompting | TDG reference | guide, with the shipped judge's verdicts](tdg/pairs.png); S+ found and"
        f" species kept in {found} of {len(judged)} TDG references) from the world-trained Flux shipped with the"
        " package (32 px; its measured quality is in concept_grounding/assets/world_flux/README.md) and the VQA"
        f" filter report, filtered by {judge}. {WORLD_TDG_EXPECTATION}"
    )


def _stage_cci(out: Path, config: DemoConfig) -> str:
    """CCI maps and COVAR on the CLIP the bench stage trained (a random tiny CLIP without it)."""
    from .cci.covar_config import CovarConfig
    from .cci.covar_job import run_covar, write_covar_report
    from .cci.explain_job import ExplainConfig, run_explain, write_explain_report

    bench = BenchArtifacts(out.parent / "bench")
    clip = bench.model_dir(WORLD_CLIP_MODEL)
    model = str(clip) if clip.is_dir() else None
    size = bench.image_size() if model else 64  # the world CLIP was trained at the bench's image size
    n, objects, backgrounds = (2, 2, 2) if config.quick else (6, 8, 5)
    write_explain_report(
        run_explain(ExplainConfig(num=n, size=size, model=model, seed=config.seed, baselines=True)), out / "explain"
    )
    write_covar_report(
        run_covar(CovarConfig(objects=objects, backgrounds=backgrounds, size=size, model=model, seed=config.seed)),
        out / "covar",
    )
    which = "the world CLIP trained by the bench stage" if model else "a random tiny CLIP (no bench stage ran)"
    return (
        f"[CCI explanations](cci/explain/report.md) and [COVAR diagnosis](cci/covar/report.md) on {which}:"
        " cluster maps beside Grad-CAM and rollout, accuracy and BG-Er / FG-Er per transform"
    )


#: the human stage's world candidates (before :func:`~concept_grounding.curation.simulate.broken_task`
#: puts in one failed S+, one deviating pairing and one S+ = S- pairing per class)
HUMAN_CLASSES, HUMAN_ATTRIBUTES, HUMAN_PER_PAIRING = 2, 3, 8
#: the VQA filter (the shipped world judge as its attribute judge) keeps this share per pairing
HUMAN_KEEP_FRACTION = 0.5
#: the simulated annotators' accuracies (each answers every image: k = 3)
HUMAN_ANNOTATORS: tuple[float, ...] = (1.0, 0.97, 0.95)


def _human_candidates(out: Path, seed: int) -> tuple[dict, list[dict]]:
    """The human stage's "generate" and "filter": world candidates with known failures in
    ``out/generate`` (with ``truth.jsonl``), filtered into ``out/filter`` by the shipped world
    judge. Returns (candidate id -> its truth, the kept rows)."""
    from .curation.simulate import (
        WorldTask,
        broken_task,
        default_attributes,
        world_candidates,
        write_candidates,
    )
    from .tdg.filter_job import FilterConfig, run_filter
    from .worldflux.loader import trained_world_config

    task = WorldTask(
        classes=HUMAN_CLASSES,
        images_per_pairing=HUMAN_PER_PAIRING,
        world_config=replace(trained_world_config(), seed=seed),
    )
    world = task.world()
    task = broken_task(replace(task, attributes=default_attributes(world, HUMAN_ATTRIBUTES)), world)
    cands = world_candidates(task, world)
    write_candidates(cands, out / "generate", world)
    from .judge import attribute_judge

    filtered = run_filter(
        FilterConfig(
            input=out / "generate",
            out=out / "filter",
            scorer="world-judge",
            judge_loader=attribute_judge,
            keep_fraction=HUMAN_KEEP_FRACTION,
        )
    )
    return {c.id: c for c in cands}, filtered.kept


def _human_sub_model(bench: Path):
    """The model the human stage scores its curated dataset with, and how to name it."""
    from .evaluation import load_model

    oracle = BenchArtifacts(bench).model_dir(TDG_ORACLE)
    if oracle.is_dir():
        return load_model(str(oracle)), f"the bench's {TDG_ORACLE}"
    from .models.clip.tiny import tiny_clip_handle

    return tiny_clip_handle(), "a random tiny CLIP (no bench stage ran)"


def _stage_human(out: Path, config: DemoConfig) -> str:
    """SUB's human half on the world, small (docs/human_validation.md): world candidates with
    known failures drawn in the shipped world Flux's world ("generate") -> the VQA filter with
    the shipped world judge as its oracle (half of each pairing kept) -> three simulated
    annotators through the annotation store -> ``curate`` -> the curated dataset read back by
    ``load_sub`` and scored by ``evaluate_sub`` (the bench's per-image CBM; a random tiny CLIP
    without the bench stage). The world Flux's TDG images are not used: TDG succeeds on about
    1 % of them (:data:`~concept_grounding.worldflux.loader.WORLD_TDG_EXPECTATION`), so a
    truthful curation would keep none."""
    from .curation.annotations import AnnotationStore
    from .curation.curate_inputs import CurateConfig
    from .curation.curate_job import run_curate
    from .curation.sampling import study_items
    from .curation.simulate import SimulatedAnnotator, run_annotators
    from .evaluation import evaluate_sub
    from .evaluation.report import percent
    from .loaders import load_sub

    truth, kept = _human_candidates(out, config.seed)
    store = AnnotationStore(out / "annotations.db", k=len(HUMAN_ANNOTATORS))
    store.add_images(study_items(kept, seed=config.seed))
    answers = run_annotators(
        store,
        [SimulatedAnnotator(f"sim{i}-{a:g}", a, seed=config.seed + i) for i, a in enumerate(HUMAN_ANNOTATORS)],
        truth,
    )
    res = run_curate(
        CurateConfig(
            out / "filter", out / "annotations.db", truth=out / "generate" / "truth.jsonl", world_seed=config.seed
        )
    )
    res.save(out / "curate")
    line = (
        f"[human validation](human/curate/curation.md) (SUB Sec. 4.3, simulated annotators of accuracy "
        f"{', '.join(f'{a:g}' for a in HUMAN_ANNOTATORS)}): {len(truth)} world candidates with known failures, "
        f"{len(kept)} kept by the VQA filter, {answers} answers, {len(res.kept)} images curated"
    )
    if res.dataset is None:
        return line + "; nothing kept, so no dataset to score"
    sub = load_sub(out / "curate" / "dataset")
    model, which = _human_sub_model(out.parent / "bench")
    scored = evaluate_sub(model, sub, progress=False)
    scored.save(out / "sub")
    human = (
        ""
        if res.human is None
        # a score with no image to count is "–", as in the reports
        else (
            f"; Human rows s+/s- binary "
            f"{percent(res.human['binary']['s_plus'])}/{percent(res.human['binary']['s_minus'])},"
            f" group {percent(res.human['group']['s_plus'])}/{percent(res.human['group']['s_minus'])}"
        )
    )
    return (
        line + f" ([dataset](human/curate/dataset), {sub.num_rows} images){human}; "
        f"[SUB accuracy](human/sub/report.md) of {which}: s+ {percent(scored.s_plus)}, s- {percent(scored.s_minus)}"
    )


#: the ConceptBed learners of the default demo: one that trains only V*'s embedding, one that trains the
#: transformer (``--full``: all four)
DEMO_LEARNERS: tuple[str, ...] = ("Textual Inversion", "LoRA")
#: Table 8's judge capacities in the default demo (``--full``: all three; the large judge is the costliest)
DEMO_TABLE8: tuple[str, ...] = ("small", "medium")


def dropped(config: DemoConfig) -> str | None:
    """What the default demo leaves out to fit 12 minutes on two cores, and the command that runs it;
    ``None`` for ``--full`` and ``--quick`` runs and when no stage it shortens runs."""
    if config.full or config.quick:
        return None
    left_out = []
    if "bench" in config.stage_names:
        left_out.append(
            f"Table 1's {' and '.join(REPEATED_MODELS)} rows (on the world they are the per-image"
            " rows number for number)"
        )
    if "conceptbed" in config.stage_names:
        left_out.append(
            "ConceptBed's DreamBooth and Custom Diffusion learners and Table 8's large judge (it keeps"
            f" {' and '.join(DEMO_LEARNERS)}, and the {' and '.join(DEMO_TABLE8)} judges)"
        )
    if not left_out:
        return None
    return (
        f"To fit 12 minutes on two cores this run leaves out {'; and '.join(left_out)}."
        " `concept-grounding demo --full` runs everything (docs/guide/demo.md)."
    )


def conceptbed_config(out: Path, config: DemoConfig) -> ConceptBedConfig:
    """The ConceptBed stage: ``conceptbed --quick`` with the Original row and the compositions
    (Tables 1, 2, 7, 8) and :data:`DEMO_LEARNERS` on :data:`DEMO_TABLE8` (``--full``: the four
    learners and three capacities); ``--quick``: the reference learners on a 12-class world with
    small oracles (seconds)."""
    from .conceptbed import ConceptBedConfig, task_species
    from .vocabulary import load_vocabulary

    if config.quick:
        vocab = load_vocabulary()
        classes = task_species(vocab, "object")[:6] + task_species(vocab, "fine_grained_object")[:6]
        return ConceptBedConfig(
            learners=("Original", "another species", "exact"),
            concepts=2,
            m=4,
            real=8,
            images=8,
            oracle_per_class=30,
            oracle_epochs=8,
            capacity="small",
            table8=("small",),
            classes=classes,
            seed=config.seed,
            cache=str(out / "oracles"),
            tasks=("domain", "object", "fine_grained_object", "composition"),
        )
    full = ConceptBedConfig(
        quick=True,
        seed=config.seed,
        cache=str(out / "oracles"),
        work=str(out / "learned"),
        tasks=("domain", "object", "fine_grained_object", "fine_grained_attribute", "composition"),
    )
    if config.full:
        return full
    return replace(full, learners=(*DEMO_LEARNERS, "Original"), table8=DEMO_TABLE8)


def _stage_conceptbed(out: Path, config: DemoConfig) -> str:
    from .conceptbed import run_conceptbed

    result = run_conceptbed(conceptbed_config(out, config))
    result.save(out)
    learners = ", ".join(result.results["table1"])
    return (
        f"[ConceptBed](conceptbed/report.md): concept learners ({learners}) on held-out species, their "
        "attributes, four styles and compositions; Tables 1, 2, 7, 8 with every oracle's validation"
    )


STAGES: dict[str, Stage] = {
    "world": _stage_world,
    "bench": _stage_bench,
    "candidates": _stage_candidates,
    "tdg": _stage_tdg,
    "cci": _stage_cci,
    "human": _stage_human,
    "conceptbed": _stage_conceptbed,
}


@dataclass(frozen=True)
class DemoConfig:
    """The demo's settings (``out``: the report folder, written as the stages go)."""

    out: Path = Path("reports/demo")
    size: int = setting(128, "image size of the bird world (px)", parse=int_at_least(32))
    train_per_class: int = setting(12, "world training images per class", parse=positive_int)
    test_per_class: int = setting(6, "world test images per class", parse=positive_int)
    seed: int = setting(0, "seed of every stage", parse=int)
    quick: bool = setting(False, "tiny settings everywhere (tests, smoke runs)", action="store_true")
    full: bool = setting(
        False,
        "every Table 1 model, ConceptBed learner and judge capacity (the default leaves out"
        " two repeated Table 1 rows, two learners and the large judge to fit 12 minutes on two"
        " cores)",
        action="store_true",
    )
    resume: bool = setting(False, "skip stages that finished in an earlier run", action="store_true")
    stages: str = setting(",".join(STAGES), f"comma-separated subset of: {', '.join(STAGES)}")

    @property
    def stage_names(self) -> tuple[str, ...]:
        """The stages to run, in the order given; an unknown one is a :class:`UsageError` naming ``--stages``."""
        names = tuple(s.strip() for s in self.stages.split(",") if s.strip())
        unknown = sorted(set(names) - set(STAGES))
        if unknown:
            raise UsageError(f"unknown stage(s) {unknown}; known: {list(STAGES)}", argument="--stages")
        return names


@dataclass
class DemoResult:
    """What :func:`run_demo` ran: one index line per stage (Markdown) and its seconds."""

    config: DemoConfig
    lines: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def save(self, out: str | Path) -> Path:
        """``timings.json`` and the index ``README.md`` under ``out``; returns the index's path."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "timings.json").write_text(json.dumps(self.timings, indent=2))
        note = dropped(self.config)
        (out / "README.md").write_text(
            "# concept-grounding demo report\n\n"
            + "\n".join(self.lines)
            + ("" if note is None else f"\n\n{note}")
            + "\n\nStage timings (s): "
            + ", ".join(f"{k} {v}" for k, v in self.timings.items())
            + "\n"
        )
        return out / "README.md"


#: stages that read no other stage's output and train on one thread: with two free cores they run in a
#: second process beside the others
BESIDE: tuple[str, ...] = ("conceptbed",)


def _run_stage(name: str, out: Path, config: DemoConfig, threads: int | None = None) -> tuple[str, float]:
    """Run stage ``name`` into ``out/name`` (at ``threads`` CPU threads if given) and mark it done
    (``.done``: its index line and seconds); returns both."""
    if threads is not None:
        set_threads(threads)
    logger.info("== %s ==", name)
    start = time.perf_counter()
    line = STAGES[name](out / name, config)
    seconds = round(time.perf_counter() - start, 2)
    (out / name / ".done").write_text(json.dumps([line, seconds, config.full]))
    logger.info("%s done in %.1f s", name, seconds)
    return line, seconds


def finished_stage(folder: Path, full: bool) -> tuple[str, float] | None:
    """The index line and seconds of the stage run in ``folder`` if it finished at the same scope
    (``--full`` or not), else ``None``: a default run's shortened stage is not a ``--full`` run's.
    A ``.done`` of two entries predates the default run's shortening, so it was a full run.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = (Path(tmp) / ".done").write_text('["bench: ok", 1.5, false]')
    ...     finished_stage(Path(tmp), full=False), finished_stage(Path(tmp), full=True)
    (('bench: ok', 1.5), None)
    """
    marker = folder / ".done"
    if not marker.is_file():
        return None
    line, seconds, *scope = json.loads(marker.read_text())
    ran_full = scope[0] if scope else True
    return (line, seconds) if ran_full == full else None


def _beside(todo: list[str]) -> list[str]:
    """The stages of ``todo`` to run in a second process: :data:`BESIDE`'s, when other stages run too and
    this process may use two threads or more (:func:`~concept_grounding.cpu.choose_threads`)."""
    threads = choose_threads().threads
    beside = [name for name in todo if name in BESIDE]
    return beside if threads is not None and threads >= 2 and len(beside) < len(todo) else []


def run_demo(config: DemoConfig) -> DemoResult:
    """Run the configured stages into ``config.out/<stage>`` (each marks itself done with
    ``.done``: its index line and seconds, which ``resume`` reads back). With two free cores the
    :data:`BESIDE` stages run in a second process, one thread each."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    stages = config.stage_names
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    result = DemoResult(config)
    done: dict[str, tuple[str, float]] = {}
    for name in stages:
        finished = finished_stage(out / name, config.full) if config.resume else None
        if finished is not None:
            logger.info("== %s == (done in an earlier run, skipped)", name)
            done[name] = finished
    todo = [name for name in stages if name not in done]
    beside = _beside(todo)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) if beside else nullcontext() as pool:
        futures = {name: pool.submit(_run_stage, name, out, config, 1) for name in beside}
        with limited_threads(1) if beside else nullcontext():
            for name in todo:
                if name not in futures:
                    done[name] = _run_stage(name, out, config)
        done.update({name: future.result() for name, future in futures.items()})
    for name in stages:
        line, result.timings[name] = done[name]
        result.lines.append(f"- {line}")
    return result
