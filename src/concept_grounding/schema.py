"""The column layout every dataset in this package shares.

The bird world, ``load_cub`` and the CUB export all produce ``datasets`` rows with
:func:`cub_features`; SUB-style counterfactual sets (the world's, ``load_sub`` and
``concept-grounding generate``) use :func:`sub_features`. Indices are 0-based.

Columns of :func:`cub_features` (``A`` attributes, ``P`` parts):

============== ===================================== =============================================
column         type                                  meaning
============== ===================================== =============================================
image_id       int32                                 1-based id, as CUB's ``images.txt``
file_name      string                                ``"017.Cardinal/Cardinal_0001_17057.jpg"``
image          Image (RGB)                           the photo / rendering
label          ClassLabel                            class
attributes     Sequence(uint8, A)                    per-image attribute labels (0/1)
certainty      Sequence(uint8, A)                    CUB certainty 1-4 (4 = definitely; world: 4)
class_attributes Sequence(uint8, A)                  class-level labels (CBM majority vote)
part_xy        Array2D((P, 2), float32)              part centres (x, y) in pixels
part_visible   Sequence(bool, P)                     part visibility
bbox           Sequence(float32, 4)                  (x, y, width, height) in pixels
mask           Image (L)                             foreground mask, 255 = bird; None if unknown
part_map       Image (L)                             per-pixel part id + 1 (0 = no part); None if unknown
is_train       bool                                  CUB's train/test split flag
============== ===================================== =============================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .vocabulary import Vocabulary, load_vocabulary

if TYPE_CHECKING:  # datasets is imported lazily: importing the package must stay fast
    import datasets

__all__ = ["cub_features", "sub_features"]

SUB_COLUMNS: dict[str, str] = {
    "image": "the counterfactual image",
    "reference_class": "CUB class folder name of the bird that was drawn / prompted",
    "target_attribute": "S+: CUB attribute name that was substituted in (present)",
    "removed_attributes": "S-: the reference class's class-level attributes of the same group (absent)",
    "group": "attribute group of S+ (``crown_color``)",
    "source_id": "id of the unedited image (world) or -1",
    "seed": "generation seed, -1 if unknown",
}


def cub_features(class_names: list[str] | tuple[str, ...], vocab: Vocabulary | None = None) -> datasets.Features:
    """``datasets.Features`` of a CUB-layout split (see the module docstring)."""
    import datasets

    vocab = vocab or load_vocabulary()
    A, P = vocab.num_attributes, vocab.num_parts
    return datasets.Features(
        {
            "image_id": datasets.Value("int32"),
            "file_name": datasets.Value("string"),
            "image": datasets.Image(),
            "label": datasets.ClassLabel(names=list(class_names)),
            "attributes": datasets.Sequence(datasets.Value("uint8"), length=A),
            "certainty": datasets.Sequence(datasets.Value("uint8"), length=A),
            "class_attributes": datasets.Sequence(datasets.Value("uint8"), length=A),
            "part_xy": datasets.Array2D((P, 2), "float32"),
            "part_visible": datasets.Sequence(datasets.Value("bool"), length=P),
            "bbox": datasets.Sequence(datasets.Value("float32"), length=4),
            "mask": datasets.Image(),
            "part_map": datasets.Image(),
            "is_train": datasets.Value("bool"),
        }
    )


def sub_features() -> datasets.Features:
    """``datasets.Features`` of a SUB-schema set (see :data:`SUB_COLUMNS`)."""
    import datasets

    return datasets.Features(
        {
            "image": datasets.Image(),
            "reference_class": datasets.Value("string"),
            "target_attribute": datasets.Value("string"),
            "removed_attributes": datasets.Sequence(datasets.Value("string")),
            "group": datasets.Value("string"),
            "source_id": datasets.Value("int64"),
            "seed": datasets.Value("int64"),
        }
    )
