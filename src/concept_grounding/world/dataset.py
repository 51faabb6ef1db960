"""Export the bird world as ``datasets`` objects with the package's shared Features.

``to_dataset_dict`` gives CUB-layout ``train`` / ``test`` splits
(:func:`concept_grounding.schema.cub_features`); ``sub_dataset`` gives a SUB-schema set
of counterfactuals (:func:`concept_grounding.schema.sub_features`).

Sample ``k * num_classes + c`` is the ``k``-th image of class ``c``; train uses
``k < train_per_class``, test the next ``test_per_class``. ``image_id`` is the sample
index + 1 (unique across splits) and ``file_name`` is
``"<class folder>/<Class>_<index:04d>.png"``.

The exporters take any object with the few members of :class:`ExportableWorld` (a
:class:`~.world.BirdWorld` has them all), so this module does not import the world that
calls it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

import numpy as np
from tqdm.auto import tqdm

from ..schema import cub_features, sub_features
from ..vocabulary import Vocabulary, split_attribute
from .config import WorldConfig
from .sample import BirdSample, Counterfactual
from .species import RenderedVocabulary

if TYPE_CHECKING:
    import datasets

__all__ = ["sample_row", "file_name", "PNG_COMPRESS_LEVEL"]


class ExportableWorld(Protocol):
    """What the exporters read from a world (:class:`~.world.BirdWorld` provides it)."""

    config: WorldConfig
    vocab: Vocabulary
    rendered: RenderedVocabulary
    class_names: tuple[str, ...]
    class_attributes: np.ndarray

    @property
    def num_classes(self) -> int: ...

    def sample(self, index: int) -> BirdSample: ...

    def samples(self, indices: Iterable[int]) -> Iterator[BirdSample]: ...

    def counterfactual(self, sample: BirdSample, target_attribute: str) -> Counterfactual: ...

    def edited(self, index: int, target_attribute: str) -> tuple[BirdSample | None, tuple[str, ...]]: ...

    def default_pairings(self) -> list[tuple[str, str]]: ...


def file_name(class_folder: str, index: int) -> str:
    """``file_name("017.Cardinal", 7) -> "017.Cardinal/Cardinal_0007.png"``.

    >>> file_name("017.Cardinal", 7)
    '017.Cardinal/Cardinal_0007.png'
    """
    return f"{class_folder}/{class_folder.split('.', 1)[-1]}_{index:04d}.png"


#: zlib level of the exported PNGs. The renders are noisy (feather grain, textured
#: backgrounds), so level 1 costs no size over PIL's default 6 and encodes 3-4x faster
#: (``benchmarks/bench_world.py``; figures in docs/guide/development.md).
PNG_COMPRESS_LEVEL = 1


def png_image(array: np.ndarray) -> dict[str, bytes | None]:
    """``(H, W, 3)`` or ``(H, W)`` uint8 -> a ``datasets.Image`` value (lossless PNG bytes at
    :data:`PNG_COMPRESS_LEVEL`); decodes to the same pixels as ``Image.fromarray(array)``.

    >>> import io
    >>> from PIL import Image
    >>> a = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    >>> value = png_image(a)
    >>> value["path"], bool((np.asarray(Image.open(io.BytesIO(value["bytes"]))) == a).all())
    (None, True)
    """
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return {"bytes": buffer.getvalue(), "path": None}


def sample_row(world: ExportableWorld, s: BirdSample, is_train: bool) -> dict:
    """One ``cub_features`` row of a sample (images as PNG, :func:`png_image`)."""
    return {
        "image_id": s.index + 1,
        "file_name": file_name(world.class_names[s.label], s.index),
        "image": png_image(s.image),
        "label": s.label,
        "attributes": s.attributes.tolist(),
        "certainty": [4] * world.vocab.num_attributes,
        "class_attributes": world.class_attributes[s.label].tolist(),
        "part_xy": s.part_xy.astype(np.float32).tolist(),
        "part_visible": s.part_visible.tolist(),
        "bbox": list(s.bbox),
        "mask": png_image(s.mask.astype(np.uint8) * 255),
        "part_map": png_image(s.part_map),
        "is_train": bool(is_train),
    }


def _check_count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return int(value)


def _split(
    world: ExportableWorld, start: int, count: int, is_train: bool, desc: str, progress: bool = True
) -> datasets.Dataset:
    import datasets

    features = cub_features(world.class_names, world.vocab)
    indices = [c + k * world.num_classes for k in range(start, start + count) for c in range(world.num_classes)]
    rows = [
        sample_row(world, s, is_train)
        for s in tqdm(world.samples(indices), total=len(indices), desc=desc, leave=False, disable=not progress)
    ]
    columns = {name: [r[name] for r in rows] for name in features}
    return datasets.Dataset.from_dict(columns, features=features)


def world_dataset_dict(
    world: ExportableWorld, train_per_class: int = 10, test_per_class: int = 5, progress: bool = True
) -> datasets.DatasetDict:
    """Render ``train_per_class`` + ``test_per_class`` images per class into a DatasetDict
    (``progress``: show the render bars)."""
    import datasets

    train_per_class = _check_count("train_per_class", train_per_class)
    test_per_class = _check_count("test_per_class", test_per_class)
    return datasets.DatasetDict(
        {
            "train": _split(world, 0, train_per_class, True, "world train", progress),
            "test": _split(world, train_per_class, test_per_class, False, "world test", progress),
        }
    )


def world_sub_dataset(
    world: ExportableWorld,
    per_pairing: int = 2,
    pairings: list[tuple[str, str]] | None = None,
    progress: bool = True,
) -> datasets.Dataset:
    """SUB-schema counterfactuals: ``per_pairing`` edited birds per (class, S+) pairing.

    Sources are the class's samples ``c, c + C, c + 2C, ...`` in order, skipping any
    bird that already shows the target everywhere in its group (its edit would be a no-op).
    ``removed_attributes`` is S-: the source's values of the group that were switched off.
    ``progress``: show the render bar.
    """
    import datasets

    per_pairing = _check_count("per_pairing", per_pairing)
    pairings = world.default_pairings() if pairings is None else list(pairings)
    rows: dict[str, list] = {name: [] for name in sub_features()}
    for class_name, attribute in tqdm(pairings, desc="world SUB", leave=False, disable=not progress):
        if class_name not in world.class_names:
            raise ValueError(f"pairings: class {class_name!r} is not in this world's class_names")
        world.rendered.parse(attribute)
        label = world.class_names.index(class_name)
        made, k = 0, 0
        while made < per_pairing:
            if k > 50 + 10 * per_pairing:
                raise ValueError(f"pairings: no source bird of {class_name!r} can take {attribute!r}")
            source = label + k * world.num_classes
            edited, removed = world.edited(source, attribute)
            k += 1
            if edited is None:
                continue
            rows["image"].append(png_image(edited.image))
            rows["reference_class"].append(class_name)
            rows["target_attribute"].append(attribute)
            rows["removed_attributes"].append(list(removed))
            rows["group"].append(split_attribute(attribute)[0])
            rows["source_id"].append(source)
            rows["seed"].append(int(world.config.seed))
            made += 1
    return datasets.Dataset.from_dict(rows, features=sub_features())
