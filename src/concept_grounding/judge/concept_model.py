"""A saved concept model (CBM, CEM, post-hoc CBM) as an attribute judge: its concepts'
probabilities in their CUB columns (docs/judges.md); the bird world's attribute judge of the
VQA filter when a ``bench`` run's model is given (``filter --scorer oracle --oracle <folder>``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import JudgeReport, as_image_array
from .registry import register_judge

if TYPE_CHECKING:
    from ..world import BirdWorld

__all__ = ["ConceptModelJudge", "load_concept_model_judge"]


class ConceptModelJudge:
    """Attribute probabilities ``(N, 312)`` of a concept model: its concepts' probabilities in
    their vocabulary columns, 0.5 (no opinion) elsewhere.

    Args:
        model: a loaded concept model that records its ``concept_names``.
        image_size: the side its inputs are resized to (bilinear), in pixels.
    """

    name = "concept-model"
    #: balanced attribute accuracy on world renders before its answers are used
    bar = 0.95

    def __init__(self, model: Any, image_size: int = 64) -> None:
        from ..vocabulary import load_vocabulary

        names = list(model.concept_names or ())
        if not names:
            raise ValueError("model: the concept model does not record its concept names")
        self.model, self.image_size, self.vocab = model, int(image_size), load_vocabulary()
        self.columns = self.vocab.attribute_indices(names)

    @property
    def head_sizes(self) -> dict[str, int]:
        return {"attributes": self.vocab.num_attributes}

    def probabilities(self, images: np.ndarray | Sequence) -> dict[str, np.ndarray]:
        """``attributes`` ``(N, 312)`` on uint8 ``(N, H, W, 3)`` images or PIL images."""
        from ..models.base import predict_concepts
        from ..models.data import images_to_tensor

        images = list(as_image_array(images)) if isinstance(images, np.ndarray) else list(images)
        out = np.full((len(images), self.vocab.num_attributes), 0.5)
        if images:
            out[:, self.columns] = predict_concepts(self.model, images_to_tensor(images, self.image_size)).numpy()
        return {"attributes": out}

    def __call__(self, images: Sequence[Any]) -> np.ndarray:
        """``(N, 312)`` attribute probabilities: the VQA filter's attribute-judge callable."""
        return self.probabilities(images)["attributes"]

    def validate(self, world: BirdWorld | None = None, per_class: int = 2) -> JudgeReport:
        """Balanced attribute accuracy (mean over its world-drawn columns of ``(TPR + TNR) / 2``)
        on ``per_class`` held-out renders per class of ``world`` (default: SUB's species, 32 px)."""
        from ..world import BirdWorld, WorldConfig
        from .data import VALIDATION_START, typical_renders
        from .validation import balanced_accuracy

        world = world or BirdWorld(WorldConfig(image_size=32))
        renders = typical_renders(world, per_class, VALIDATION_START)
        columns = sorted(set(self.columns) & set(world.rendered_attributes))
        probs = self.probabilities(renders.images)["attributes"]
        balanced = balanced_accuracy(probs[:, columns], renders.attributes[:, columns]) if columns else np.array([0.0])
        accuracy = float(np.nanmean(balanced)) if np.isfinite(balanced).any() else 0.0
        return JudgeReport(self.name, {"attributes": accuracy}, self.bar, len(renders))


@register_judge("concept-model")
def load_concept_model_judge(path: str | Path, image_size: int = 64) -> ConceptModelJudge:
    """The concept model saved in ``path`` (``save_pretrained``, e.g. by ``bench``) as a judge."""
    from ..models.loading import load_concept_model

    return ConceptModelJudge(load_concept_model(path), image_size)
