"""TDG on Hugging Face Spaces GPUs (ZeroGPU): the models a GPU adds, and the ``spaces.GPU`` decorator.

A Space on ZeroGPU hardware gets a GPU only inside functions decorated with the ``spaces``
package's ``@spaces.GPU`` (``SPACES_ZERO_GPU`` is set in its environment; outside a decorated
call ``torch.cuda.is_available()`` is False); on other GPU hardware CUDA is simply there;
elsewhere ``spaces.GPU`` does nothing. This module gives the Space what it needs to offer
the full-size models there and nothing anywhere else:

* :func:`gpu_tdg_models`: FLUX.1-dev and FLUX.2 [klein] on a GPU Space (each loads as its
  family's TDG pipeline through :func:`~.loading.load_flux_pipeline`), ``()`` on a CPU;
* :func:`on_gpu`: ``spaces.GPU(duration=...)(fn)`` when ``spaces`` is installed, else ``fn``;
* :data:`GPU_DTYPE`: the dtype to load them in on a GPU.

The Space's TDG tab (``concept_grounding.space``, not changed here) adds ``gpu_tdg_models()`` to
its model policy's ``tdg_models`` and wraps its generate function with ``on_gpu``.

>>> gpu_tdg_models(environ={}, cuda_available=False)
()
>>> gpu_tdg_models(environ={"SPACES_ZERO_GPU": "true"}, cuda_available=False)
('black-forest-labs/FLUX.1-dev', 'black-forest-labs/FLUX.2-klein-4B')
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["GPU_TDG_MODELS", "GPU_DTYPE", "ZERO_GPU_ENV", "on_spaces_gpu", "gpu_tdg_models", "on_gpu"]

#: Hub ids a GPU Space offers besides the built-in models: FLUX.1 [dev] and FLUX.2 [klein] 4B.
GPU_TDG_MODELS: tuple[str, ...] = ("black-forest-labs/FLUX.1-dev", "black-forest-labs/FLUX.2-klein-4B")
#: Environment variable the Spaces runtime sets on ZeroGPU hardware.
ZERO_GPU_ENV = "SPACES_ZERO_GPU"
#: dtype of the GPU models (the Space's CPU models stay float32).
GPU_DTYPE = "bfloat16"

F = TypeVar("F", bound=Callable[..., Any])


def on_spaces_gpu(environ: Mapping[str, str] | None = None, cuda_available: bool | None = None) -> bool:
    """Whether this process runs on a ZeroGPU Space or has CUDA.

    Args:
        environ: default ``os.environ``.
        cuda_available: default ``torch.cuda.is_available()`` (False when torch is missing).
    """
    environ = os.environ if environ is None else environ
    if environ.get(ZERO_GPU_ENV, "").strip().lower() in ("1", "true", "yes"):
        return True
    if cuda_available is None:
        try:
            import torch
        except ImportError:
            return False
        cuda_available = torch.cuda.is_available()
    return bool(cuda_available)


def gpu_tdg_models(environ: Mapping[str, str] | None = None, cuda_available: bool | None = None) -> tuple[str, ...]:
    """:data:`GPU_TDG_MODELS` on a GPU (:func:`on_spaces_gpu`), else ``()``: on a CPU nothing changes."""
    return GPU_TDG_MODELS if on_spaces_gpu(environ, cuda_available) else ()


def _spaces_gpu() -> Callable[..., Any] | None:
    """The ``spaces`` package's ``GPU`` decorator, or ``None`` where that package is not installed
    (a folder named ``spaces`` on the path, such as this repository's Space sources, is not it)."""
    if importlib.util.find_spec("spaces") is None:
        return None
    try:
        import spaces
    except ImportError:
        return None
    return getattr(spaces, "GPU", None)


def on_gpu(fn: F | None = None, *, duration: int = 120) -> Any:
    """``@spaces.GPU(duration=duration)`` when the ``spaces`` package is installed, else the function itself.

    Usable bare (``@on_gpu``) or with arguments (``@on_gpu(duration=60)``); ``duration`` is the
    longest call in seconds that ZeroGPU reserves a GPU for.
    """

    def decorate(function: F) -> F:
        gpu = _spaces_gpu()
        return function if gpu is None else gpu(duration=duration)(function)

    return decorate(fn) if fn is not None else decorate
