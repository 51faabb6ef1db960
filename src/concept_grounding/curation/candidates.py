"""The ``candidates`` job: SUB's candidate selection (Sec. 4.2) end to end, with reports.

One job, :func:`run_candidates` (``CandidatesConfig -> CandidatesResult``, whose
``save(out)`` writes the step's report), runs one of three steps (``config.step``):

* ``"classes"`` -- images per class (a folder of generated images with a ``metadata.jsonl``
  naming each image's ``reference_class``, images a Flux generates, or, by default, world
  renders) named by an image classifier (:func:`load_classifier`): :func:`class_candidates`
  -> ``classes.json`` / ``classes.md`` (:func:`write_class_report`).
* ``"attributes"`` -- a VQA scorer's answers on a CUB tree (``cub_root``; by default the bird
  world's renders with their exact per-image labels) -> per-attribute accuracy over the
  threshold grid (:func:`attribute_candidates`), ``attributes.json`` / ``attributes.md`` /
  ``attributes.png`` (:func:`write_attribute_report`).
* ``"plan"`` -- the kept classes x kept attributes the class lacks (:func:`plan_candidates`)
  -> ``pairings.jsonl`` for ``generate --pairings`` (with S-, guide birds and N) and ``plan.md``
  (:func:`write_plan_report`).

The formulas are in :mod:`concept_grounding.tdg.candidates`; this module reads, scores and writes.

>>> CandidatesConfig(step="attributes").per_class, CandidatesConfig().per_class
(10, 20)
>>> sorted(step_settings("plan"))
['attributes_file', 'classes_file', 'cub_root', 'images_per_pairing', 'world_seed']
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError, read_text_file
from ..fileio import markdown_table, write_report
from ..settings import setting, tuple_or_none
from ..validators import attribute_name, class_name, closed_unit_interval, existing_dir, existing_file, positive_int
from ..vocabulary import Vocabulary, load_vocabulary
from ..tdg.candidates import (
    IMAGES_PER_CLASS,
    MIN_ATTRIBUTE_ACCURACY,
    MIN_CLASS_ACCURACY,
    THRESHOLD_GRID,
    AttributeSelection,
    ClassSelection,
    attribute_probabilities,
    candidate_pairings,
    select_attributes,
    select_classes,
)
from ..tdg.plan import write_pairings

__all__ = [
    "CLASS_PROMPT", "WORLD_JUDGE", "STEPS", "Classifier", "CandidatesConfig", "CandidatesResult", "AttributeRun",
    "CandidatePlan", "step_settings", "run_candidates", "as_classifier", "load_classifier", "world_judge_scorer",
    "candidate_world", "world_class_images", "generated_class_images", "read_class_images", "class_candidates",
    "write_class_report", "world_attribute_data", "cub_attribute_data", "attribute_candidates",
    "write_attribute_report", "plan_candidates", "write_plan_report",
]

#: ``--classifier`` default: the shipped world judge's species head.
WORLD_JUDGE = "world-judge"
#: images -> ``(N,)`` predicted class indices into the candidate class list (-1: another class).
Classifier = Callable[[Sequence[Any]], np.ndarray]


def _name_key(name: str) -> str:
    """``"017.Cardinal"``, ``"Cardinal"``, ``"017_cardinal"`` -> ``"cardinal"`` (label matching)."""
    return re.sub(r"[^a-z]+", "", re.sub(r"^\d+[._ ]*", "", name.lower()))


def _indices(predicted: Sequence[Any], class_names: Sequence[str]) -> np.ndarray:
    """Predicted class names or indices -> ``(N,)`` indices into ``class_names`` (-1: not among them)."""
    keys = {_name_key(c): i for i, c in enumerate(class_names)}
    out = []
    for p in predicted:
        if isinstance(p, (int, np.integer)):
            out.append(int(p) if 0 <= int(p) < len(class_names) else -1)
        else:
            out.append(keys.get(_name_key(str(p)), -1))
    return np.asarray(out, dtype=np.int64)


def _judge_classifier(folder: str | None, class_names: Sequence[str]) -> Classifier:
    from ..judge.model import judge_images, load_world_judge

    judge = load_world_judge(folder)
    to_ours = _indices(judge.class_names, class_names)

    def classify(images: Sequence[Any]) -> np.ndarray:
        size = judge.image_size
        species, _ = judge_images(judge, [im.convert("RGB").resize((size, size)) for im in images])
        return to_ours[species]

    return classify


def _transformers_classifier(name: str, class_names: Sequence[str], device: str) -> Classifier:
    """An ``AutoModelForImageClassification`` whose ``id2label`` names CUB classes (folder or plain names)."""
    import torch
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    model = AutoModelForImageClassification.from_pretrained(name).to(device).eval()
    processor = AutoImageProcessor.from_pretrained(name)
    labels = [model.config.id2label[i] for i in range(model.config.num_labels)]
    to_ours = _indices(labels, class_names)
    if (to_ours < 0).all():
        raise UsageError(f"none of the model's {len(labels)} labels (e.g. {labels[:3]}) names a CUB class",
                         argument="--classifier")

    @torch.no_grad()
    def classify(images: Sequence[Any]) -> np.ndarray:
        inputs = processor(images=[im.convert("RGB") for im in images], return_tensors="pt").to(device)
        return to_ours[model(**inputs).logits.argmax(-1).cpu().numpy()]

    return classify


def as_classifier(predict: Callable[[Sequence[Any]], Sequence[Any]], class_names: Sequence[str]) -> Classifier:
    """A callable ``images -> predictions`` (CUB class names, folder or plain, or indices into
    ``class_names``) as a :data:`Classifier`."""
    return lambda images: _indices(list(predict(images)), class_names)


def world_judge_scorer(folder: str | None = None) -> Any:
    """The world judge's attribute head (default: the shipped one) as a VQA scorer
    (:class:`~concept_grounding.tdg.filter.AttributeOracleScorer`), its inputs resized to its side."""
    from ..judge.model import judge_images, load_world_judge
    from ..tdg.filter import AttributeOracleScorer

    judge = load_world_judge(folder)
    return AttributeOracleScorer(lambda ims: judge_images(
        judge, [im.convert("RGB").resize((judge.image_size,) * 2) for im in ims])[1])


def load_classifier(spec: str | None, class_names: Sequence[str], device: str = "cpu") -> Classifier:
    """An image classifier for class selection (SUB Sec. 4.2 used a CUB-trained Swin).

    Args:
        spec: ``None`` / ``"world-judge"`` (the shipped world judge's species head), a saved
            world-judge folder, or a transformers image-classification id / folder whose
            labels name CUB classes (a factory's callable goes through :func:`as_classifier`).
        class_names: the candidate classes predictions are mapped onto.
    """
    if spec is None or spec == WORLD_JUDGE:
        return _judge_classifier(None, class_names)
    path = Path(spec).expanduser()
    config = path / "config.json"
    if config.is_file() and {"class_names", "width"} <= set(json.loads(config.read_text())):
        return _judge_classifier(str(path), class_names)
    from ..hub import resolve_model_spec

    return _transformers_classifier(resolve_model_spec(spec, "--classifier", family="hub").target, class_names, device)


def candidate_world(class_names: Sequence[str] | None = None, image_size: int | None = None, seed: int = 0):
    """The world the candidates are drawn from: the shipped world Flux's and world judge's
    (:data:`~concept_grounding.worldflux.components.TRAINING_WORLD`: 32 px, canonical pose,
    plain scene), with ``class_names`` / ``image_size`` / ``seed`` changed when given."""
    from dataclasses import replace

    from ..world import BirdWorld
    from ..worldflux.components import TRAINING_WORLD

    config = replace(TRAINING_WORLD, seed=seed, class_names=tuple(class_names) if class_names else None,
                     image_size=image_size or TRAINING_WORLD.image_size)
    return BirdWorld(config)


def world_class_images(class_names: Sequence[str] | None, per_class: int = IMAGES_PER_CLASS,
                       image_size: int | None = None, seed: int = 0) -> tuple[list[Any], np.ndarray, tuple[str, ...]]:
    """``per_class`` renders of every class of :func:`candidate_world` (the world stands in for
    the generator): ``(PIL images, (N,) class index, class names)``."""
    from PIL import Image

    world = candidate_world(class_names, image_size, seed)
    images, labels = [], []
    for c in range(world.num_classes):
        for s in world.samples(world.class_indices(c, per_class)):
            images.append(Image.fromarray(s.image))
            labels.append(s.label)
    return images, np.asarray(labels, dtype=np.int64), tuple(world.class_names)


#: SUB Sec. 4.2's prompt for class selection ("20 images per CUB class" of the generator).
CLASS_PROMPT = "A photo of a {name}"


def generated_class_images(source: Any, class_names: Sequence[str], per_class: int = IMAGES_PER_CLASS,
                           num_inference_steps: int = 28, guidance_scale: float = 3.5, seed: int = 0,
                           size: int | None = None, progress: bool = True) -> tuple[list[Any], np.ndarray, tuple[str, ...]]:
    """``per_class`` images of every class from ``source`` (a :class:`~concept_grounding.tdg.sources.FluxSource`:
    the world Flux, a pretrained FLUX, the tiny one) prompted with :data:`CLASS_PROMPT`, one
    pipeline call per class, seeded by ``seed`` and the class index: ``(PIL images, (N,) class
    index, class names)``."""
    import torch
    from diffusers import FluxPipeline
    from tqdm.auto import tqdm

    from ..vocabulary import class_display_name

    model = source.resolve()
    pipe = model.load()
    side = size or model.default_size
    device = getattr(pipe, "_execution_device", "cpu")
    images, labels = [], []
    for c, name in enumerate(tqdm(class_names, desc="generate classes", unit="class", disable=not progress)):
        generators = [torch.Generator(device=device).manual_seed(seed * 100_003 + c * 1_009 + i) for i in range(per_class)]
        out = FluxPipeline.__call__(pipe, prompt=CLASS_PROMPT.format(name=class_display_name(name)),
                                    num_images_per_prompt=per_class, num_inference_steps=num_inference_steps,
                                    guidance_scale=guidance_scale, height=side, width=side,
                                    max_sequence_length=model.max_sequence_length, generator=generators,
                                    output_type="pil", **model.extra)
        images += list(out.images)
        labels += [c] * per_class
    return images, np.asarray(labels, dtype=np.int64), tuple(class_names)


def read_class_images(folder: str | Path, vocab: Vocabulary | None = None) -> tuple[list[Any], np.ndarray, tuple[str, ...]]:
    """Generated images of ``folder/metadata.jsonl`` (``file_name``, ``reference_class``):
    ``(PIL images, (N,) class index, class names in first-seen order)``; errors name the line."""
    from PIL import Image

    vocab = vocab or load_vocabulary()
    folder = Path(folder)
    path = folder / "metadata.jsonl"
    if not path.is_file():
        raise UsageError("no metadata.jsonl here", argument="--images", file=folder,
                         hint="give a folder of images with metadata.jsonl rows {file_name, reference_class}")
    images, classes = [], []
    for n, line in enumerate(read_text_file(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            name, cls = row["file_name"], vocab.classes[vocab.class_index(row["reference_class"])]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise UsageError(f"expected a JSON row with file_name and a CUB reference_class ({err})", file=path,
                             line=n) from None
        if not (folder / name).is_file():
            raise UsageError(f"image {name!r} not found", file=path, line=n)
        images.append(Image.open(folder / name).convert("RGB"))
        classes.append(cls)
    if not images:
        raise UsageError("lists no images", file=path)
    names = tuple(dict.fromkeys(classes))
    return images, np.asarray([names.index(c) for c in classes], dtype=np.int64), names


def class_candidates(images: Sequence[Any], labels: np.ndarray, class_names: Sequence[str],
                     classifier: Classifier, min_accuracy: float = MIN_CLASS_ACCURACY, batch_size: int = 64,
                     progress: bool = True) -> ClassSelection:
    """Classify the ``N`` images in batches of ``batch_size`` and select the classes the classifier
    names at ``min_accuracy`` (``labels``: ``(N,)`` class indices into ``class_names``)."""
    from tqdm.auto import tqdm

    predicted = []
    for start in tqdm(range(0, len(images), batch_size), desc="classify", unit="batch", disable=not progress):
        predicted.append(np.asarray(classifier(images[start:start + batch_size]), dtype=np.int64))
    return select_classes(labels, np.concatenate(predicted), class_names, min_accuracy)


def _count_range(counts: np.ndarray) -> str:
    """``"20"`` when every count is 20, else ``"18-20"``.

    >>> _count_range(np.array([20, 20])), _count_range(np.array([20, 18]))
    ('20', '18-20')
    """
    lo, hi = int(np.min(counts)), int(np.max(counts))
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def write_class_report(selection: ClassSelection, out: str | Path) -> Path:
    """``classes.json`` and ``classes.md`` (per-class images, accuracy, kept) under ``out``; returns ``classes.md``."""
    rows = [[c, int(n), f"{a:.3f}", "yes" if c in selection.kept else "no"]
            for c, n, a in zip(selection.class_names, selection.counts, selection.accuracy)]
    lines = ["# Candidate classes (SUB Sec. 4.2)", "",
             f"{len(selection.kept)} of {len(selection.class_names)} classes kept: the classifier named at least "
             f"{selection.min_accuracy:.0%} of each one's {_count_range(selection.counts)} images.", "", markdown_table(["class", "images", "accuracy", "kept"], rows, align="lrrl")]
    return write_report(out, selection.to_dict(), "\n".join(lines) + "\n", results_name="classes.json",
                        report_name="classes.md", nan_as_null=False)[1]


def world_attribute_data(per_class: int = 10, image_size: int | None = None, seed: int = 0,
                         class_names: Sequence[str] | None = None) -> tuple[list[Any], np.ndarray]:
    """Renders of :func:`candidate_world` with their exact per-image labels: ``(PIL images, (N, 312) uint8)``."""
    from PIL import Image

    world = candidate_world(class_names, image_size, seed)
    samples = list(world.samples(range(per_class * world.num_classes)))
    return [Image.fromarray(s.image) for s in samples], np.stack([s.attributes for s in samples])


def cub_attribute_data(root: str | Path, progress: bool = True) -> tuple[list[Any], np.ndarray]:
    """Every image of a CUB_200_2011 tree (both splits; the paper ran on "the full CUB dataset")
    with its per-image labels: ``(PIL images, (N, 312) uint8)``."""
    from ..loaders import load_cub

    splits = load_cub(root, min_class_count=None, progress=progress)
    images, labels = [], []
    for split in splits.values():
        images += [im.convert("RGB") for im in split["image"]]
        labels.append(np.asarray(split["attributes"], dtype=np.uint8))
    return images, np.concatenate(labels)


@dataclass(frozen=True)
class AttributeRun:
    """What :func:`attribute_candidates` measured: the selection and the answer probabilities."""

    selection: AttributeSelection
    probabilities: np.ndarray


def attribute_candidates(images: Sequence[Any], labels: np.ndarray, scorer: Any,
                         attributes: Sequence[str] | None = None, thresholds: Sequence[float] = THRESHOLD_GRID,
                         min_accuracy: float = MIN_ATTRIBUTE_ACCURACY, metric: str = "balanced",
                         batch_size: int = 64, progress: bool = True,
                         vocab: Vocabulary | None = None) -> AttributeRun:
    """Ask the scorer every group's question and select the attributes (nothing is written).

    Args:
        images, labels: N images and their ``(N, 312)`` per-image labels.
        attributes: the attributes to assess (default: all 312, the paper's 28 groups).
    """
    vocab = vocab or load_vocabulary()
    attributes = list(attributes) if attributes else list(vocab.attributes)
    labels = np.asarray(labels)
    if labels.shape != (len(images), vocab.num_attributes):
        raise ValueError(f"labels must be ({len(images)}, {vocab.num_attributes}), got {labels.shape}")
    columns = [vocab.attribute_index(a) for a in attributes]
    probs = attribute_probabilities(scorer, images, attributes, vocab, batch_size, progress)
    selection = select_attributes(probs, labels[:, columns], attributes, thresholds, min_accuracy, metric)
    return AttributeRun(selection, probs)


def write_attribute_report(selection: AttributeSelection, out: str | Path) -> Path:
    """``attributes.json``, ``attributes.md`` (per-attribute best threshold and accuracy) and
    ``attributes.png`` (each attribute's best accuracy against the bar, and accuracy over
    the threshold grid); returns the folder."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    kept = set(selection.kept)
    best_t, best_a = selection.best_threshold, selection.best_accuracy
    rows = [[a, int(n), f"{t:.2f}", "n/a" if not np.isfinite(b) else f"{b:.3f}", "yes" if a in kept else "no"]
            for a, n, t, b in zip(selection.attributes, selection.positives, best_t, best_a)]
    lines = ["# Candidate attributes (SUB Sec. 4.2)", "",
             f"{len(kept)} of {len(selection.attributes)} attributes kept: {selection.metric} accuracy >= "
             f"{selection.min_accuracy:.0%} at the best answer-probability threshold of "
             f"{', '.join(f'{t:.2f}' for t in selection.thresholds)} ({selection.images} images).", "",
             markdown_table(["attribute", "images with it", "best threshold", "accuracy", "kept"], rows,
                            align="lrrrl")]
    write_report(out, selection.to_dict(), "\n".join(lines) + "\n", results_name="attributes.json",
                 report_name="attributes.md", nan_as_null=False)
    _attribute_plot(selection, out / "attributes.png")
    return out


def _attribute_plot(selection: AttributeSelection, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    best = np.nan_to_num(selection.best_accuracy, nan=0.0)
    order = np.argsort(-best)
    fig = Figure(figsize=(11, 4), dpi=100)
    FigureCanvasAgg(fig)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    kept = np.isin(np.asarray(selection.attributes)[order], selection.kept)
    left.bar(np.arange(len(order)), best[order], color=np.where(kept, "tab:green", "tab:gray"), width=1.0)
    left.axhline(selection.min_accuracy, color="tab:red", lw=1, label=f"bar {selection.min_accuracy:.2f}")
    left.set(xlabel="attribute (sorted)", ylabel=f"{selection.metric} accuracy at best threshold", ylim=(0, 1.02),
             title=f"{len(selection.kept)} of {len(order)} attributes kept")
    left.legend(loc="lower left")
    thresholds = np.asarray(selection.thresholds)
    for j in order[: min(12, len(order))]:
        right.plot(thresholds, selection.accuracy[j], marker=".", lw=1,
                   label=selection.attributes[j].removeprefix("has_")[:28])
    right.axhline(selection.min_accuracy, color="tab:red", lw=1)
    right.set(xlabel="answer-probability threshold", ylabel="accuracy", title="accuracy over the grid (top 12)")
    right.legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def _read_kept(path: str | Path, argument: str) -> list[str]:
    """The ``kept`` list of a ``classes.json`` / ``attributes.json`` (errors name the file)."""
    try:
        kept = json.loads(read_text_file(Path(path), argument=argument))["kept"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise UsageError(f"not a candidates report with a 'kept' list ({err})", argument=argument, file=path) from None
    if not kept:
        raise UsageError("keeps no candidate, so there is nothing to plan", argument=argument, file=path)
    return list(kept)


@dataclass(frozen=True)
class CandidatePlan:
    """What :func:`plan_candidates` planned: the kept classes and attributes, the pairings, and
    the shape / pattern attributes no class could guide."""

    classes: tuple[str, ...]
    attributes: tuple[str, ...]
    pairings: list
    unguided: tuple[str, ...]


def plan_candidates(classes_file: str | Path, attributes_file: str | Path, class_names: Sequence[str],
                    class_attributes: np.ndarray, images_per_pairing: int | None = None,
                    vocab: Vocabulary | None = None) -> CandidatePlan:
    """Kept classes (``classes_file``) x kept attributes (``attributes_file``) the class lacks by
    ``class_attributes`` (``(C, 312)``, rows in ``class_names`` order); nothing is written."""
    vocab = vocab or load_vocabulary()
    classes = _read_kept(classes_file, "--classes-file")
    attributes = _read_kept(attributes_file, "--attributes-file")
    missing = [c for c in classes if c not in set(class_names)]
    if missing:
        raise UsageError(f"{missing[:3]} not in the class table", argument="--classes-file", file=classes_file)
    pairings = candidate_pairings(classes, attributes, class_names, class_attributes, images_per_pairing, vocab=vocab)
    unguided = sorted({p.target_attribute for p in pairings if p.guide_bird is None
                       and not _is_colour(p.target_attribute, vocab)})
    return CandidatePlan(tuple(classes), tuple(attributes), pairings, tuple(unguided))


def write_plan_report(plan: CandidatePlan, out: str | Path) -> Path:
    """``pairings.jsonl`` (read by ``generate --pairings``) and ``plan.md`` under ``out``; returns ``plan.md``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_pairings(plan.pairings, out / "pairings.jsonl")
    unguided = list(plan.unguided)
    lines = ["# Candidate plan (SUB Sec. 4.2)", "",
             f"{len(plan.classes)} classes x {len(plan.attributes)} attributes -> {len(plan.pairings)} pairings "
             f"(each class without S+ by its class-level labels; the paper: 33 x 45 -> 1,485).", "",
             f"Guide birds: App. B's where it lists one, else the first class showing S+ "
             f"({len(unguided)} shape / pattern attributes have none: {unguided[:5]})." if unguided else
             "Guide birds: App. B's where it lists one, else the first class showing S+; every shape / pattern "
             "attribute has one.", "", "Written: `pairings.jsonl` (read by `concept-grounding generate --pairings`)."]
    (out / "plan.md").write_text("\n".join(lines) + "\n")
    return out / "plan.md"


def _is_colour(attribute: str, vocab: Vocabulary) -> bool:
    from ..tdg.prompts import attribute_category

    return attribute_category(attribute, vocab) == "colour"



# ------------------------------------------------------------------------------ the job
#: the job's steps (``concept-grounding candidates STEP``)
STEPS: tuple[str, ...] = ("classes", "attributes", "plan")
#: the VQA scorers of the attributes step (as in ``filter``)
SCORERS: tuple[str, ...] = ("world-judge", "vlm", "clip", "tiny-clip", "oracle")
_WORLD = ("world_size", "world_seed", "batch_size", "device", "progress")
#: the settings each step reads (its flags); the others keep their defaults
_STEP_SETTINGS: dict[str, tuple[str, ...]] = {
    "classes": ("images", "generate", "flux_model", "steps", "classifier", "per_class", "classes", "min_accuracy",
                *_WORLD),
    "attributes": ("cub_root", "scorer", "vlm_model", "trust_remote_code", "clip_model", "clip_pretrained", "oracle",
                   "attributes", "per_class", "min_accuracy", "metric", *_WORLD),
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
    images: Path | None = setting(None, "folder of generated images with metadata.jsonl {file_name, reference_class} "
                                        "(default: world renders, --per-class per class)", parse=existing_dir)
    generate: str | None = setting(None, "generate the images with a Flux prompted 'A photo of a {class}' (SUB Sec. "
                                         "4.2): the shipped world Flux or the tiny random one (default: world renders)",
                                   choices=("world", "tiny"))
    flux_model: str | None = setting(None, "a FLUX Hub id or folder to generate with instead (--generate's pretrained "
                                           "form)")
    steps: int = setting(28, "denoising steps of --generate / --flux-model", parse=positive_int)
    classifier: str | None = setting(None, "world-judge (default), a saved world-judge folder, file.py:factory / "
                                           "module:factory (returns images -> CUB class names or indices), or a "
                                           "transformers image classifier")
    cub_root: Path | None = setting(None, "a CUB_200_2011 tree: the attributes step reads its per-image labels "
                                          "(default: world renders with exact labels), the plan its class-level "
                                          "labels, which give S- (default: the world's)", parse=existing_dir)
    scorer: str = setting("world-judge", "the VQA scorer (as in `filter`)", choices=SCORERS)
    vlm_model: str | None = setting(None, "transformers VLM id or folder (--scorer vlm)")
    trust_remote_code: bool = setting(False, "let --vlm-model run its own code", action="store_true")
    clip_model: str = setting("ViT-B-32", "open_clip architecture (--scorer clip)")
    clip_pretrained: str = setting("openai", "open_clip weights tag (--scorer clip)")
    oracle: str | None = setting(None, "'module:function' or a concept model folder (--scorer oracle)")
    attributes: tuple[str, ...] | None = setting(None, "attributes to assess (default: all 312)", nargs="*",
                                                 parse=attribute_name, convert=tuple_or_none)
    per_class: int | None = setting(None, "world renders per class", parse=positive_int)
    classes: tuple[str, ...] | None = setting(None, "world classes (default: SUB's 33)", nargs="*", parse=class_name,
                                              convert=tuple_or_none)
    min_accuracy: float | None = setting(None, "keep a class at this accuracy (classes); keep an attribute at this "
                                               "accuracy at its best threshold (attributes)",
                                         parse=closed_unit_interval)
    metric: str = setting("balanced", "balanced (mean of TPR and TNR) or plain accuracy over all images",
                          choices=("balanced", "accuracy"))
    classes_file: Path | None = setting(None, "classes.json of `candidates classes`", parse=existing_file)
    attributes_file: Path | None = setting(None, "attributes.json of `candidates attributes`", parse=existing_file)
    images_per_pairing: int | None = setting(None, "N written into every pairing (default: generate's "
                                                   "--images-per-pairing)", parse=positive_int)
    world_size: int | None = setting(None, "world renders: side in px (default: 32, the shipped world Flux's and "
                                           "judge's)", parse=positive_int, flag="--size", aliases=("--world-size",))
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
        from ..testing.flux import TinyFlux

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
        return generated_class_images(_flux_source(config), names, config.per_class, config.steps,
                                      seed=config.world_seed, size=config.world_size, progress=config.progress)
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
    from ..models.loading import concept_probability_oracle
    from ..tdg.filter_job import DEFAULT_VLM, FilterConfig, build_scorer

    return build_scorer(FilterConfig(input=Path("."), out=Path("."), scorer=config.scorer,
                                     vlm_model=config.vlm_model or DEFAULT_VLM,
                                     trust_remote_code=config.trust_remote_code, clip_model=config.clip_model,
                                     clip_pretrained=config.clip_pretrained, oracle=config.oracle,
                                     oracle_loader=concept_probability_oracle))


def run_candidates(config: CandidatesConfig) -> CandidatesResult:
    """Run ``config.step`` (module docstring); nothing is written (:meth:`CandidatesResult.save` writes)."""
    if config.step == "classes":
        images, labels, names = _class_images(config)
        classifier = _classifier(config.classifier, names, config.device)
        return CandidatesResult(config, classes=class_candidates(images, labels, names, classifier, config.min_accuracy,
                                                                 config.batch_size, config.progress))
    if config.step == "attributes":
        scorer = _attribute_scorer(config)
        if config.cub_root is not None:
            images, truth = cub_attribute_data(config.cub_root, progress=config.progress)
        else:
            images, truth = world_attribute_data(config.per_class, config.world_size, config.world_seed,
                                                 class_names=config.classes)
        return CandidatesResult(config, attributes=attribute_candidates(
            images, truth, scorer, config.attributes, min_accuracy=config.min_accuracy, metric=config.metric,
            batch_size=config.batch_size, progress=config.progress))
    if config.class_table is not None:
        names, table = config.class_table
    else:
        world = candidate_world(config.classes, seed=config.world_seed)
        names, table = tuple(world.class_names), world.class_attributes
    return CandidatesResult(config, plan=plan_candidates(config.classes_file, config.attributes_file, names, table,
                                                         config.images_per_pairing))
