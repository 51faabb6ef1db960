"""The demo's settings (:class:`DemoConfig`) and what each stage runs with (docs/guide/demo.md).

>>> DemoConfig(stages="world, bench").stage_names
('world', 'bench')
>>> DemoConfig(stages="world,nest").stage_names
Traceback (most recent call last):
...
concept_grounding.errors.UsageError: --stages: unknown stage(s) ['nest']; known: ['world', 'bench', 'candidates',
    'tdg', 'cci', 'human', 'conceptbed']
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

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
    "STAGE_NAMES",
    "DemoConfig",
    "world_config",
    "bench_config",
    "generate_config",
    "filter_config",
]

#: the demo's stages, in the order they run (:data:`~concept_grounding.demo_stages.STAGES` runs them)
STAGE_NAMES: tuple[str, ...] = ("world", "bench", "candidates", "tdg", "cci", "human", "conceptbed")

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


#: the ConceptBed learners of the default demo: one that trains only V*'s embedding, one that trains the
#: transformer (``--full``: all four)
DEMO_LEARNERS: tuple[str, ...] = ("Textual Inversion", "LoRA")
#: Table 8's judge capacities in the default demo (``--full``: all three; the large judge is the costliest)
DEMO_TABLE8: tuple[str, ...] = ("small", "medium")


def conceptbed_config(out: Path, config: DemoConfig) -> ConceptBedConfig:
    """The ConceptBed stage: ``conceptbed --quick`` with the Original row and the compositions
    (Tables 1, 2, 7, 8) and :data:`DEMO_LEARNERS` on :data:`DEMO_TABLE8` (``--full``: the four
    learners and three capacities); ``--quick``: the reference learners on a 12-class world with
    small oracles (seconds)."""
    from .conceptbed import ConceptBedConfig, task_species
    from .conceptbed.config import DEFAULT_LEARNERS
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
        learners=DEFAULT_LEARNERS,
        quick=True,
        seed=config.seed,
        cache=str(out / "oracles"),
        work=str(out / "learned"),
        tasks=("domain", "object", "fine_grained_object", "fine_grained_attribute", "composition"),
    )
    if config.full:
        return full
    return replace(full, learners=(*DEMO_LEARNERS, "Original"), table8=DEMO_TABLE8)


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
    stages: str = setting(",".join(STAGE_NAMES), f"comma-separated subset of: {', '.join(STAGE_NAMES)}")

    @property
    def stage_names(self) -> tuple[str, ...]:
        """The stages to run, in the order given; an unknown one is a :class:`UsageError` naming ``--stages``."""
        names = tuple(s.strip() for s in self.stages.split(",") if s.strip())
        unknown = sorted(set(names) - set(STAGE_NAMES))
        if unknown:
            raise UsageError(f"unknown stage(s) {unknown}; known: {list(STAGE_NAMES)}", argument="--stages")
        return names
