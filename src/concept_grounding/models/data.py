"""Datasets in our schema -> tensors the concept models train on.

Every model in :mod:`concept_grounding.models` trains on a :class:`ConceptTensors`:
images ``(N, 3, H, W)`` float in ``[0, 1]``, concept targets ``(N, L)`` float in
``[0, 1]`` and class labels ``(N,)`` long. :func:`to_tensors` builds one from any split
with :func:`concept_grounding.schema.cub_features` columns (the bird world, CUB).

:func:`toy_concept_dataset` makes a tiny ``datasets.Dataset`` in that schema whose
concepts are known by construction (a coloured square; its colour is the concept), for
tests and examples that must not wait for the world renderer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch

from ..vocabulary import Vocabulary, load_vocabulary

if TYPE_CHECKING:
    import datasets

__all__ = ["ConceptTensors", "images_to_tensor", "to_tensors", "toy_concept_dataset"]

#: colour name -> RGB of the toy squares; each is a value of CUB's ``has_primary_color`` group.
TOY_COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "blue": (30, 60, 220),
    "yellow": (230, 210, 20),
    "green": (30, 170, 50),
}


@dataclass
class ConceptTensors:
    """Images, concept targets and labels of one split, plus what the columns mean.

    Unpacks as the triple ``images, concepts, labels``.

    Attributes:
        images: ``(N, 3, H, W)`` float32 in ``[0, 1]``.
        concepts: ``(N, L)`` float32 in ``[0, 1]`` (0/1 for CUB and the world).
        labels: ``(N,)`` int64 class indices.
        concept_indices: the ``L`` 0-based vocabulary indices of the concept columns.
        concept_names: the ``L`` attribute names.
        class_names: class names of the label column (``K`` of them).
    """

    images: torch.Tensor
    concepts: torch.Tensor
    labels: torch.Tensor
    concept_indices: tuple[int, ...] = ()
    concept_names: tuple[str, ...] = ()
    class_names: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        n = self.images.shape[0]
        if self.images.ndim != 4 or self.images.shape[1] != 3:
            raise ValueError(f"images must be (N, 3, H, W), got {tuple(self.images.shape)}")
        if self.concepts.ndim != 2 or self.concepts.shape[0] != n:
            raise ValueError(f"concepts must be (N={n}, L), got {tuple(self.concepts.shape)}")
        if self.labels.ndim != 1 or self.labels.shape[0] != n:
            raise ValueError(f"labels must be (N={n},), got {tuple(self.labels.shape)}")
        if self.concept_names and len(self.concept_names) != self.concepts.shape[1]:
            raise ValueError(
                f"concept_names has {len(self.concept_names)} names but concepts has {self.concepts.shape[1]} columns"
            )

    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter((self.images, self.concepts, self.labels))

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def num_concepts(self) -> int:
        return int(self.concepts.shape[1])

    @property
    def num_classes(self) -> int:
        """``K``: the class names' count if known, else ``max(label) + 1``."""
        if self.class_names:
            return len(self.class_names)
        return int(self.labels.max().item()) + 1 if len(self) else 0

    def subset(self, index: torch.Tensor | Sequence[int]) -> ConceptTensors:
        """Rows ``index`` of every tensor (names kept)."""
        index = torch.as_tensor(index, dtype=torch.long)
        return ConceptTensors(
            self.images[index],
            self.concepts[index],
            self.labels[index],
            self.concept_indices,
            self.concept_names,
            self.class_names,
        )


def training_tensors(
    tensors: ConceptTensors | Sequence[torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[str, ...], int]:
    """``(images, concepts, labels, concept_names, num_classes)`` of what a trainer takes: a
    :class:`ConceptTensors`, or a plain ``(images, concepts, labels)`` triple (names ``()``,
    ``K = max(label) + 1``).

    >>> images, concepts, labels = torch.zeros(4, 3, 8, 8), torch.zeros(4, 2), torch.tensor([0, 2, 1, 2])
    >>> training_tensors((images, concepts, labels))[3:]
    ((), 3)
    >>> training_tensors(ConceptTensors(images, concepts, labels, (5, 9), ("a", "b"), ("x", "y", "z", "w")))[3:]
    (('a', 'b'), 4)
    """
    images, concepts, labels = tuple(tensors)
    names = tuple(getattr(tensors, "concept_names", ()) or ())
    return images, concepts, labels, names, getattr(tensors, "num_classes", int(labels.max()) + 1)


def resolve_concept_indices(
    concept_indices: Sequence[int] | Sequence[str] | str | None, vocab: Vocabulary
) -> tuple[int, ...]:
    """0-based attribute indices from indices, attribute names, ``"all"``/``None`` (312) or ``"cbm_112"``.

    >>> resolve_concept_indices(["has_crown_color::black", 3], load_vocabulary())
    (304, 3)
    >>> len(resolve_concept_indices("cbm_112", load_vocabulary()))
    112
    """
    if concept_indices is None or concept_indices == "all":
        return tuple(range(vocab.num_attributes))
    if concept_indices == "cbm_112":
        return tuple(vocab.cbm_112)
    if isinstance(concept_indices, str):
        raise ValueError(f"concept_indices must be 'all', 'cbm_112' or a list, got {concept_indices!r}")
    out = []
    for c in concept_indices:
        i = vocab.attribute_index(c) if isinstance(c, str) else int(c)
        if not 0 <= i < vocab.num_attributes:
            raise ValueError(f"concept index {i} is outside the vocabulary (0..{vocab.num_attributes - 1})")
        out.append(i)
    if not out:
        raise ValueError("concept_indices is empty: a concept model needs at least one concept")
    return tuple(out)


def _image_to_array(image, image_size: int) -> np.ndarray:
    from PIL import Image

    if not isinstance(image, Image.Image):
        image = Image.fromarray(np.asarray(image))
    image = image.convert("RGB")
    if image.size != (image_size, image_size):
        image = image.resize((image_size, image_size), Image.BILINEAR)
    return np.asarray(image, dtype=np.uint8)


def images_to_tensor(images: Sequence[Any], image_size: int) -> torch.Tensor:
    """``(N, 3, image_size, image_size)`` float32 in [0, 1] from PIL images or ``(H, W, 3)``
    uint8 arrays (converted to RGB, bilinear resize)."""
    arr = np.stack([_image_to_array(im, int(image_size)) for im in images])
    return torch.from_numpy(arr).permute(0, 3, 1, 2).float().div_(255.0).contiguous()


def to_tensors(
    dataset: datasets.Dataset,
    concept_indices: Sequence[int] | Sequence[str] | str | None = None,
    image_size: int = 64,
    label_source: Literal["image", "class"] = "image",
    vocab: Vocabulary | None = None,
) -> ConceptTensors:
    """Tensors of one split in the :func:`~concept_grounding.schema.cub_features` schema.

    Args:
        dataset: a ``datasets.Dataset`` (one split) with columns ``image``, ``label`` and
            ``attributes`` (``label_source="image"``) or ``class_attributes`` (``"class"``).
        concept_indices: which of the 312 attributes become the ``L`` concept columns:
            0-based indices, attribute names, ``"cbm_112"`` or ``None``/``"all"``.
        image_size: images are resized (bilinear) to ``image_size x image_size`` pixels.
        label_source: ``"image"`` uses per-image labels, ``"class"`` the class-level
            vector (the CBM convention of Koh et al. 2020 on CUB).
        vocab: the vocabulary (packaged one by default).

    Returns:
        :class:`ConceptTensors` with images ``(N, 3, image_size, image_size)`` in ``[0, 1]``,
        concepts ``(N, L)`` float32, labels ``(N,)`` int64.

    Raises:
        ValueError: a needed column is missing, or ``label_source`` is unknown.
    """
    vocab = vocab or load_vocabulary()
    if label_source not in ("image", "class"):
        raise ValueError(f"label_source must be 'image' or 'class', got {label_source!r}")
    if isinstance(getattr(dataset, "column_names", None), dict):
        raise ValueError("to_tensors takes one split (a datasets.Dataset), not a DatasetDict: pass dataset['train']")
    concept_column = "attributes" if label_source == "image" else "class_attributes"
    columns = set(getattr(dataset, "column_names", []) or [])
    missing = [c for c in ("image", "label", concept_column) if c not in columns]
    if missing:
        raise ValueError(
            f"dataset is missing column(s) {missing} needed for label_source={label_source!r}; "
            f"it has {sorted(columns)} (expected the concept_grounding.schema.cub_features layout)"
        )
    if int(image_size) < 8:
        raise ValueError(f"image_size must be >= 8 pixels, got {image_size}")
    idx = resolve_concept_indices(concept_indices, vocab)
    concepts_all = np.asarray(dataset[concept_column], dtype=np.float32)
    if concepts_all.ndim != 2 or concepts_all.shape[1] != vocab.num_attributes:
        raise ValueError(
            f"column {concept_column!r} must hold {vocab.num_attributes} labels per row, got shape {concepts_all.shape}"
        )
    images_t = images_to_tensor(dataset["image"], image_size)
    label_feature = dataset.features.get("label") if hasattr(dataset, "features") else None
    class_names = tuple(getattr(label_feature, "names", ()) or ())
    return ConceptTensors(
        images=images_t,
        concepts=torch.from_numpy(concepts_all[:, list(idx)].copy()),
        labels=torch.as_tensor(np.asarray(dataset["label"]), dtype=torch.long),
        concept_indices=idx,
        concept_names=tuple(vocab.attributes[i] for i in idx),
        class_names=class_names,
    )


def toy_concept_dataset(
    n_per_class: int = 8, image_size: int = 32, seed: int = 0, vocab: Vocabulary | None = None
) -> datasets.Dataset:
    """A tiny split in the ``cub_features`` schema: one coloured square per image.

    Class ``k`` is the colour ``list(TOY_COLOURS)[k]``; the square's colour is set in
    ``has_primary_color::<colour>`` (per image and class level), its position and
    size are random, the background is grey noise. Classes are named after CUB's
    first four classes so the ``ClassLabel`` is valid.

    >>> ds = toy_concept_dataset(n_per_class=2, image_size=16)
    >>> len(ds), ds[0]["image"].size, sum(ds[0]["attributes"])
    (8, (16, 16), 1)
    """
    import datasets

    from ..schema import cub_features

    vocab = vocab or load_vocabulary()
    rng = np.random.default_rng(seed)
    colours = list(TOY_COLOURS)
    classes = list(vocab.classes[: len(colours)])
    rows: dict[str, list] = {k: [] for k in cub_features(classes, vocab)}
    for k, colour in enumerate(colours):
        attrs = np.zeros(vocab.num_attributes, dtype=np.uint8)
        attrs[vocab.attribute_index(f"has_primary_color::{colour}")] = 1
        for _ in range(n_per_class):
            image = rng.integers(90, 150, size=(image_size, image_size, 3)).astype(np.uint8)
            side = int(rng.integers(image_size // 3, image_size // 2 + 1))
            x0, y0 = (int(v) for v in rng.integers(0, image_size - side + 1, size=2))
            image[y0 : y0 + side, x0 : x0 + side] = TOY_COLOURS[colour]
            from PIL import Image

            rows["image_id"].append(len(rows["image_id"]) + 1)
            rows["file_name"].append(f"{classes[k]}/toy_{len(rows['image_id']):04d}.png")
            rows["image"].append(Image.fromarray(image))
            rows["label"].append(k)
            rows["attributes"].append(attrs.tolist())
            rows["certainty"].append([4] * vocab.num_attributes)
            rows["class_attributes"].append(attrs.tolist())
            rows["part_xy"].append(np.zeros((vocab.num_parts, 2), np.float32).tolist())
            rows["part_visible"].append([False] * vocab.num_parts)
            rows["bbox"].append([float(x0), float(y0), float(side), float(side)])
            rows["mask"].append(None)
            rows["part_map"].append(None)
            rows["is_train"].append(True)
    return datasets.Dataset.from_dict(rows, features=cub_features(classes, vocab))
