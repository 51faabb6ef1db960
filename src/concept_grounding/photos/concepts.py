"""Class-level concepts of the photo classes, and the photos as a split for Aysel et al.'s analysis.

:data:`CONCEPTS` are eleven visible traits of the 44 ImageNet animal classes the ``photos`` folder
holds; :data:`CLASS_CONCEPTS` gives each class (its WordNet synset id) the traits it has.

*Source*: general zoology of the animal each ImageNet synset names (its WordNet gloss, e.g.
``n01518878`` "ostrich: fast-running African flightless bird"): body covering (feathers, fur,
scales), appendages (wings, beak, tail, horns, antennae) and the limbs it stands on (two,
four or six legs). Decided by hand, once per class, as CUB's class-level attributes are; no
per-image labels exist, so a class's traits count as present in each of its images.
Conventions: ``four_legs`` is any tetrapod standing on four limbs (apes knuckle-walk, so they
count); ``tail`` a tail that shows in a side view (bears, koalas, wombats and apes: none);
``wings`` includes the insects'; ``fur`` is mammal hair only; a slug and an isopod (fourteen
legs) have none of the leg counts.

>>> len(CLASS_CONCEPTS), CONCEPTS[:3]
(44, ('feathers', 'fur', 'scales'))
>>> class_concept_matrix(["n02056570", "n02129604"]).tolist()   # king penguin, tiger
[[1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 0], [0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0]]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import datasets

__all__ = [
    "CONCEPTS",
    "CLASS_CONCEPTS",
    "REGION_CONCEPTS",
    "class_concept_matrix",
    "concept_parts",
    "body_point",
    "photos_dataset_dict",
]

CONCEPTS: tuple[str, ...] = (
    "feathers",
    "fur",
    "scales",
    "wings",
    "beak",
    "two_legs",
    "four_legs",
    "six_legs",
    "tail",
    "horns",
    "antennae",
)

_BIRD = frozenset({"feathers", "wings", "beak", "two_legs", "tail"})
_MAMMAL = frozenset({"fur", "four_legs", "tail"})
_TAILLESS = frozenset({"fur", "four_legs"})
_HORNED = _MAMMAL | {"horns"}
_INSECT = frozenset({"wings", "six_legs", "antennae"})

#: synset id -> the concepts its animal has (module docstring for the source)
CLASS_CONCEPTS: dict[str, frozenset[str]] = {
    # birds
    "n01514668": _BIRD,
    "n01514859": _BIRD,
    "n01518878": _BIRD,
    "n01582220": _BIRD,
    "n01616318": _BIRD,
    "n01622779": _BIRD,
    "n01806143": _BIRD,
    "n01820546": _BIRD,
    "n01843383": _BIRD,
    "n01847000": _BIRD,
    "n01855672": _BIRD,
    "n02007558": _BIRD,
    "n02012849": _BIRD,
    "n02051845": _BIRD,
    "n02056570": _BIRD,
    # reptile, molluscs, crustacean, insects
    "n01677366": frozenset({"scales", "four_legs", "tail"}),  # common iguana
    "n01945685": frozenset({"antennae"}),  # slug: two pairs of tentacles, no legs
    "n01990800": frozenset({"antennae"}),  # isopod: fourteen legs
    "n02190166": _INSECT,
    "n02206856": _INSECT,
    "n02226429": _INSECT,
    "n02236044": _INSECT,
    # mammals
    "n01882714": _TAILLESS,
    "n01883070": _TAILLESS,  # koala, wombat
    "n02115641": _MAMMAL,
    "n02119022": _MAMMAL,
    "n02129165": _MAMMAL,
    "n02129604": _MAMMAL,
    "n02132136": _TAILLESS,  # brown bear
    "n02356798": _MAMMAL,
    "n02361337": _MAMMAL,
    "n02363005": _MAMMAL,
    "n02391049": _MAMMAL,
    "n02395406": _MAMMAL,
    "n02396427": _MAMMAL,
    "n02398521": _MAMMAL,
    "n02403003": _HORNED,
    "n02410509": _HORNED,
    "n02412080": _HORNED,  # ox, bison, ram
    "n02437312": _MAMMAL,
    "n02443484": _MAMMAL,
    "n02447366": _MAMMAL,
    "n02480855": _TAILLESS,
    "n02481823": _TAILLESS,  # gorilla, chimpanzee
}


#: the concepts whose region is the whole animal (its body covering), so the mask is their region;
#: wings, beak, legs, tail, horns and antennae have no region in the masks and are not located
REGION_CONCEPTS: tuple[str, ...] = ("feathers", "fur", "scales")


def concept_parts() -> list[tuple[int, ...]]:
    """Per concept of :data:`CONCEPTS`, its parts in :func:`photos_dataset_dict`'s ``part_xy``:
    ``(0,)`` (the body point, :func:`body_point`) for :data:`REGION_CONCEPTS`, else ``()``.

    >>> concept_parts()[:4]
    [(0,), (0,), (0,), ()]
    """
    return [(0,) if c in REGION_CONCEPTS else () for c in CONCEPTS]


def body_point(mask: np.ndarray) -> tuple[float, float]:
    """``(x, y)`` in pixels of the mask pixel farthest from the background (the maximum of the Euclidean
    distance transform): a point inside the animal even when its shape is concave, where a centroid
    may fall outside (Aysel et al.'s part centre, for the one part the masks give).

    >>> m = np.zeros((5, 7), bool); m[1:4, 2:5] = True
    >>> body_point(m)
    (3.0, 2.0)
    """
    from scipy.ndimage import distance_transform_edt

    depth = distance_transform_edt(np.pad(np.asarray(mask, bool), 1))[1:-1, 1:-1]
    y, x = np.unravel_index(int(np.argmax(depth)), depth.shape)
    return float(x), float(y)


def class_concept_matrix(synsets: Sequence[str]) -> np.ndarray:
    """``(K, L)`` 0/1 uint8: row ``k`` the :data:`CONCEPTS` of ``synsets[k]``; ``ValueError`` for a class
    the table does not hold."""
    missing = [s for s in synsets if s not in CLASS_CONCEPTS]
    if missing:
        raise ValueError(f"no class-level concepts for {missing[:5]} (photos.concepts.CLASS_CONCEPTS)")
    return np.array([[c in CLASS_CONCEPTS[s] for c in CONCEPTS] for s in synsets], np.uint8)


_SPLIT = re.compile(r"-(easy|hard)-(\d+)\.png$")


def photos_dataset_dict(root: str | Path) -> datasets.DatasetDict:
    """A ``photos`` folder (its ``images`` sub-folder, or that folder itself) as CUB-like
    ``train`` / ``test`` splits for :func:`~concept_grounding.evaluation.posthoc.aysel_analysis`.

    Columns: ``image`` (PIL), ``label`` (class index in ``class_names.txt`` order), ``attributes``
    and ``class_attributes`` ``(L,)`` (both the class's row of :func:`class_concept_matrix`),
    ``part_xy`` ``(1, 2)`` / ``part_visible`` ``(1,)``: the body point of the image's mask
    (``masks/<class>/<file>``, :func:`body_point`; invisible without a mask). Split: each
    cut-out's first composite per subset (``*-easy-0``, ``*-hard-0``) trains, the others test, so
    every class is in both with other backgrounds (*decision*: the same animal cut-out is in both).
    """
    import datasets
    from PIL import Image

    folder = Path(root)
    folder = folder / "images" if (folder / "images" / "class_names.txt").is_file() else folder
    names_file = folder / "class_names.txt"
    if not names_file.is_file():
        raise ValueError(f"--photos {root}: no class_names.txt (write the folder with `concept-grounding photos`)")
    pairs = [line.split(" ", 1) for line in names_file.read_text().splitlines() if line.strip()]
    synsets = [p[0] for p in pairs]
    table = class_concept_matrix(synsets)
    rows: dict[str, dict[str, list]] = {"train": {}, "test": {}}
    masks = folder / "masks"
    for label, synset in enumerate(synsets):
        for path in sorted((folder / synset).glob("*.png")):
            match = _SPLIT.search(path.name)
            split = "train" if match is None or match.group(2) == "0" else "test"
            mask_file = masks / synset / path.name
            mask = np.asarray(Image.open(mask_file).convert("L")) > 127 if mask_file.is_file() else None
            visible = mask is not None and bool(mask.any())
            xy = [list(body_point(mask)) if visible else [0.0, 0.0]]
            for key, value in (
                ("image", Image.open(path).convert("RGB")),
                ("label", label),
                ("attributes", table[label].tolist()),
                ("class_attributes", table[label].tolist()),
                ("part_xy", xy),
                ("part_visible", [visible]),
            ):
                rows[split].setdefault(key, []).append(value)
    if not rows["train"] or not rows["test"]:
        raise ValueError(f"--photos {root}: no images in the class folders")
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "label": datasets.ClassLabel(names=[f"{s}.{n}" for s, n in pairs]),
            "attributes": datasets.Sequence(datasets.Value("uint8")),
            "class_attributes": datasets.Sequence(datasets.Value("uint8")),
            "part_xy": datasets.Sequence(datasets.Sequence(datasets.Value("float32"))),
            "part_visible": datasets.Sequence(datasets.Value("bool")),
        }
    )
    return datasets.DatasetDict({k: datasets.Dataset.from_dict(v, features=features) for k, v in rows.items()})
