"""Plan and build every Hub repo of the project into ``--out``, offline.

:func:`plan_repos` decides which repos there are (and checks every name) before any
work; :func:`build_repos` writes them, one folder each, exactly as they are uploaded.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from .. import __version__
from .code_repos import build_block_repo, build_metric_space, build_pipeline_repo, build_space
from .layout import HubRepo, check_namespace, prepare_out, write_marker
from .model_repos import BenchModel, build_bench_model, build_world_flux, check_bench, find_bench_models
from .sources import METRIC_NAMES, HubSources, find_sources
from .wheel import PackageWheel, package_wheel
from .world_data import WorldSpec, build_sub_dataset, build_world, build_world_dataset

__all__ = ["PublishConfig", "plan_repos", "build_repos", "publish_command"]

logger = logging.getLogger(__name__)

WORLD_DATASET = "bird-world"
SUB_DATASET = "bird-world-sub"
PIPELINE = "tied_diffusion"
#: the FLUX.2 TDG custom pipelines and the Modular Diffusers block, folders beside ``pipelines/tied_diffusion``
FLUX2_PIPELINES = ("tied_flux2", "tied_flux2_klein")
BLOCK = "tied_diffusion_block"
SPACE = "concept-grounding"
WORLD_FLUX = "world-flux"


@dataclass(frozen=True)
class PublishConfig:
    """What one ``concept-grounding publish`` builds.

    Attributes:
        namespace: Hub user or organisation that will own the repos.
        out: folder that receives one sub-folder per repo.
        world: the bird world rendered into the two dataset repos.
        bench: a ``concept-grounding bench`` run folder whose models are published, or ``None``.
        version: the package version the code repos pin.
        wheel: the package wheel the Spaces carry (``None``: built from the checkout).
    """

    namespace: str
    out: Path
    world: WorldSpec = field(default_factory=WorldSpec)
    bench: Path | None = None
    version: str = __version__
    wheel: Path | None = None

    @classmethod
    def from_flags(
        cls,
        namespace: str,
        out: Path,
        *,
        size: int,
        train_per_class: int,
        test_per_class: int,
        per_pairing: int,
        seed: int,
        deviation_rate: float,
        classes: Sequence[str] | None,
        bench: Path | None = None,
        wheel: Path | None = None,
    ) -> PublishConfig:
        """The config of the ``concept-grounding publish`` flags, each world flag checked first
        (a one-line ``ValueError`` naming it, before the :class:`~concept_grounding.world.WorldConfig`
        is built).

        >>> PublishConfig.from_flags("me", Path("hub"), size=8, train_per_class=1, test_per_class=1, per_pairing=1,
        ...                          seed=0, deviation_rate=0.1, classes=None)
        Traceback (most recent call last):
        ...
        ValueError: --size: must be an integer >= 32, got 8
        """
        from ..world.config import WorldConfig

        _check_world_flags(size, train_per_class, test_per_class, per_pairing, deviation_rate, classes)
        world = WorldConfig(
            image_size=size, class_names=tuple(classes) if classes else None, deviation_rate=deviation_rate, seed=seed
        )
        return cls(
            namespace,
            out,
            WorldSpec(world, train_per_class=train_per_class, test_per_class=test_per_class, per_pairing=per_pairing),
            bench=bench,
            wheel=wheel,
        )


def publish_command(config: PublishConfig) -> str:
    """The command that rebuilds ``config`` (recorded in the dataset and model cards).

    >>> from concept_grounding.world import WorldConfig
    >>> publish_command(PublishConfig("me", Path("hub"), WorldSpec(WorldConfig(image_size=64))))
    'concept-grounding publish --namespace me --out hub --size 64 --train-per-class 10 --test-per-class 5
     --per-pairing 1 --seed 0 --deviation-rate 0.1'
    """
    spec, w = config.world, config.world.world
    parts = [
        "concept-grounding",
        "publish",
        "--namespace",
        config.namespace,
        "--out",
        str(config.out),
        "--size",
        str(w.image_size),
        "--train-per-class",
        str(spec.train_per_class),
        "--test-per-class",
        str(spec.test_per_class),
        "--per-pairing",
        str(spec.per_pairing),
        "--seed",
        str(w.seed),
        "--deviation-rate",
        str(w.deviation_rate),
    ]
    if w.class_names:
        parts += ["--classes", *w.class_names]
    if config.bench is not None:
        parts += ["--bench", str(config.bench)]
    if config.wheel is not None:
        parts += ["--wheel", str(config.wheel)]
    return shlex.join(parts)


@dataclass(frozen=True)
class PlannedRepo:
    """A repo and the function that writes its folder."""

    repo: HubRepo
    write: Callable[[Path], None]


def _check_world_flags(
    size: int,
    train_per_class: int,
    test_per_class: int,
    per_pairing: int,
    deviation_rate: float,
    classes: Sequence[str] | None,
) -> None:
    """Raise a one-line ``ValueError`` naming the first bad world flag."""
    from ..vocabulary import load_vocabulary

    for name, value in (
        ("--size", size),
        ("--train-per-class", train_per_class),
        ("--test-per-class", test_per_class),
        ("--per-pairing", per_pairing),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < (32 if name == "--size" else 1):
            raise ValueError(f"{name}: must be an integer >= {32 if name == '--size' else 1}, got {value!r}")
    if not 0.0 <= deviation_rate <= 1.0:
        raise ValueError(f"--deviation-rate: must be in [0, 1], got {deviation_rate!r}")
    if classes:
        known = set(load_vocabulary().classes)
        unknown = [c for c in classes if c not in known]
        if unknown:
            raise ValueError(f"--classes: unknown CUB class folder name(s) {unknown} (e.g. '017.Cardinal')")


def _check_world(spec: WorldSpec) -> None:
    w = spec.world
    _check_world_flags(
        w.image_size, spec.train_per_class, spec.test_per_class, spec.per_pairing, w.deviation_rate, w.class_names
    )


def plan_repos(config: PublishConfig, sources: HubSources | None = None) -> list[PlannedRepo]:
    """Every repo ``config`` publishes, validated (names, inputs) before anything is written.

    Raises:
        ValueError: an invalid namespace or repo name, world setting, ``--bench`` folder or ``--wheel``.
    """
    _check_world(config.world)
    if config.bench is not None:
        check_bench(config.bench)
    sources = sources or find_sources()
    ns, version, command = config.namespace, config.version, publish_command(config)
    ids = {n: f"{ns}/{n}" for n in (WORLD_DATASET, SUB_DATASET, PIPELINE, WORLD_FLUX, SPACE)}
    world_cache: dict[str, object] = {}
    wheel_cache: dict[str, PackageWheel] = {}
    if config.wheel is not None:  # checked now; one built from the checkout is made by the first Space
        wheel_cache["wheel"] = package_wheel(version, config.wheel, None, Path("."))
    checkout = sources.metrics.parent if sources.origin == "checkout" else None  # else: the installed package

    def wheel(folder: Path) -> PackageWheel:
        """The package wheel, built (once, offline; or packed from the installed package) into the first
        Space folder that needs it."""
        if "wheel" not in wheel_cache:
            wheel_cache["wheel"] = package_wheel(version, None, checkout, folder / "wheels")
        return wheel_cache["wheel"]

    def world():
        if "world" not in world_cache:
            world_cache["world"] = build_world(config.world)
        return world_cache["world"]

    plan = [
        PlannedRepo(
            HubRepo(WORLD_DATASET, "dataset", "bird world, train/test (Parquet)"),
            lambda f: build_world_dataset(
                world(), config.world, f, ids[WORLD_DATASET], ids[SUB_DATASET], command, version
            ),
        ),
        PlannedRepo(
            HubRepo(SUB_DATASET, "dataset", "bird world SUB-style counterfactuals in SUB's schema"),
            lambda f: build_sub_dataset(
                world(), config.world, f, ids[SUB_DATASET], ids[WORLD_DATASET], command, version
            ),
        ),
    ]
    for name in METRIC_NAMES:
        plan.append(
            PlannedRepo(
                HubRepo(name, "space", "evaluate metric", space_sdk="gradio"),
                lambda f, name=name: build_metric_space(sources.metrics / name, f, ns, wheel(f)),
            )
        )
    plan.append(
        PlannedRepo(
            HubRepo(PIPELINE, "model", "diffusers custom pipeline"),
            lambda f: build_pipeline_repo(sources.pipeline, f, ns, PIPELINE, version),
        )
    )
    for name in FLUX2_PIPELINES:
        plan.append(
            PlannedRepo(
                HubRepo(name, "model", "diffusers custom pipeline (FLUX.2)"),
                lambda f, name=name: build_pipeline_repo(sources.pipeline.parent / name, f, ns, name, version),
            )
        )
    plan.append(
        PlannedRepo(
            HubRepo(BLOCK, "model", "Modular Diffusers block"),
            lambda f: build_block_repo(sources.pipeline.parent / BLOCK, f, ns, BLOCK, version),
        )
    )
    models: list[BenchModel] = find_bench_models(config.bench) if config.bench is not None else []
    for model in models:
        plan.append(
            PlannedRepo(
                HubRepo(model.repo_name, "model", f"bench model ({model.slug})"),
                lambda f, m=model: build_bench_model(
                    m, config.bench, f, f"{ns}/{m.repo_name}", ns, (ids[WORLD_DATASET], ids[SUB_DATASET]), version
                ),
            )
        )
    if sources.world_flux is not None:
        plan.append(
            PlannedRepo(
                HubRepo(WORLD_FLUX, "model", "world Flux text-to-image model"),
                lambda f: build_world_flux(sources.world_flux, f, ids[WORLD_FLUX], ids[PIPELINE], version),
            )
        )
    model_ids = [f"{ns}/{m.repo_name}" for m in models] + ([ids[WORLD_FLUX]] if sources.world_flux else [])
    plan.append(
        PlannedRepo(
            HubRepo(SPACE, "space", "the concept-grounding Gradio Space", space_sdk="gradio"),
            lambda f: build_space(
                sources.space,
                sources.screenshots,
                f,
                ids[SPACE],
                wheel(f),
                model_ids,
                [ids[WORLD_DATASET], ids[SUB_DATASET]],
            ),
        )
    )
    check_namespace(ns, [p.repo.name for p in plan])
    return plan


def build_repos(config: PublishConfig, plan: list[PlannedRepo] | None = None) -> list[HubRepo]:
    """Write every planned repo under ``config.out`` (see :mod:`.layout`); returns the repos.

    Raises:
        ValueError: bad input (see :func:`plan_repos`) or an ``--out`` folder that is
            not empty and not made by an earlier publish; raised before anything is written.
    """
    plan = plan if plan is not None else plan_repos(config)
    out = Path(config.out)
    prepare_out(out)
    repos = [p.repo for p in plan]
    write_marker(out, config.namespace, config.version, publish_command(config), repos)
    for planned in tqdm(plan, desc="publish: build repos", unit="repo"):
        folder = planned.repo.folder(out)
        folder.mkdir(parents=True, exist_ok=True)
        logger.info("building %s %s", planned.repo.repo_type, planned.repo.repo_id(config.namespace))
        planned.write(folder)
    return repos
