"""The example inputs of each metric, as the ``evaluate`` modules name them (``metrics/<name>/``):
the metric Spaces open with them, the Space's Metrics tab offers them, and the cards' examples
compute the same. Plain data: JSON-ready lists, no numpy."""

from __future__ import annotations

from typing import Any

__all__ = ["EXAMPLES", "CONFIG_EXAMPLES"]

#: metric name -> the keyword arguments of its ``evaluate`` module's ``compute``.
EXAMPLES: dict[str, dict[str, Any]] = {
    "concept_confidence_deviation": {
        "predictions": [[0.9, 0.1], [0.7, 0.3], [0.2, 0.8]],
        "references": [0, 0, 1],
        "real_probabilities": [[0.9, 0.1], [0.1, 0.9]],
        "real_labels": [0, 1],
    },
    "concept_existence": {
        "predictions": [0, 1],
        "references": [0, 0],
        "concept_scores": [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
        "concept_labels": [[1, 0, 0], [1, 0, 0]],
        "theta": [[2.0, 0.0], [1.0, 1.0], [0.0, 3.0]],
        "top_l": [1, 2],
    },
    "concept_global_importance": {
        "predictions": [0, 1],
        "references": [0, 1],
        "concept_scores": [[1.0, 0.0], [0.0, 2.0]],
        "theta": [[1.0, -1.0], [0.0, 1.0]],
        "class_attributes": [[1, 0], [0, 1]],
    },
    "concept_location": {
        "predictions": [0],
        "references": [0],
        "concept_scores": [[2.0, 1.0]],
        "concept_maps": [[[[1.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, 0.0]]]],
        "part_xy": [[[0.0, 0.0], [3.0, 3.0]]],
        "part_visible": [[True, True]],
        "theta": [[1.0], [1.0]],
        "concept_parts": [[0], [1]],
        "image_size": [4, 4],
        "alphas": [1],
        "top_l": [1, 2],
    },
    "sub_accuracy": {
        "predictions": [[0.2, 0.9], [0.7, 0.4]],
        "target_attributes": ["has_bill_shape::needle"] * 2,
        "removed_attributes": [["has_bill_shape::dagger"]] * 2,
        "reference_classes": ["017.Cardinal", "073.Blue_Jay"],
        "concept_names": ["has_bill_shape::dagger", "has_bill_shape::needle"],
    },
}

_SUB_ROWS = {
    k: EXAMPLES["sub_accuracy"][k]
    for k in ("target_attributes", "removed_attributes", "reference_classes", "concept_names")
}

#: metric name -> config -> the keyword arguments of ``compute`` under that config (``evaluate.load(name, config)``),
#: the first config being the module's default; the metric Space offers one tab per config.
CONFIG_EXAMPLES: dict[str, dict[str, dict[str, Any]]] = {
    "sub_accuracy": {
        "binary": EXAMPLES["sub_accuracy"],
        "group": {"predictions": [[0.1, 0.3], [0.3, 0.1]], **_SUB_ROWS},
        "group_with_none": {"predictions": [[0.1, 0.3], [0.3, 0.1]], "none_scores": [0.2, 0.2], **_SUB_ROWS},
    },
    "concept_confidence_deviation": {
        "classifier": EXAMPLES["concept_confidence_deviation"],
        "vqa": {
            "predictions": [0.9, 0.3, 0.6],
            "references": [0, 0, 1],
            "real_probabilities": [0.8, 0.7],
            "real_labels": [0, 1],
        },
    },
}
