"""Class-level attribute labels by majority vote, as the CBM paper builds them.

Koh et al. (2020, "Concept Bottleneck Models", Sec. 4 / App. A) denoise CUB's per-image
attribute labels by majority vote within each class, then keep the attributes that are
on for at least 10 classes, which yields the 112 attributes every CBM on CUB uses.
Their reference code (``yewsiang/ConceptBottleneck``, ``CUB/generate_new_data.py``,
``get_class_attributes_data``) fixes the details this module reproduces exactly:

1. Votes: for class ``k`` and attribute ``j``, count the images of ``k`` labelled present
   (``n1``) and absent (``n0``). A label "absent" with certainty 1 (CUB's "not visible")
   casts no vote; a label "present" always votes, whatever its certainty.
2. Majority: the class label is 1 when ``n1 >= n0`` -- ties, including ``n1 = n0 = 0``,
   count as present (their code sets ``argmax = 1`` wherever ``argmin == argmax``).
3. Keep mask: attribute ``j`` is kept when its class label is 1 for at least
   ``min_class_count`` classes (10 in the paper).

The caller chooses which images vote; :func:`~concept_grounding.loaders.load_cub` passes
the training split (Koh et al. vote over their training images).
"""

from __future__ import annotations

import numpy as np

__all__ = ["class_level_labels"]

#: CUB certainty id meaning "not visible" (``attributes/certainties.txt``: 1 not visible,
#: 2 guessing, 3 probably, 4 definitely).
NOT_VISIBLE = 1


def class_level_labels(
    attributes: np.ndarray,
    labels: np.ndarray,
    num_classes: int,
    *,
    certainty: np.ndarray | None = None,
    min_class_count: int | None = 10,
) -> tuple[np.ndarray, np.ndarray]:
    """CBM majority-vote class labels and the attribute keep mask.

    Args:
        attributes: (N, A) 0/1 per-image labels of the voting images.
        labels: (N,) 0-based class of each image.
        num_classes: C, number of classes (rows of the result).
        certainty: (N, A) CUB certainty ids 1-4, or ``None`` (every label votes).
        min_class_count: keep an attribute on for at least this many classes; ``None``
            keeps every attribute (small worlds with fewer than 10 classes).

    Returns:
        ``(class_attributes, keep)``: (C, A) uint8 majority labels (ties and classes
        without votes give 1, as in the CBM code) and (A,) bool keep mask.

    >>> a = np.array([[1, 0], [1, 1], [0, 0], [0, 1], [0, 1]], dtype=np.uint8)
    >>> y = np.array([0, 0, 0, 1, 1])
    >>> cls, keep = class_level_labels(a, y, 2, min_class_count=2)
    >>> cls.tolist(), keep.tolist()
    ([[1, 0], [0, 1]], [False, False])
    >>> class_level_labels(a, y, 2, min_class_count=1)[1].tolist()
    [True, True]
    """
    attributes = np.asarray(attributes)
    labels = np.asarray(labels)
    if attributes.ndim != 2:
        raise ValueError(f"attributes must be (N, A), got shape {attributes.shape}")
    n, a = attributes.shape
    if labels.shape != (n,):
        raise ValueError(f"labels must have shape ({n},), got {labels.shape}")
    if n and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"labels must lie in 0..{num_classes - 1}, found {labels.min()}..{labels.max()}")
    if attributes.size and (attributes.min() < 0 or attributes.max() > 1):
        raise ValueError("attributes must hold only 0 and 1")
    present = attributes == 1
    votes_absent = ~present
    if certainty is not None:
        certainty = np.asarray(certainty)
        if certainty.shape != attributes.shape:
            raise ValueError(f"certainty must have shape {attributes.shape}, got {certainty.shape}")
        votes_absent &= certainty != NOT_VISIBLE
    cell = labels.astype(np.int64)[:, None] * a + np.arange(a)[None, :]  # (N, A) flat (class, attribute) index
    n1 = np.bincount(cell[present], minlength=num_classes * a).reshape(num_classes, a)
    n0 = np.bincount(cell[votes_absent], minlength=num_classes * a).reshape(num_classes, a)
    class_attributes = (n1 >= n0).astype(np.uint8)
    keep = np.ones(a, dtype=bool) if min_class_count is None else class_attributes.sum(axis=0) >= int(min_class_count)
    return class_attributes, keep
