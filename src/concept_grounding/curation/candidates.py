"""The ``candidates`` jobs: SUB's candidate selection (Sec. 4.2) end to end, with reports.

* :func:`run_class_candidates` -- images per class (a folder of generated images with a
  ``metadata.jsonl`` naming each image's ``reference_class``, or, by default, world renders)
  named by an image classifier (:func:`load_classifier`) -> ``classes.json`` / ``classes.md``.
* :func:`run_attribute_candidates` -- a VQA scorer's answers on a CUB tree (``--cub-root``;
  by default the bird world's renders with their exact per-image labels) -> per-attribute
  accuracy over the threshold grid, ``attributes.json`` / ``attributes.md`` / ``attributes.png``.
* :func:`run_candidate_plan` -- the kept classes x kept attributes the class lacks ->
  ``pairings.jsonl`` for ``generate --pairings`` (with S-, guide birds and N) and ``plan.md``.

The formulas are in :mod:`.candidates`; this module reads, scores and writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError, read_text_file
from ..fileio import write_report
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
    "CLASS_PROMPT", "WORLD_JUDGE", "Classifier", "as_classifier", "load_classifier", "world_judge_scorer",
    "candidate_world", "world_class_images", "generated_class_images", "read_class_images", "run_class_candidates",
    "world_attribute_data", "cub_attribute_data", "run_attribute_candidates", "write_attribute_report",
    "run_candidate_plan",
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


def run_class_candidates(images: Sequence[Any], labels: np.ndarray, class_names: Sequence[str],
                         classifier: Classifier, out: str | Path, min_accuracy: float = MIN_CLASS_ACCURACY,
                         batch_size: int = 64, progress: bool = True) -> ClassSelection:
    """Classify the images in batches, select the classes, write ``classes.json`` and ``classes.md``."""
    from tqdm.auto import tqdm

    predicted = []
    for start in tqdm(range(0, len(images), batch_size), desc="classify", unit="batch", disable=not progress):
        predicted.append(np.asarray(classifier(images[start:start + batch_size]), dtype=np.int64))
    selection = select_classes(labels, np.concatenate(predicted), class_names, min_accuracy)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# Candidate classes (SUB Sec. 4.2)", "",
             f"{len(selection.kept)} of {len(class_names)} classes kept: the classifier named at least "
             f"{min_accuracy:.0%} of each one's {int(selection.counts.min())}-{int(selection.counts.max())} images.", "",
             "| class | images | accuracy | kept |", "|---|---:|---:|---|"]
    lines += [f"| {c} | {int(n)} | {a:.3f} | {'yes' if c in selection.kept else 'no'} |"
              for c, n, a in zip(selection.class_names, selection.counts, selection.accuracy)]
    write_report(out, selection.to_dict(), "\n".join(lines) + "\n", results_name="classes.json",
                 report_name="classes.md", nan_as_null=False)
    return selection


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
    """What :func:`run_attribute_candidates` measured: the selection and the answer probabilities."""

    selection: AttributeSelection
    probabilities: np.ndarray


def run_attribute_candidates(images: Sequence[Any], labels: np.ndarray, scorer: Any, out: str | Path,
                             attributes: Sequence[str] | None = None, thresholds: Sequence[float] = THRESHOLD_GRID,
                             min_accuracy: float = MIN_ATTRIBUTE_ACCURACY, metric: str = "balanced",
                             batch_size: int = 64, progress: bool = True,
                             vocab: Vocabulary | None = None) -> AttributeRun:
    """Ask the scorer every group's question, select the attributes, write the table and the plot.

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
    write_attribute_report(selection, out)
    return AttributeRun(selection, probs)


def write_attribute_report(selection: AttributeSelection, out: str | Path) -> Path:
    """``attributes.json``, ``attributes.md`` (per-attribute best threshold and accuracy) and
    ``attributes.png`` (each attribute's best accuracy against the bar, and accuracy over
    the threshold grid); returns the folder."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    kept = set(selection.kept)
    best_t, best_a = selection.best_threshold, selection.best_accuracy
    lines = ["# Candidate attributes (SUB Sec. 4.2)", "",
             f"{len(kept)} of {len(selection.attributes)} attributes kept: {selection.metric} accuracy >= "
             f"{selection.min_accuracy:.0%} at the best answer-probability threshold of "
             f"{', '.join(f'{t:.2f}' for t in selection.thresholds)} ({selection.images} images).", "",
             "| attribute | images with it | best threshold | accuracy | kept |", "|---|---:|---:|---:|---|"]
    lines += [f"| {a} | {int(n)} | {t:.2f} | {'n/a' if not np.isfinite(b) else f'{b:.3f}'} | "
              f"{'yes' if a in kept else 'no'} |"
              for a, n, t, b in zip(selection.attributes, selection.positives, best_t, best_a)]
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


def run_candidate_plan(classes_file: str | Path, attributes_file: str | Path, class_names: Sequence[str],
                       class_attributes: np.ndarray, out: str | Path, images_per_pairing: int | None = None,
                       vocab: Vocabulary | None = None) -> list:
    """Kept classes x kept attributes the class lacks -> ``<out>/pairings.jsonl`` and ``plan.md``."""
    vocab = vocab or load_vocabulary()
    classes = _read_kept(classes_file, "--classes-file")
    attributes = _read_kept(attributes_file, "--attributes-file")
    missing = [c for c in classes if c not in set(class_names)]
    if missing:
        raise UsageError(f"{missing[:3]} not in the class table", argument="--classes-file", file=classes_file)
    pairings = candidate_pairings(classes, attributes, class_names, class_attributes, images_per_pairing, vocab=vocab)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_pairings(pairings, out / "pairings.jsonl")
    unguided = sorted({p.target_attribute for p in pairings if p.guide_bird is None
                       and not _is_colour(p.target_attribute, vocab)})
    lines = ["# Candidate plan (SUB Sec. 4.2)", "",
             f"{len(classes)} classes x {len(attributes)} attributes -> {len(pairings)} pairings "
             f"(each class without S+ by its class-level labels; the paper: 33 x 45 -> 1,485).", "",
             f"Guide birds: App. B's where it lists one, else the first class showing S+ "
             f"({len(unguided)} shape / pattern attributes have none: {unguided[:5]})." if unguided else
             "Guide birds: App. B's where it lists one, else the first class showing S+; every shape / pattern "
             "attribute has one.", "", "Written: `pairings.jsonl` (read by `concept-grounding generate --pairings`)."]
    (out / "plan.md").write_text("\n".join(lines) + "\n")
    return pairings


def _is_colour(attribute: str, vocab: Vocabulary) -> bool:
    from ..tdg.prompts import attribute_category

    return attribute_category(attribute, vocab) == "colour"

