"""Load any saved concept model by what its ``config.json`` says it is."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["load_concept_model", "concept_model_class_name"]


#: the key of a saved concept model's ``config.json`` that names its class (beside ``num_concepts``)
CONCEPT_MODEL_MARKERS: dict[str, str] = {
    "training_mode": "ConceptBottleneckModel",
    "embedding_size": "ConceptEmbeddingModel",
    "score": "PostHocCBM",
}


def concept_model_class_name(path: str | Path) -> str | None:
    """The class of the concept model saved in folder ``path`` (``"ConceptBottleneckModel"``,
    ``"ConceptEmbeddingModel"``, ``"PostHocCBM"``), read from its ``config.json`` without torch;
    ``None`` when ``path`` is not such a folder. The one check of a concept-model folder.

    >>> concept_model_class_name("no/such/folder") is None
    True
    """
    config_file = Path(path) / "config.json"
    if not config_file.is_file():
        return None
    keys = set(json.loads(config_file.read_text()))
    if "num_concepts" not in keys:
        return None
    return next((cls for marker, cls in CONCEPT_MODEL_MARKERS.items() if marker in keys), None)


def load_concept_model(path: str | Path):
    """A :class:`ConceptBottleneckModel`, :class:`ConceptEmbeddingModel` or :class:`PostHocCBM`
    saved with ``save_pretrained`` (e.g. by ``concept-grounding bench`` under ``models/``).

    Raises:
        ValueError: ``path`` has no ``config.json`` or it is not a concept model's.
    """
    from .cbm import ConceptBottleneckModel
    from .cem import ConceptEmbeddingModel
    from .posthoc import PostHocCBM

    config_file = Path(path) / "config.json"
    if not config_file.is_file():
        raise ValueError(f"{path}: not a saved model folder (no config.json)")
    name = concept_model_class_name(path)
    if name is None:
        keys = sorted(json.loads(config_file.read_text()))
        raise ValueError(f"{path}: config.json is not a CBM, CEM or post-hoc CBM config (keys: {keys})")
    cls = {c.__name__: c for c in (ConceptBottleneckModel, ConceptEmbeddingModel, PostHocCBM)}[name]
    return cls.from_pretrained(str(path)).eval()
