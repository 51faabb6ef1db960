"""pytorch-concepts models (PyC: ``pip install pytorch-concepts``, imported as ``torch_concepts``)
as binary concept models.

PyC's models (``ConceptBottleneckModel``, ``ConceptEmbeddingModel`` and the other subclasses
of ``torch_concepts.nn.BaseModel``) are called as ``model(query=[names], input=x)`` and
return an ``InferenceOutput`` whose ``logits`` is an ``AnnotatedTensor``: one column per
queried concept, labelled by the model's ``Annotations``. :class:`PyCConcepts` asks such a
model for its concepts (every annotation label but its ``task_names``), in annotation
order; the adapters read ``output="logits"`` of the answer as a plain ``(B, C)`` tensor
(:func:`plain_tensor`). The labels are the concept names unless the caller declares
others, so they must then be CUB names or SUB spellings (else the error asks for
``concept_names``). Only binary concepts can be scored one column each; a categorical or
continuous concept is refused by name.

Nothing here imports ``torch_concepts``: a PyC model or tensor can only exist once it is
imported, so :func:`is_pyc_model` and :func:`plain_tensor` look it up in ``sys.modules``.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch import nn

from ..errors import UsageError, option
from .concepts import resolve_concept_names

__all__ = []


def is_pyc_model(obj: Any) -> bool:
    """Whether ``obj`` is a pytorch-concepts model (a ``torch_concepts.nn.BaseModel``)."""
    pyc = sys.modules.get("torch_concepts")
    return pyc is not None and isinstance(obj, pyc.nn.BaseModel)


def plain_tensor(value: Any) -> Any:
    """The ``torch.Tensor`` inside a PyC ``AnnotatedTensor``; anything else as it is."""
    pyc = sys.modules.get("torch_concepts")
    return value.tensor if pyc is not None and isinstance(value, pyc.AnnotatedTensor) else value


class PyCConcepts(nn.Module):
    """A PyC model as ``(B, 3, H, W)`` images -> its ``InferenceOutput`` for the ``C`` concepts.

    Attributes:
        model: the PyC model (moved and cast with this module).
        labels: the ``C`` concepts asked for: the model's annotation labels, ``task_names`` left out.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        tasks = set(getattr(model, "task_names", ()))
        self.labels = tuple(c for c in model.concept_names if c not in tasks)
        annotations = model.concept_annotations
        other = [f"{c} ({annotations.concept(c).type})" for c in self.labels if annotations.concept(c).type != "binary"]
        if other:
            raise UsageError(
                f"{type(model).__name__}: SUB scores binary concepts, one column each; this model's "
                f"concepts {other[:3]} are not binary (declare each CUB attribute as a binary concept)"
            )

    def concept_names(self) -> tuple[str, ...]:
        """The labels as CUB attribute names; labels that are none say to declare names instead."""
        try:
            return resolve_concept_names(self.labels)
        except UsageError as err:
            raise UsageError(
                f"{type(self.model).__name__}'s concept labels are not all CUB attribute names: "
                f"{err.reason}; pass {option('concept_names')} with one CUB name per concept, in "
                "annotation order"
            ) from None

    def forward(self, pixels: torch.Tensor) -> Any:
        return self.model(query=list(self.labels), input=pixels)
