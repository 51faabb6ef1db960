"""The demo's stages: each runs one of the package's jobs into its folder and returns its index
line (docs/guide/demo.md).

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
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from .bench.artifacts import WORLD_CLIP_MODEL, BenchArtifacts
from .demo_config import (
    QUICK_CLASSES,
    TDG_ORACLE,
    DemoConfig,
    bench_config,
    conceptbed_config,
    filter_config,
    generate_config,
    world_config,
)

__all__ = ["STAGES"]

logger = logging.getLogger(__name__)

Stage = Callable[[Path, DemoConfig], str]


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
    from .curation.curate_inputs import CurateConfig
    from .curation.curate_job import run_curate
    from .curation.sampling import study_items
    from .curation.simulate import SimulatedAnnotator, simulate_sub
    from .curation.study import sub_records
    from .curation.study_store import StudyStore
    from .evaluation import evaluate_sub
    from .evaluation.report import percent
    from .loaders import load_sub

    truth, kept = _human_candidates(out, config.seed)
    store = StudyStore(out / "annotations.db", k=len(HUMAN_ANNOTATORS))
    for study, records in sub_records(study_items(kept, seed=config.seed)).items():
        store.add_records(study, records)
    answers = simulate_sub(
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


def _stage_conceptbed(out: Path, config: DemoConfig) -> str:
    from .conceptbed import run_conceptbed

    result = run_conceptbed(conceptbed_config(out, config))
    result.save(out)
    learners = ", ".join(result.results["table1"])
    return (
        f"[ConceptBed](conceptbed/report.md): concept learners ({learners}) on held-out species, their "
        "attributes, four styles and compositions; Tables 1, 2, 7, 8 with every oracle's validation"
    )


#: each stage by its name, in :data:`~.demo_config.STAGE_NAMES`' order (a test holds the two equal)
STAGES: dict[str, Stage] = {
    "world": _stage_world,
    "bench": _stage_bench,
    "candidates": _stage_candidates,
    "tdg": _stage_tdg,
    "cci": _stage_cci,
    "human": _stage_human,
    "conceptbed": _stage_conceptbed,
}
