"""The one way the project loads a Flux pipeline (a folder or a Hub id).

``generate --model``, the shipped world Flux (:func:`concept_grounding.worldflux.load_world_flux`)
and the Space's ``--tdg-model`` all come through :func:`load_flux_pipeline`, so a folder
loads the same everywhere: every component in one dtype whatever its precision on disk
(the world Flux ships in float16; loaded without a dtype, its text encoders stayed Half
while the transformer was Float), at its trained resolution, without progress bars.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["load_flux_pipeline"]


def load_flux_pipeline(source: str | os.PathLike[str], dtype: Any = "float32", pipeline_cls: type | None = None,
                       **kwargs: Any) -> Any:
    """``pipeline_cls.from_pretrained(source, dtype=dtype, **kwargs)``, ready to sample.

    Args:
        source: a diffusers Flux pipeline folder or Hub id (already resolved).
        dtype: ``"float32"`` (the default: CPU half precision is slow), ``"bfloat16"``,
            ``"float16"`` or a ``torch.dtype``; every component is cast to it.
        pipeline_cls: default :class:`~concept_grounding.tdg.TiedDiffusionPipeline`.
        kwargs: more ``from_pretrained`` keywords (``local_files_only``, ...).

    ``default_sample_size`` comes from the VAE's ``sample_size`` (when it has one), so
    ``height``/``width`` default to the trained resolution instead of FluxPipeline's 1024 px.
    """
    import torch

    if pipeline_cls is None:
        from .pipeline import TiedDiffusionPipeline

        pipeline_cls = TiedDiffusionPipeline
    pipe = pipeline_cls.from_pretrained(source, dtype=getattr(torch, dtype) if isinstance(dtype, str) else dtype,
                                        **kwargs)
    sample_size = getattr(pipe.vae.config, "sample_size", None)
    if sample_size:
        pipe.default_sample_size = int(sample_size) // int(pipe.vae_scale_factor)
    pipe.set_progress_bar_config(disable=True)
    return pipe
