"""The inputs of SUB's candidate selection (:mod:`.candidates`): the image classifier of the
classes step (:func:`load_classifier`, :func:`as_classifier`), the world judge as the attributes
step's VQA scorer (:func:`world_judge_scorer`), and the images with their labels: world renders,
a Flux's images, a folder of generated images, a CUB tree."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError, read_text_file
from ..tdg.candidates import IMAGES_PER_CLASS
from ..vocabulary import Vocabulary, load_vocabulary

__all__ = [
    "CLASS_PROMPT",
    "WORLD_JUDGE",
    "Classifier",
    "as_classifier",
    "load_classifier",
    "world_judge_scorer",
    "candidate_world",
    "world_class_images",
    "generated_class_images",
    "read_class_images",
    "world_attribute_data",
    "cub_attribute_data",
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
    from ..judge import create_judge

    judge = create_judge("world-judge", path=folder)
    to_ours = _indices(judge.class_names, class_names)

    def classify(images: Sequence[Any]) -> np.ndarray:
        return to_ours[judge.probabilities(images)["species"].argmax(1)]

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
        raise UsageError(
            f"none of the model's {len(labels)} labels (e.g. {labels[:3]}) names a CUB class", argument="--classifier"
        )

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
    (:class:`~concept_grounding.tdg.filter_scorers.AttributeJudgeScorer`), its inputs resized to its side."""
    from ..judge import attribute_judge
    from ..tdg.filter_scorers import AttributeJudgeScorer

    return AttributeJudgeScorer(attribute_judge(folder or "world-judge"))


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

    config = replace(
        TRAINING_WORLD,
        seed=seed,
        class_names=tuple(class_names) if class_names else None,
        image_size=image_size or TRAINING_WORLD.image_size,
    )
    return BirdWorld(config)


def world_class_images(
    class_names: Sequence[str] | None, per_class: int = IMAGES_PER_CLASS, image_size: int | None = None, seed: int = 0
) -> tuple[list[Any], np.ndarray, tuple[str, ...]]:
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


def generated_class_images(
    source: Any,
    class_names: Sequence[str],
    per_class: int = IMAGES_PER_CLASS,
    num_inference_steps: int = 28,
    guidance_scale: float = 3.5,
    seed: int = 0,
    size: int | None = None,
    progress: bool = True,
) -> tuple[list[Any], np.ndarray, tuple[str, ...]]:
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
        generators = [
            torch.Generator(device=device).manual_seed(seed * 100_003 + c * 1_009 + i) for i in range(per_class)
        ]
        out = FluxPipeline.__call__(
            pipe,
            prompt=CLASS_PROMPT.format(name=class_display_name(name)),
            num_images_per_prompt=per_class,
            num_inference_steps=num_inference_steps,
            guidance_scale=guidance_scale,
            height=side,
            width=side,
            max_sequence_length=model.max_sequence_length,
            generator=generators,
            output_type="pil",
            **model.extra,
        )
        images += list(out.images)
        labels += [c] * per_class
    return images, np.asarray(labels, dtype=np.int64), tuple(class_names)


def read_class_images(
    folder: str | Path, vocab: Vocabulary | None = None
) -> tuple[list[Any], np.ndarray, tuple[str, ...]]:
    """Generated images of ``folder/metadata.jsonl`` (``file_name``, ``reference_class``):
    ``(PIL images, (N,) class index, class names in first-seen order)``; errors name the line."""
    from PIL import Image

    vocab = vocab or load_vocabulary()
    folder = Path(folder)
    path = folder / "metadata.jsonl"
    if not path.is_file():
        raise UsageError(
            "no metadata.jsonl here",
            argument="--images",
            file=folder,
            hint="give a folder of images with metadata.jsonl rows {file_name, reference_class}",
        )
    images, classes = [], []
    for n, line in enumerate(read_text_file(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            name, cls = row["file_name"], vocab.classes[vocab.class_index(row["reference_class"])]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise UsageError(
                f"expected a JSON row with file_name and a CUB reference_class ({err})", file=path, line=n
            ) from None
        if not (folder / name).is_file():
            raise UsageError(f"image {name!r} not found", file=path, line=n)
        images.append(Image.open(folder / name).convert("RGB"))
        classes.append(cls)
    if not images:
        raise UsageError("lists no images", file=path)
    names = tuple(dict.fromkeys(classes))
    return images, np.asarray([names.index(c) for c in classes], dtype=np.int64), names


def world_attribute_data(
    per_class: int = 10, image_size: int | None = None, seed: int = 0, class_names: Sequence[str] | None = None
) -> tuple[list[Any], np.ndarray]:
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
