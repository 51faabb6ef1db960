"""The one way the project loads a Flux-family pipeline (a folder or a Hub id).

``generate --model``, the shipped world Flux (:func:`concept_grounding.worldflux.load_world_flux`)
and the Space's ``--tdg-model`` all come through :func:`load_flux_pipeline`, so a folder
loads the same everywhere: as the TDG pipeline of its family (:func:`tied_pipeline_class`,
from the folder's ``model_index.json``: FLUX.1, FLUX.2 [dev] or FLUX.2 [klein]), every
component in one dtype whatever its precision on disk (the world Flux ships in float16;
loaded without a dtype, its text encoders stayed Half while the transformer was Float), at
its trained resolution, without progress bars.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["load_flux_pipeline", "tied_pipeline_class", "TIED_PIPELINES", "own_custom_pipeline_module"]

#: Pipeline class named in a ``model_index.json`` -> (module of ``concept_grounding.tdg``, TDG class).
TIED_PIPELINES: dict[str, tuple[str, str]] = {
    "FluxPipeline": ("pipeline", "TiedDiffusionPipeline"),
    "TiedDiffusionPipeline": ("pipeline", "TiedDiffusionPipeline"),
    "Flux2Pipeline": ("pipeline_flux2", "TiedFlux2Pipeline"),
    "TiedFlux2Pipeline": ("pipeline_flux2", "TiedFlux2Pipeline"),
    "Flux2KleinPipeline": ("pipeline_flux2", "TiedFlux2KleinPipeline"),
    "TiedFlux2KleinPipeline": ("pipeline_flux2", "TiedFlux2KleinPipeline"),
}


def tied_pipeline_class(class_name: str) -> type:
    """The TDG pipeline class for a diffusers pipeline class name (``"Flux2KleinPipeline"`` ->
    ``TiedFlux2KleinPipeline``).

    Raises:
        ValueError: one line naming the unsupported class and the supported ones.

    >>> tied_pipeline_class("Flux2KleinPipeline").__name__
    'TiedFlux2KleinPipeline'
    >>> tied_pipeline_class("StableDiffusionPipeline")
    Traceback (most recent call last):
    ...
    ValueError: TDG does not support StableDiffusionPipeline: it supports FluxPipeline, Flux2Pipeline,
    Flux2KleinPipeline
    """
    import importlib

    if class_name not in TIED_PIPELINES:
        bases = ", ".join(name for name in TIED_PIPELINES if not name.startswith("Tied"))
        raise ValueError(f"TDG does not support {class_name}: it supports {bases}")
    module, name = TIED_PIPELINES[class_name]
    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


def load_flux_pipeline(
    source: str | os.PathLike[str], dtype: Any = "float32", pipeline_cls: type | None = None, **kwargs: Any
) -> Any:
    """``pipeline_cls.from_pretrained(source, dtype=dtype, **kwargs)``, ready to sample.

    Args:
        source: a diffusers FLUX.1 / FLUX.2 / FLUX.2 [klein] pipeline folder or Hub id (already resolved).
        dtype: ``"float32"`` (the default: CPU half precision is slow), ``"bfloat16"``,
            ``"float16"`` or a ``torch.dtype``; every component is cast to it.
        pipeline_cls: default: the TDG pipeline of the class ``source``'s ``model_index.json``
            names (:func:`tied_pipeline_class`; another class fails in one line).
        kwargs: more ``from_pretrained`` keywords (``local_files_only``, ...).

    ``default_sample_size`` comes from the VAE's ``sample_size`` (when it has one), so
    ``height``/``width`` default to the trained resolution instead of the pipeline's 1024 px.
    """
    import torch

    if pipeline_cls is None:
        from diffusers import DiffusionPipeline

        config_keys = {
            key: kwargs[key] for key in ("local_files_only", "revision", "cache_dir", "token") if key in kwargs
        }
        pipeline_cls = tied_pipeline_class(DiffusionPipeline.load_config(source, **config_keys)["_class_name"])
    pipe = pipeline_cls.from_pretrained(
        source, dtype=getattr(torch, dtype) if isinstance(dtype, str) else dtype, **kwargs
    )
    sample_size = getattr(pipe.vae.config, "sample_size", None)
    if sample_size:
        pipe.default_sample_size = int(sample_size) // int(pipe.vae_scale_factor)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def own_custom_pipeline_module(namespace: dict[str, Any], pipeline_cls: type) -> None:
    """Leave ``pipeline_cls`` the one pipeline class in a ``custom_pipeline`` folder's ``pipeline.py``.

    diffusers imports every *local* ``custom_pipeline`` folder's ``pipeline.py`` as the same module
    (``diffusers_modules.local.pipeline``) and executes the next folder's file into it, so the
    class an earlier folder defined stays in the namespace, and ``find_pipeline_class`` fails with
    "Multiple classes that inherit from DiffusionPipeline" (Hub repos get one module per repo and
    commit). Each TDG shell calls this with its ``globals()`` last: every other non-diffusers
    ``DiffusionPipeline`` subclass is dropped from the namespace, so the three TDG folders load
    side by side in one process.

    >>> from diffusers import DiffusionPipeline, FluxPipeline
    >>> class Old(DiffusionPipeline): ...
    >>> class New(DiffusionPipeline): ...
    >>> namespace = {"Old": Old, "New": New, "FluxPipeline": FluxPipeline, "x": 1}
    >>> own_custom_pipeline_module(namespace, New)
    >>> sorted(namespace)
    ['FluxPipeline', 'New', 'x']
    """
    from diffusers import DiffusionPipeline

    stale = [
        name
        for name, value in namespace.items()
        if isinstance(value, type)
        and issubclass(value, DiffusionPipeline)
        and value is not pipeline_cls
        and value.__module__.split(".")[0] != "diffusers"
    ]
    for name in stale:
        del namespace[name]
