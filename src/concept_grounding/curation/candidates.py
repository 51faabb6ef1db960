"""The ``candidates`` job: SUB's candidate selection (Sec. 4.2) end to end, with reports.

:func:`run_candidates` (``CandidatesConfig -> CandidatesResult``) runs one step (``config.step``):
``"classes"`` (a classifier names each class's images), ``"attributes"`` (a VQA scorer's accuracy over
the threshold grid) or ``"plan"`` (the pairings file ``generate --pairings`` reads). The formulas are in
:mod:`concept_grounding.tdg.candidates`, the inputs in :mod:`.candidate_inputs`, the steps and reports in
:mod:`.candidate_steps` (their public names importable from here). Manual: docs/sub_curation.md.

>>> CandidatesConfig(step="attributes").per_class, CandidatesConfig().per_class
(10, 20)
>>> sorted(step_settings("plan"))
['attributes_file', 'classes_file', 'cub_root', 'images_per_pairing', 'world_seed']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..settings import setting, tuple_or_none
from ..tdg.candidates import IMAGES_PER_CLASS, MIN_ATTRIBUTE_ACCURACY, MIN_CLASS_ACCURACY, ClassSelection
from ..validators import attribute_name, class_name, closed_unit_interval, existing_dir, existing_file, positive_int
from ..vocabulary import load_vocabulary
from .candidate_inputs import (
    CLASS_PROMPT,
    WORLD_JUDGE,
    Classifier,
    as_classifier,
    candidate_world,
    cub_attribute_data,
    generated_class_images,
    load_classifier,
    read_class_images,
    world_attribute_data,
    world_class_images,
    world_judge_scorer,
)
from .candidate_steps import (
    AttributeRun,
    CandidatePlan,
    attribute_candidates,
    class_candidates,
    plan_candidates,
    write_attribute_report,
    write_class_report,
    write_plan_report,
)

__all__ = [
    "CLASS_PROMPT",
    "WORLD_JUDGE",
    "STEPS",
    "Classifier",
    "CandidatesConfig",
    "CandidatesResult",
    "AttributeRun",
    "CandidatePlan",
    "step_settings",
    "run_candidates",
    "as_classifier",
    "load_classifier",
    "world_judge_scorer",
    "candidate_world",
    "world_class_images",
    "generated_class_images",
    "read_class_images",
    "class_candidates",
    "write_class_report",
    "world_attribute_data",
    "cub_attribute_data",
    "attribute_candidates",
    "write_attribute_report",
    "plan_candidates",
    "write_plan_report",
]


# ------------------------------------------------------------------------------ the job
#: the job's steps (``concept-grounding candidates STEP``)
STEPS: tuple[str, ...] = ("classes", "attributes", "plan")
#: the VQA scorers of the attributes step (as in ``filter``)
SCORERS: tuple[str, ...] = ("world-judge", "vlm", "clip", "tiny-clip", "oracle")
_WORLD = ("world_size", "world_seed", "batch_size", "device", "progress")
#: the settings each step reads (its flags); the others keep their defaults
_STEP_SETTINGS: dict[str, tuple[str, ...]] = {
    "classes": (
        "images",
        "generate",
        "flux_model",
        "steps",
        "classifier",
        "per_class",
        "classes",
        "min_accuracy",
        *_WORLD,
    ),
    "attributes": (
        "cub_root",
        "scorer",
        "vlm_model",
        "trust_remote_code",
        "clip_model",
        "clip_pretrained",
        "oracle",
        "attributes",
        "per_class",
        "min_accuracy",
        "metric",
        *_WORLD,
    ),
    "plan": ("classes_file", "attributes_file", "cub_root", "images_per_pairing", "world_seed"),
}
#: each step's defaults of the settings whose field default is ``None`` ("the step's")
STEP_DEFAULTS: dict[str, dict[str, Any]] = {
    "classes": {"per_class": IMAGES_PER_CLASS, "min_accuracy": MIN_CLASS_ACCURACY},
    "attributes": {"per_class": 10, "min_accuracy": MIN_ATTRIBUTE_ACCURACY},
    "plan": {},
}


def step_settings(step: str) -> tuple[str, ...]:
    """The names of the settings ``step`` reads (its command-line flags)."""
    return _STEP_SETTINGS[step]


@dataclass(frozen=True)
class CandidatesConfig:
    """One step of the candidate selection and its settings (the paper's are the defaults).

    ``per_class`` and ``min_accuracy`` default to the step's (:data:`STEP_DEFAULTS`: 20 renders
    and 1.0 for classes, 10 and 0.90 for attributes). ``class_table`` (not a flag): the plan's
    ``(class names, (C, 312) class-level labels)`` when they come from a CUB tree (the command
    reads it); ``None``: :func:`candidate_world`'s.
    """

    step: str = "classes"
    images: Path | None = setting(
        None,
        "folder of generated images with metadata.jsonl {file_name, reference_class} "
        "(default: world renders, --per-class per class)",
        parse=existing_dir,
    )
    generate: str | None = setting(
        None,
        "generate the images with a Flux prompted 'A photo of a {class}' (SUB Sec. "
        "4.2): the shipped world Flux or the tiny random one (default: world renders)",
        choices=("world", "tiny"),
    )
    flux_model: str | None = setting(
        None, "a FLUX Hub id or folder to generate with instead (--generate's pretrained form)"
    )
    steps: int = setting(28, "denoising steps of --generate / --flux-model", parse=positive_int)
    classifier: str | None = setting(
        None,
        "world-judge (default), a saved world-judge folder, file.py:factory / "
        "module:factory (returns images -> CUB class names or indices), or a "
        "transformers image classifier",
    )
    cub_root: Path | None = setting(
        None,
        "a CUB_200_2011 tree: the attributes step reads its per-image labels "
        "(default: world renders with exact labels), the plan its class-level "
        "labels, which give S- (default: the world's)",
        parse=existing_dir,
    )
    scorer: str = setting("world-judge", "the VQA scorer (as in `filter`)", choices=SCORERS)
    vlm_model: str | None = setting(None, "transformers VLM id or folder (--scorer vlm)")
    trust_remote_code: bool = setting(False, "let --vlm-model run its own code", action="store_true")
    clip_model: str = setting("ViT-B-32", "open_clip architecture (--scorer clip)")
    clip_pretrained: str = setting("openai", "open_clip weights tag (--scorer clip)")
    oracle: str | None = setting(None, "'module:function' or a concept model folder (--scorer oracle)")
    attributes: tuple[str, ...] | None = setting(
        None, "attributes to assess (default: all 312)", nargs="*", parse=attribute_name, convert=tuple_or_none
    )
    per_class: int | None = setting(None, "world renders per class", parse=positive_int)
    classes: tuple[str, ...] | None = setting(
        None, "world classes (default: SUB's 33)", nargs="*", parse=class_name, convert=tuple_or_none
    )
    min_accuracy: float | None = setting(
        None,
        "keep a class at this accuracy (classes); keep an attribute at this "
        "accuracy at its best threshold (attributes)",
        parse=closed_unit_interval,
    )
    metric: str = setting(
        "balanced", "balanced (mean of TPR and TNR) or plain accuracy over all images", choices=("balanced", "accuracy")
    )
    classes_file: Path | None = setting(None, "classes.json of `candidates classes`", parse=existing_file)
    attributes_file: Path | None = setting(None, "attributes.json of `candidates attributes`", parse=existing_file)
    images_per_pairing: int | None = setting(
        None, "N written into every pairing (default: generate's --images-per-pairing)", parse=positive_int
    )
    world_size: int | None = setting(
        None,
        "world renders: side in px (default: 32, the shipped world Flux's and judge's)",
        parse=positive_int,
        flag="--size",
        aliases=("--world-size",),
    )
    world_seed: int = setting(0, "world renders: seed (the plan: the world's class table)", parse=int)
    batch_size: int = setting(64, "images per classifier / scorer call", parse=positive_int)
    device: str = setting("cpu", "device of a transformers model")
    progress: bool = setting(True, "show no progress bars", flag="--no-progress", action="store_false")
    class_table: tuple[tuple[str, ...], np.ndarray] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.step not in STEPS:
            raise ValueError(f"step must be one of {STEPS}, got {self.step!r}")
        for name, value in STEP_DEFAULTS[self.step].items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        if self.step == "plan" and (self.classes_file is None or self.attributes_file is None):
            raise ValueError("the plan needs classes_file and attributes_file")


@dataclass
class CandidatesResult:
    """What :func:`run_candidates` computed: the step's selection (``classes``: a
    :class:`ClassSelection`; ``attributes``: an :class:`AttributeRun`; ``plan``: a :class:`CandidatePlan`)."""

    config: CandidatesConfig
    classes: ClassSelection | None = None
    attributes: AttributeRun | None = None
    plan: CandidatePlan | None = None

    def save(self, out: str | Path) -> Path:
        """Write the step's report under ``out``; returns its Markdown file."""
        if self.classes is not None:
            return write_class_report(self.classes, out)
        if self.attributes is not None:
            return write_attribute_report(self.attributes.selection, out) / "attributes.md"
        assert self.plan is not None
        return write_plan_report(self.plan, out)


def _flux_source(config: CandidatesConfig) -> Any:
    """The Flux of ``generate`` / ``flux_model`` (resolved, not loaded)."""
    if config.flux_model:
        from ..tdg.sources import PretrainedFlux

        return PretrainedFlux(config.flux_model, argument="--flux-model")
    if config.generate == "tiny":
        from ..tdg.tiny import TinyFlux

        return TinyFlux()
    from ..worldflux.source import WorldFlux

    return WorldFlux()


def _class_images(config: CandidatesConfig) -> tuple[list[Any], np.ndarray, tuple[str, ...]]:
    """The classes step's images: a folder's, a Flux's, or world renders."""
    if config.images is not None:
        return read_class_images(config.images)
    if config.generate or config.flux_model:
        from ..extras import require_extra

        require_extra("tdg", "concept-grounding candidates classes --generate")
        names = tuple(config.classes) if config.classes else load_vocabulary().sub_classes
        return generated_class_images(
            _flux_source(config),
            names,
            config.per_class,
            config.steps,
            seed=config.world_seed,
            size=config.world_size,
            progress=config.progress,
        )
    return world_class_images(config.classes, config.per_class, config.world_size, config.world_seed)


def _classifier(spec: str | None, names: Sequence[str], device: str) -> Classifier:
    """``--classifier``: a ``file.py:factory`` / ``module:factory``, or what :func:`load_classifier` loads."""
    if spec and ":" in spec and not Path(spec).exists():  # file.py:factory or module:factory
        from ..evaluation.loading import load_factory

        predict = load_factory(spec, "--classifier")()
        if not callable(predict):
            raise UsageError(f"{spec!r} must return a callable images -> class predictions", argument="--classifier")
        return as_classifier(predict, names)
    return load_classifier(spec, names, device)


def _attribute_scorer(config: CandidatesConfig) -> Any:
    """The attributes step's VQA scorer (named models resolved before any image loads)."""
    if config.scorer == "world-judge":
        return world_judge_scorer()
    from ..judge import attribute_judge
    from ..tdg.filter_job import DEFAULT_VLM, FilterConfig, build_scorer

    return build_scorer(
        FilterConfig(
            input=Path("."),
            out=Path("."),
            scorer=config.scorer,
            vlm_model=config.vlm_model or DEFAULT_VLM,
            trust_remote_code=config.trust_remote_code,
            clip_model=config.clip_model,
            clip_pretrained=config.clip_pretrained,
            oracle=config.oracle,
            judge_loader=attribute_judge,
        )
    )


def run_candidates(config: CandidatesConfig) -> CandidatesResult:
    """Run ``config.step`` (module docstring); nothing is written (:meth:`CandidatesResult.save` writes)."""
    if config.step == "classes":
        images, labels, names = _class_images(config)
        classifier = _classifier(config.classifier, names, config.device)
        return CandidatesResult(
            config,
            classes=class_candidates(
                images, labels, names, classifier, config.min_accuracy, config.batch_size, config.progress
            ),
        )
    if config.step == "attributes":
        scorer = _attribute_scorer(config)
        if config.cub_root is not None:
            images, truth = cub_attribute_data(config.cub_root, progress=config.progress)
        else:
            images, truth = world_attribute_data(
                config.per_class, config.world_size, config.world_seed, class_names=config.classes
            )
        return CandidatesResult(
            config,
            attributes=attribute_candidates(
                images,
                truth,
                scorer,
                config.attributes,
                min_accuracy=config.min_accuracy,
                metric=config.metric,
                batch_size=config.batch_size,
                progress=config.progress,
            ),
        )
    if config.class_table is not None:
        names, table = config.class_table
    else:
        world = candidate_world(config.classes, seed=config.world_seed)
        names, table = tuple(world.class_names), world.class_attributes
    return CandidatesResult(
        config,
        plan=plan_candidates(config.classes_file, config.attributes_file, names, table, config.images_per_pairing),
    )
