"""``--model``: a saved folder, a factory in a file or module, or a named CLIP.

:func:`load_model` resolves, in this order:

1. a folder with a ``config.json`` of the project's concept models (``load_concept_model``:
   CBM, CEM, post-hoc CBM) -> :class:`~.adapters.BinaryConceptModel`;
2. ``path/to/file.py:factory`` or ``package.module:factory`` -> whatever ``factory()``
   returns (see :func:`from_factory_result`);
3. anything else -> :func:`~concept_grounding.models.clip.load_clip`: a saved
   :class:`~concept_grounding.models.WorldCLIP` folder, an open_clip architecture or
   ``hf-hub:`` id, a transformers CLIP / SigLIP id or local folder -> an
   :class:`~.adapters.OpenVocabularyModel`.

A factory may return the model alone; a tuple of the model first, then its transform
and / or concept names in any order, told apart by type (a string or a sequence of names
or indices is the concept names, a callable is the transform, ``None`` is skipped):
``(model, transform)``, ``(model, concept_names)``, ``(model, transform, concept_names)``,
``(model, concept_names, transform)``; a dict with keys among :data:`FACTORY_KEYS`; or a
ready adapter / ``ClipHandle``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Mapping, Sequence
from numbers import Integral
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError, option
from .adapters import SubModel, as_sub_model

if TYPE_CHECKING:
    from ..hub import ModelSpec

__all__ = ["load_model", "load_factory", "saved_image_size", "load_posthoc_model"]

#: the keys a factory's dict may have (:func:`~.adapters.as_sub_model`'s arguments).
FACTORY_KEYS = (
    "model",
    "transform",
    "preprocess",
    "processor",
    "concept_names",
    "output",
    "outputs",
    "tokenizer",
    "image_size",
    "mean",
    "std",
    "normalize",
    "index_base",
    "include_none",
)


def load_factory(spec: str | ModelSpec, argument: str = "--model"):
    """The callable named by ``"path/to/file.py:name"`` or ``"package.module:name"``
    (checked first by :func:`concept_grounding.hub.resolve_model_spec`).

    Raises:
        UsageError: naming ``argument``: a bad spec, a missing file or module, a module that
            does not import, or no such name.
    """
    from ..hub import resolve_model_spec

    if ":" not in str(spec) or str(spec).startswith("hf-hub:"):
        raise UsageError(f"{spec!r}: expected 'file.py:factory' or 'package.module:factory'", argument=argument)
    target, _, name = resolve_model_spec(spec, argument, accept=("factory",)).target.rpartition(":")
    if target.endswith(".py"):
        path = Path(target)
        module_name = f"_concept_grounding_user_{path.stem}_{abs(hash(str(path)))}"
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as err:
            del sys.modules[module_name]
            raise UsageError(
                f"{spec!r}: importing {path} failed: {type(err).__name__}: {err}", argument=argument
            ) from err
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as err:
            raise UsageError(f"{spec!r}: cannot import {target!r}: {err}", argument=argument) from err
    factory = getattr(module, name, None)
    if not callable(factory):
        raise UsageError(f"{spec!r}: {target} has no callable {name!r}", argument=argument)
    return factory


def from_factory_result(result: Any, **overrides: Any) -> SubModel:
    """Wrap what a factory returned (module docstring); ``overrides`` (not ``None``) win."""
    options: dict[str, Any] = {}
    if isinstance(result, Mapping):
        unknown = sorted(set(result) - set(FACTORY_KEYS))
        if unknown or "model" not in result:
            raise UsageError(f"factory dict needs 'model' and only keys among {FACTORY_KEYS}; got {sorted(result)}")
        options = dict(result)
        model = options.pop("model")
    elif isinstance(result, tuple):
        if not 1 <= len(result) <= 3:
            raise UsageError(f"factory tuple must be (model[, transform][, concept_names]), got {len(result)} items")
        model, *rest = result
        seen: dict[str, int] = {}
        for j, part in enumerate(rest, start=1):
            kind = _tuple_part(part, j)
            if kind in seen:
                raise UsageError(f"factory tuple: items {seen[kind]} and {j} after the model are both {kind}")
            if kind is not None:
                seen[kind], options[kind] = j, part
    else:
        model = result
    options.update({k: v for k, v in overrides.items() if v is not None})
    options = {k: v for k, v in options.items() if v is not None}
    return as_sub_model(model, **options)


def _tuple_part(part: Any, j: int) -> str | None:
    """What item ``j`` after the model in a factory's tuple is: ``"concept_names"``, ``"transform"`` or ``None``."""
    if part is None:
        return None
    if isinstance(part, str) or (isinstance(part, Sequence) and all(isinstance(v, (str, Integral)) for v in part)):
        return "concept_names"
    if callable(part):
        return "transform"
    raise UsageError(
        f"factory tuple: item {j} after the model is a {type(part).__name__}, neither concept names "
        "(a string or a sequence of names / indices) nor a transform (a callable)"
    )


def saved_image_size(folder: Path, default: int = 64) -> int:
    """Input size of a saved project model: its bench run's ``config.json`` (two levels up,
    ``<run>/models/<name>``) says ``image_size``; a ViT backbone knows its own."""
    config = json.loads((folder / "config.json").read_text())
    backbone = config.get("backbone") or {}
    if isinstance(backbone, Mapping) and backbone.get("image_size"):
        return int(backbone["image_size"])
    run = folder.parent.parent / "config.json"
    if run.is_file():
        size = json.loads(run.read_text()).get("image_size")
        if size:
            return int(size)
    return int(default)


def load_model(
    spec: str | Path | ModelSpec,
    *,
    image_size: int | None = None,
    include_none: bool = False,
    device: str | None = None,
    pretrained: str | None = None,
    argument: str = "--model",
    **overrides: Any,
) -> SubModel:
    """A :class:`~.adapters.SubModel` from a ``--model`` string (module docstring).

    ``pretrained`` is the weights tag of an open_clip architecture (refused without one:
    :func:`concept_grounding.hub.require_open_clip_weights`). ``overrides`` (``concept_names``, ``output``,
    ``outputs``, ``mean``, ``std``, ...) replace what a factory returned. ``spec`` is checked first by the one resolver,
    :func:`concept_grounding.hub.resolve_model_spec` (a bad folder, factory or name fails
    there in one line naming ``argument``, before any model is loaded; a
    :class:`~concept_grounding.hub.ModelSpec` it returned is not checked again); a ``ValueError``
    names ``spec`` when nothing can load it.
    """
    from ..hub import resolve_model_spec
    from ..models.loading import concept_model_class_name, load_concept_model

    text = str(spec)
    if pretrained is not None and (
        Path(text).expanduser().exists() or (":" in text and not text.startswith("hf-hub:"))
    ):
        raise UsageError(
            f"--model {text!r} is not an open_clip architecture; {option('pretrained')} applies to open_clip names only"
        )
    resolved = resolve_model_spec(spec, argument, pretrained=pretrained)
    path = Path(resolved.target)
    if resolved.kind == "folder" and path.is_dir() and concept_model_class_name(path):
        model = load_concept_model(path)
        size = image_size or saved_image_size(path)
        return as_sub_model(model, image_size=size, **{k: v for k, v in overrides.items() if v is not None})
    if resolved.kind == "factory":
        factory = load_factory(resolved, argument)
        return from_factory_result(factory(), image_size=image_size, include_none=include_none or None, **overrides)
    from ..models.clip import load_clip

    given = sorted(option(k) for k, v in overrides.items() if v is not None)
    if given:
        raise UsageError(
            f"--model {text!r} loads as an open-vocabulary model; {', '.join(given)} apply to binary models only"
        )
    bundle = load_clip(resolved.target, pretrained=pretrained, device=device or "cpu")
    return as_sub_model(bundle, include_none=include_none)


def load_posthoc_model(spec: str) -> tuple[Any, int | None]:
    """``(PostHocCBM, image size or None)`` from an ``analyse --model`` string: a saved post-hoc CBM
    folder (its image size read beside it), or a factory returning a ``PostHocCBM`` or a dict of
    :func:`~concept_grounding.evaluation.posthoc.feature_map_posthoc_cbm`'s arguments."""
    from ..hub import resolve_model_spec
    from ..models import PostHocCBM
    from ..models.loading import load_concept_model
    from .posthoc import feature_map_posthoc_cbm

    resolved = resolve_model_spec(spec, "--model", accept=("folder", "factory"))
    if resolved.kind == "folder":
        path = Path(resolved.target)
        model = load_concept_model(path)
        if not isinstance(model, PostHocCBM):
            raise ValueError(f"--model {spec!r} is a {type(model).__name__}, not a post-hoc CBM (CAVs + classifier)")
        return model, saved_image_size(path)
    result = load_factory(resolved.target)()
    if isinstance(result, Mapping):
        try:
            result = feature_map_posthoc_cbm(**result)
        except TypeError as err:
            raise ValueError(
                f"--model {spec!r}: the factory's dict does not fit feature_map_posthoc_cbm: {err}"
            ) from None
    if not isinstance(result, PostHocCBM):
        raise ValueError(
            f"--model {spec!r}: the factory returned a {type(result).__name__}, not a PostHocCBM, "
            "or a dict of feature_map_posthoc_cbm's arguments"
        )
    return result, None
