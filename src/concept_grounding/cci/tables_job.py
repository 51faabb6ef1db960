"""The ``cci-bench`` job: the CCI paper's Table 1 or Table 2 across CLIPs, and its report.

:func:`run_cci_bench` reads a given data set (every image checked readable, whatever its size),
loads every model (a name that cannot load offline fails before any work), or exports the bird
world in the task's layout under ``config.out / "data"``,
runs the whole job once on the first image (a model or method that cannot run fails in seconds), then
:func:`~.tables.classification_table` or :func:`~.tables.retrieval_table`;
:meth:`CciBenchResult.save` writes ``results.json`` and ``report.md``
(:func:`~.tables.write_cci_tables`). The command ``concept-grounding cci-bench`` derives its
flags from :class:`CciBenchConfig`.

>>> from concept_grounding.cci.tables_job import CciBenchConfig
>>> config = CciBenchConfig(models=("world-clip", "random-clip:1"), task="retrieval")
>>> config.replacement, config.candidate_kind
('blur', 'images')
>>> CciBenchConfig(task="ranking")
Traceback (most recent call last):
...
ValueError: task must be 'classification' or 'retrieval', got 'ranking'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..settings import flag, setting
from ..validators import existing_dir, existing_file, int_at_least, positive_int
from .explainers import EXPLAINERS
from .tables import TableRow

if TYPE_CHECKING:  # pragma: no cover
    from ..models.clip import ClipHandle
    from .layouts import CaptionedImages, ImageFolder

__all__ = ["CciBenchConfig", "CciBenchResult", "run_cci_bench"]

TASKS = ("classification", "retrieval")
REPLACEMENTS = ("blur", "noise", "mean")


@dataclass(frozen=True)
class CciBenchConfig:
    """What ``cci-bench`` measures (each field but ``out`` is a flag of the command).

    Args:
        task: ``"classification"`` (Table 1) or ``"retrieval"`` (Table 2).
        images, class_names: an ImageNet-style folder and its class-name file (Table 1).
        coco, split: a COCO folder with Karpathy's ``dataset_coco.json`` and the split (Table 2).
        models: ``--models`` entries (:func:`~.table_models.load_table_models`; presets expanded).
        methods: explanation methods (:data:`~.tables.METHODS`).
        steps, clusters, batch_size, replacement, seed: as in :func:`~.tables.classification_table`.
        max_images: first N images per class (Table 1) or of the split (Table 2).
        size: input size of tiny models and of world exports, in pixels.
        world_images: world images per class (Table 1) or in all, times 4 (Table 2), when exporting.
        device: torch device of the models.
        progress: show progress bars.
        out: where the world is exported (``out / "data"``) when no folder is given.
    """

    task: str = setting("classification", "Table 1 (classification) or Table 2 (retrieval)", choices=TASKS)
    images: Path | None = setting(
        None, "ImageNet-style folder, one sub-folder per class (default: the world exported there)", parse=existing_dir
    )
    class_names: Path | None = setting(
        None, "class names: one per line in sorted-folder order, or '<folder> <name>' lines", parse=existing_file
    )
    coco: Path | None = setting(
        None,
        "COCO folder with the Karpathy split dataset_coco.json (default: the world exported there)",
        parse=existing_dir,
    )
    split: str = setting("test", "Karpathy split to use")
    models: tuple[str, ...] = setting(
        ("world-clip",),
        "CLIPs: world-clip (the shipped world CLIP, the default), "
        "open_clip arch[:pretrained], transformers id or folder, "
        "WorldCLIP folder, random-clip[:seed] (random weights, on "
        "purpose), the preset 'paper', or efficientnet_lite0 (an "
        "ImageNet CNN: Grad-CAM and random rows)",
        nargs="+",
        convert=tuple,
    )
    methods: tuple[str, ...] = setting(EXPLAINERS, "explanation methods", nargs="+", choices=EXPLAINERS, convert=tuple)
    steps: int = setting(10, "deletion / insertion fractions (steps + 1 points)", parse=positive_int)
    clusters: int = setting(7, "K of CCI's k-means", parse=positive_int)
    batch_size: int = setting(32, "images per batch", parse=positive_int)
    max_images: int | None = setting(
        None, "first N images per class (classification) or of the split (retrieval)", parse=positive_int
    )
    replacement: str = setting("blur", "what deleted pixels become", choices=REPLACEMENTS)
    size: int = setting(64, "input size of tiny models and of world exports", parse=int_at_least(32))
    world_images: int = setting(
        4, "world images per class (classification) or in all (x 4, retrieval) when exporting", parse=positive_int
    )
    seed: int = setting(0, "seed of the world, the k-means and tiny models", parse=int)
    device: str = setting("cpu", "e.g. cpu, cuda")
    progress: bool = setting(True, "show no progress bars", flag="--no-progress", action="store_false")
    out: Path | None = None

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task must be 'classification' or 'retrieval', got {self.task!r}")
        if self.replacement not in REPLACEMENTS:
            raise ValueError(f"replacement must be one of {REPLACEMENTS}, got {self.replacement!r}")

    @property
    def candidate_kind(self) -> str:
        """What a query is ranked among: ``"classes"`` (Table 1) or ``"images"`` (Table 2)."""
        return "classes" if self.task == "classification" else "images"


@dataclass
class CciBenchResult:
    """What :func:`run_cci_bench` computed.

    Attributes:
        config: the job's configuration.
        rows: one :class:`~.tables.TableRow` per model x method.
        header: the report's paragraph above the table (data, settings, models).
    """

    config: CciBenchConfig
    rows: list[TableRow]
    header: str
    random_models: list[str] = field(default_factory=list)

    def save(self, out: str | Path) -> Path:
        """Write ``results.json`` and ``report.md`` under ``out`` (:func:`~.tables.write_cci_tables`); returns the
        report's path."""
        from .tables import write_cci_tables

        report = write_cci_tables(
            self.rows, out, self.config.task, header=self.header, random_models=self.random_models
        )
        self.write_eval_results(Path(out))
        return report

    def write_eval_results(self, out: Path) -> list[Path]:
        """``out/eval_results/<model>/cci-bench.yaml`` per CLIP: each method's faithfulness AUCs
        (``<method>/<column>``) and the clean accuracy, on the task's data set."""
        from ..eval_results import result_entries, write_eval_results

        config = self.config
        root = config.coco if config.task == "retrieval" else config.images
        dataset = Path(root).name if root is not None else f"bird-world-{config.task}"
        by_model: dict[str, dict[str, float]] = {}
        for row in self.rows:
            values = by_model.setdefault(row.model, {"accuracy": row.accuracy})
            values.update({f"{row.method}/{column}": auc for column, auc in row.scores.items()})
        return [
            path
            for model, values in by_model.items()
            if (
                path := write_eval_results(
                    out,
                    model,
                    "cci-bench",
                    result_entries(dataset, values, notes=f"concept-grounding cci-bench, {config.task}"),
                )
            )
        ]


def table_data(config: CciBenchConfig) -> ImageFolder | CaptionedImages:
    """The task's data set, read from its flag's folder or exported from the world under ``config.out / "data"``."""
    from .layouts import export_world_image_folder, export_world_karpathy, read_image_folder, read_karpathy

    if config.task == "classification":
        if config.coco is not None:
            raise UsageError(f"is for {flag(CciBenchConfig, 'task')} retrieval", argument=flag(CciBenchConfig, "coco"))
        root, names = config.images, config.class_names
        if root is None:
            root = export_world_image_folder(
                _export_root(config) / "images", per_class=config.world_images, image_size=config.size, seed=config.seed
            )
            names = names or root / "class_names.txt"
        return read_image_folder(root, names, max_per_class=config.max_images)
    if config.images is not None:
        raise UsageError(
            f"is for {flag(CciBenchConfig, 'task')} classification", argument=flag(CciBenchConfig, "images")
        )
    root = config.coco or export_world_karpathy(
        _export_root(config) / "coco", num_images=4 * config.world_images, image_size=config.size, seed=config.seed
    )
    return read_karpathy(root, config.split, max_images=config.max_images)


def _export_root(config: CciBenchConfig) -> Path:
    if config.out is None:
        raise ValueError("out: give the folder the world is exported under (or images / coco)")
    return Path(config.out) / "data"


def report_header(
    config: CciBenchConfig, models: list[tuple[str, ClipHandle]], num_images: int, candidates: int
) -> str:
    """The paragraph above the table: data, settings, models, and a note when the @5 columns cannot be informative."""
    source = config.images or config.coco or "the bird world (exported under data/)"
    header = (
        f"{num_images} images from {source}; {config.steps + 1} fractions, replacement {config.replacement}, "
        f"K = {config.clusters}, seed {config.seed}. Models: " + ", ".join(f"{n} ({h.description})" for n, h in models)
    )
    if candidates <= 5:
        header += (
            f" With {candidates} {config.candidate_kind} the top 5 always hold the target: the @5 columns "
            "are 100 % by construction (this data cannot supply them)."
        )
    return header


#: the first check's size: images of the data set and deletion / insertion steps (one interior fraction)
CHECK_IMAGES, CHECK_STEPS = 1, 2


def first_images(data: ImageFolder | CaptionedImages, count: int = CHECK_IMAGES) -> ImageFolder | CaptionedImages:
    """The first ``count`` images of ``data`` as a data set of the same kind (every class name kept)."""
    from dataclasses import replace

    from .layouts import ImageFolder

    if isinstance(data, ImageFolder):
        return replace(
            data,
            paths=data.paths[:count],
            labels=data.labels[:count],
            masks=data.masks[:count] if data.masks is not None else None,
        )
    return replace(data, paths=data.paths[:count], captions=data.captions[:count])


def table_rows(
    config: CciBenchConfig,
    models: list[tuple[str, ClipHandle]],
    data: ImageFolder | CaptionedImages,
    *,
    steps: int,
    progress: bool,
) -> list[TableRow]:
    """Table 1 or Table 2 (``config.task``) of every model x method on ``data`` at ``steps``."""
    from .faithfulness import Replacement
    from .tables import classification_table, retrieval_table

    table = classification_table if config.task == "classification" else retrieval_table
    return table(
        models,
        data,
        methods=config.methods,
        steps=steps,
        clusters=config.clusters,
        seed=config.seed,
        batch_size=config.batch_size,
        replacement=Replacement(config.replacement, seed=config.seed),
        progress=progress,
    )


def bench_result(
    config: CciBenchConfig,
    models: list[tuple[str, ClipHandle]],
    data: ImageFolder | CaptionedImages,
    rows: list[TableRow],
) -> CciBenchResult:
    """The result of ``rows`` on ``data``: the report's header and the models with random weights."""
    candidates = len(data.class_names) if config.task == "classification" else len(data.paths)
    return CciBenchResult(
        config,
        rows,
        report_header(config, models, len(data.paths), candidates),
        [name for name, handle in models if handle.random_weights],
    )


def check_whole_path(
    config: CciBenchConfig, models: list[tuple[str, ClipHandle]], data: ImageFolder | CaptionedImages
) -> None:
    """Run the whole job on the first image at :data:`CHECK_STEPS` steps, report written to a
    temporary folder, so that a model or method that cannot run fails in seconds, not after the table."""
    import tempfile

    small = first_images(data)
    result = bench_result(config, models, small, table_rows(config, models, small, steps=CHECK_STEPS, progress=False))
    with tempfile.TemporaryDirectory() as tmp:
        result.save(tmp)


def run_cci_bench(config: CciBenchConfig) -> CciBenchResult:
    """Table 1 or Table 2 for every model x method; writes nothing but a world export under ``config.out``.

    Steps: (1) a given folder read and every image checked readable (``UsageError`` naming the flag and
    the file); (2) every model loaded (``UsageError`` naming ``--models``); (3) the world exported when no
    folder is given; (4) the whole job run once on the first image (:func:`check_whole_path`); (5) the
    table; (6) the report's header.
    """
    from .table_models import load_table_models

    data = table_data(config) if config.images is not None or config.coco is not None else None
    models = load_table_models(config.models, image_size=config.size, device=config.device)
    data = data if data is not None else table_data(config)
    check_whole_path(config, models, data)
    rows = table_rows(config, models, data, steps=config.steps, progress=config.progress)
    return bench_result(config, models, data, rows)
