"""The bench's ConceptBed step: CCD of the SUB counterfactuals against real test birds."""

from __future__ import annotations

from typing import Any

import numpy as np

from .context import Split
from .data import BenchData

__all__ = ["ccd_analysis"]


def ccd_analysis(oracle_name: str, oracle, data: BenchData, test: Split, sub_images) -> dict[str, Any]:
    """ConceptBed's CCD of the SUB images against real test images, per reference class.

    The oracle is a trained concept model's class softmax: ``f(y_c | x)`` for the reference
    class ``c``. CCD > 0 means the counterfactuals look less like their class to the oracle
    than real birds of that class do (they deviate); 0 means no difference.
    """
    import torch

    from ..metrics import concept_confidence_deviation
    from ..models import predict

    gen = torch.softmax(predict(oracle, sub_images).class_logits, dim=1).numpy()
    real = torch.softmax(predict(oracle, test.images).class_logits, dim=1).numpy()
    gen_labels = np.array([data.class_names.index(c) for c in data.sub["reference_class"]])
    out = {"oracle": oracle_name}
    for reduction in ("per_concept", "pooled"):
        res = concept_confidence_deviation(gen, gen_labels, real, test.labels.numpy(), reduction=reduction)
        out[reduction] = {k: res[k] for k in ("ccd", "accuracy", "msp", "ece", "real_accuracy")}
    return out
