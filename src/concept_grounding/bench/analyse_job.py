"""The ``analyse`` job: Aysel et al.'s analysis of a post-hoc CBM, and its report folder.

:func:`run_analyse` loads the data (CUB or the bird world), trains the paper's post-hoc CBM
when no model is given, and runs :func:`~concept_grounding.evaluation.posthoc.aysel_analysis`;
the :class:`AnalyseResult` writes the report (:func:`~concept_grounding.evaluation.posthoc.write_aysel_report`).
The command ``concept-grounding analyse`` loads ``--model`` first, then runs this job.

>>> AnalyseConfig().side, AnalyseConfig(cub_root="CUB_200_2011").side, AnalyseConfig(model_image_size=96).side
(64, 224, 96)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..settings import setting, tuple_or_none
from ..validators import class_name, closed_unit_interval, existing_dir, int_at_least, positive_float, positive_int

if TYPE_CHECKING:
    import datasets

    from ..evaluation.posthoc import AyselAnalysis

__all__ = ["AnalyseConfig", "AnalyseResult", "run_analyse", "load_analyse_data"]


@dataclass(frozen=True)
class AnalyseConfig:
    """What to analyse, on which data, and how (each setting is an ``analyse`` flag).

    Attributes:
        model: the loaded post-hoc CBM (``None``: one is trained as the paper does);
            model_image_size: the side it was saved with, if known; imagenet: an ImageNet classifier
            (``--model efficientnet_lite0``) whose feature map carries the CBM built on ``photos``.
            All three set by the command.
    """

    model: Any = None
    model_image_size: int | None = None
    imagenet: str | None = None
    cub_root: Path | None = setting(
        None, "a CUB_200_2011 folder (per-image labels and part locations; default: the bird world)", parse=existing_dir
    )
    photos: Path | None = setting(
        None,
        "a `concept-grounding photos` folder: a post-hoc CBM on EfficientNet-Lite0's "
        "feature map with the animals' class-level concepts (photos.concepts)",
        parse=existing_dir,
    )
    image_size: int | None = setting(
        None,
        "side (px) the images are resized to (default: a saved model's, else 224 on CUB, 64 on the world)",
        flag="--image-size",
        aliases=("--size",),
        parse=int_at_least(32),
    )
    max_images: int | None = setting(None, "only the first N test images (default: all)", parse=int)
    min_class_count: int | None = setting(
        None, "CBM rule for the class-level labels (default: keep every attribute)", parse=int
    )
    batch_size: int = setting(64, "images per forward pass", parse=int)
    device: str | None = setting(None, "e.g. cpu, cuda (default: where the model is)")
    sweep: bool = setting(
        False,
        "Table 3: relearn the CAVs for every --sweep-c x --sweep-n and fit the classifier "
        "again, plus the no-bottleneck baseline",
        action="store_true",
    )
    sweep_c: tuple[float, ...] = setting(
        (0.001, 0.01, 0.1, 1.0, 10.0),
        "SVM regularisation values (the paper's lambda)",
        parse=positive_float,
        nargs="+",
        convert=tuple,
    )
    sweep_n: tuple[int, ...] = setting((50, 100), "N_p = N_n values", parse=positive_int, nargs="+", convert=tuple)
    coam_threshold: float = setting(
        0.5, "Algorithm 2's binary threshold on the min-max scaled CoAM", parse=closed_unit_interval
    )
    epochs: int = setting(8, "backbone epochs when no --model is given", parse=positive_int)
    classes: tuple[str, ...] | None = setting(
        None,
        "world classes (CUB folder names; default the world's)",
        nargs="*",
        parse=class_name,
        convert=tuple_or_none,
    )
    train_per_class: int = setting(30, "world training images per class", parse=positive_int)
    test_per_class: int = setting(10, "world test images per class", parse=positive_int)
    seed: int = setting(0, "seed of the world, the training and the galleries", parse=int)
    progress: bool = setting(True, "show no progress bars", flag="--no-progress", action="store_false")

    @property
    def side(self) -> int:
        """The image side (px): ``image_size``, else the saved model's, else 224 on CUB and 64 on the world."""
        return self.image_size or self.model_image_size or (224 if self.cub_root or self.photos else 64)


@dataclass
class AnalyseResult:
    """The analysis and what its report draws (:class:`~concept_grounding.evaluation.posthoc.AyselAnalysis`)."""

    config: AnalyseConfig
    analysis: AyselAnalysis

    def save(self, out: str | Path) -> Path:
        """Write the report folder under ``out`` (``results.json``, ``report.md``, CSVs, figures);
        returns ``report.md``'s path."""
        self.analysis.write(out, coam_threshold=self.config.coam_threshold, seed=self.config.seed)
        self.write_eval_results(Path(out))
        return Path(out) / "report.md"

    def write_eval_results(self, out: Path) -> Path | None:
        """``out/eval_results/<model>/analyse.yaml``: class accuracy and every scalar of Aysel et al.'s
        concept existence and location (``existence@l``, ``location@l_alpha{a}``) on the split analysed."""
        from ..eval_results import result_entries, write_eval_results

        result = self.analysis.result
        values = {"class_accuracy": result.class_accuracy}
        for name, table in (("existence", result.existence), ("location", result.location)):
            values.update(
                {f"{name}/{k}": v for k, v in table.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            )
        root = self.config.cub_root or self.config.photos
        dataset = str(root.name) if root is not None else "bird-world"
        model = str(self.config.model) if isinstance(self.config.model, (str, Path)) else "posthoc-cbm"
        model = f"posthoc-cbm-{self.config.imagenet}" if self.config.imagenet else model
        return write_eval_results(
            out,
            model,
            "analyse",
            result_entries(dataset, values, notes=f"concept-grounding analyse, seed {self.config.seed}"),
        )


def load_analyse_data(config: AnalyseConfig, image_size: int) -> datasets.DatasetDict:
    """``cub_root`` loaded with :func:`~concept_grounding.loaders.load_cub`, else the world rendered
    at ``image_size``."""
    if config.cub_root is not None:
        from ..loaders import load_cub

        return load_cub(config.cub_root, min_class_count=config.min_class_count, progress=config.progress)
    from ..world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=image_size, seed=config.seed, class_names=config.classes))
    return world.to_dataset_dict(config.train_per_class, config.test_per_class, progress=config.progress)


def run_analyse(config: AnalyseConfig) -> AnalyseResult:
    """Data, the model (trained as the paper does when ``config.model`` is ``None``), then
    :func:`~concept_grounding.evaluation.posthoc.aysel_analysis`; nothing is written."""
    from ..evaluation.posthoc import aysel_analysis, default_concept_columns, train_default_posthoc
    from ..vocabulary import load_vocabulary

    image_size = config.side
    if config.photos is not None:
        return _run_photos(config, image_size)
    cub = load_analyse_data(config, image_size)
    model = config.model
    if model is None:
        columns = default_concept_columns(cub["train"], load_vocabulary())
        model = train_default_posthoc(
            cub["train"], columns, image_size, epochs=config.epochs, seed=config.seed, progress=config.progress
        )
    if config.device:
        model.to(config.device)
    analysis = aysel_analysis(
        model,
        cub,
        image_size=image_size,
        max_images=config.max_images,
        batch_size=config.batch_size,
        progress=config.progress,
        sweep=config.sweep,
        sweep_Cs=config.sweep_c,
        sweep_sizes=config.sweep_n,
        seed=config.seed,
    )
    return AnalyseResult(config, analysis)


def _run_photos(config: AnalyseConfig, image_size: int) -> AnalyseResult:
    """``--photos``: the folder's splits (:func:`~concept_grounding.photos.concepts.photos_dataset_dict`),
    a post-hoc CBM on the ImageNet classifier's feature map with the class-level concepts
    (:func:`~concept_grounding.evaluation.posthoc.imagenet_posthoc_cbm`), then the analysis. Concept location:
    the body coverings (feathers, fur, scales) at the mask's body point
    (:func:`~concept_grounding.photos.concepts.concept_parts`); the other concepts have no region."""
    from ..evaluation.posthoc import aysel_analysis, imagenet_posthoc_cbm
    from ..models.imagenet import load_imagenet_classifier
    from ..photos.concepts import CONCEPTS, concept_parts, photos_dataset_dict

    if config.model is not None:
        raise ValueError(
            "--photos builds its post-hoc CBM on an ImageNet classifier: --model efficientnet_lite0 or no --model"
        )
    data = photos_dataset_dict(config.photos)
    classifier = load_imagenet_classifier(config.imagenet or "efficientnet_lite0", config.device or "cpu")
    columns = list(range(len(CONCEPTS)))
    model = imagenet_posthoc_cbm(
        classifier,
        data["train"],
        columns,
        CONCEPTS,
        image_size,
        seed=config.seed,
        batch_size=config.batch_size,
        progress=config.progress,
    )
    analysis = aysel_analysis(
        model,
        data,
        image_size=image_size,
        max_images=config.max_images,
        batch_size=config.batch_size,
        progress=config.progress,
        sweep=config.sweep,
        sweep_Cs=config.sweep_c,
        sweep_sizes=config.sweep_n,
        seed=config.seed,
        concept_columns=columns,
        concept_parts=concept_parts(),
    )
    return AnalyseResult(config, analysis)
