"""One registry of image judges, as timm's ``create_model``: ``@register_judge("name")`` on a
factory, ``create_judge(name, **kwargs)``, ``list_judges()`` (docs/judges.md).

>>> "world-judge" in list_judges() and "composition-judge" in list_judges()
True
>>> create_judge("no-such-judge")
Traceback (most recent call last):
ValueError: judge: unknown name 'no-such-judge'; known: composition-judge, concept-model, conceptbed-attributes, ...
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["register_judge", "create_judge", "list_judges", "judge_of", "attribute_judge"]

#: The modules whose import registers this package's judges.
JUDGE_MODULES = ("model", "composition", "concept_model", "conceptbed")

_FACTORIES: dict[str, Callable[..., Any]] = {}
F = TypeVar("F", bound=Callable[..., Any])


def register_judge(name: str) -> Callable[[F], F]:
    """Register ``factory(**kwargs) -> ImageJudge`` under ``name`` (a name registers once)."""

    def decorate(factory: F) -> F:
        if _FACTORIES.get(name, factory) is not factory:
            raise ValueError(f"judge: {name!r} is already registered")
        _FACTORIES[name] = factory
        return factory

    return decorate


def _load_package_judges() -> None:
    for module in JUDGE_MODULES:
        importlib.import_module(f"{__package__}.{module}")


def list_judges() -> list[str]:
    """The registered judges' names, sorted."""
    _load_package_judges()
    return sorted(_FACTORIES)


def create_judge(name: str, **kwargs: Any) -> Any:
    """The judge registered as ``name``, built with ``kwargs`` (e.g. ``path=`` a saved folder)."""
    known = list_judges()
    if name not in _FACTORIES:
        raise ValueError(f"judge: unknown name {name!r}; known: {', '.join(known)}")
    return _FACTORIES[name](**kwargs)


def judge_of(spec: str, **kwargs: Any) -> Any:
    """The judge ``spec`` names: a registered name, or a saved folder (a world judge's, or a
    concept model's from ``bench``), built with ``kwargs``.

    >>> judge_of("no/such/folder")
    Traceback (most recent call last):
    ValueError: judge: 'no/such/folder' is neither a registered judge nor a saved judge or concept model folder
    """
    from pathlib import Path

    folder = Path(spec)
    if (folder / "config.json").is_file():
        name = _folder_judge(folder)
        if name is None:
            raise ValueError(f"judge: {spec} holds no saved judge or concept model (config.json)")
        return create_judge(name, path=folder, **kwargs)
    if spec in list_judges():
        return create_judge(spec, **kwargs)
    raise ValueError(f"judge: {spec!r} is neither a registered judge nor a saved judge or concept model folder")


def _folder_judge(folder: Any) -> str | None:
    """The registered judge that loads ``folder``, from its ``config.json`` (no torch)."""
    import json

    from ..models.loading import concept_model_class_name

    if concept_model_class_name(folder):
        return "concept-model"
    keys = set(json.loads((folder / "config.json").read_text()))
    if {"class_names", "image_size"} <= keys:
        return "world-judge"
    if {"num_classes", "image_size", "width"} <= keys:
        return "composition-judge"
    return None


def attribute_judge(spec: str) -> Callable[[Any], Any]:
    """``images -> (N, 312)`` attribute probabilities of the judge ``spec`` names
    (:func:`judge_of`): the attribute judge of the VQA filter (``filter --scorer oracle``)."""
    judge = judge_of(spec)
    if "attributes" not in judge.head_sizes:
        raise ValueError(f"judge: {spec!r} has no attributes head (heads: {', '.join(judge.head_sizes)})")
    return lambda images: judge.probabilities(images)["attributes"]
