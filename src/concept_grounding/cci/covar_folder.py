"""An image folder's objects and foreground masks as COVAR's objects (``covar --images``); docs/covar.md."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["folder_objects"]


def folder_objects(
    root: str, class_names_file: str | None, count: int, size: int, segmenter: Any = None
) -> tuple[list, list[str], dict[str, float]]:
    """``count`` images of an image folder (the classes taking turns) with their masks, resized to
    ``size x size`` (image bilinear, mask nearest), as objects for :func:`~.covar.build_covar`
    (``image``, ``mask``, ``label``; no parts); the class names; and, where the folder has masks
    and a ``segmenter`` computed them too, their agreement (mean IoU, pixel agreement).

    Masks: the folder's ``masks/<class>/<stem>.png`` when it has them, else computed by
    ``segmenter`` (a :class:`~.segment.GroundedSegmenter`, prompted with the class caption).
    ``UsageError`` naming ``--images`` when neither gives a mask."""
    from types import SimpleNamespace

    from PIL import Image

    from concept_grounding.errors import UsageError
    from concept_grounding.models.clip import class_caption

    from .layouts import read_image_folder

    data = read_image_folder(root, class_names_file)
    if data.masks is None and segmenter is None:
        raise UsageError(
            f"{root} has no masks/ folder: COVAR needs each object's foreground mask "
            "(masks/<class>/<stem>.png, 255 = object) or a segmenter (--detector, --segmenter)",
            argument="--images",
        )
    rank = np.zeros(len(data.paths), int)  # position of each image inside its class: classes take turns
    for label in np.unique(data.labels):
        rank[data.labels == label] = np.arange(int((data.labels == label).sum()))
    objects, ious, agree = [], [], []
    for i in sorted(range(len(data.paths)), key=lambda j: (rank[j], data.labels[j]))[:count]:
        picture = Image.open(data.paths[i]).convert("RGB")
        given = None
        if data.masks is not None:
            if not data.masks[i].is_file():
                raise UsageError(f"no mask for {data.paths[i].name}", argument="--images", file=data.masks[i])
            given = np.asarray(Image.open(data.masks[i]).convert("L")) > 127
        computed = (
            None
            if segmenter is None
            else segmenter(picture, class_caption(data.class_names[int(data.labels[i])]), source=data.paths[i])
        )
        if given is not None and computed is not None:
            union = (given | computed).sum()
            ious.append(float((given & computed).sum() / union) if union else 1.0)
            agree.append(float((given == computed).mean()))
        mask = given if given is not None else computed
        image = np.asarray(picture.resize((size, size), Image.BILINEAR))
        mask = np.asarray(Image.fromarray(mask.astype(np.uint8) * 255).resize((size, size), Image.NEAREST)) > 127
        objects.append(
            SimpleNamespace(image=image, mask=mask, label=int(data.labels[i]), part_xy=None, part_visible=None)
        )
    agreement = (
        {"mask_iou": float(np.mean(ious)), "pixel_agreement": float(np.mean(agree)), "images": len(ious)}
        if ious
        else {}
    )
    return objects, list(data.class_names), agreement
