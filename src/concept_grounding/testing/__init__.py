"""Tiny models built from configs, for tests, demos and users' own tests (as diffusers keeps
``testing_utils``): random weights, no download, seconds on a CPU.

* :mod:`.flux`: :func:`tiny_flux_components`, :func:`tiny_flux_pipeline` (a 1+1-block Flux).
* :mod:`.vlm`: :func:`save_tiny_vlm` (a tiny LLaVA for the VQA filter), :func:`tiny_vlm_words`.
* :mod:`.clip`: :func:`tiny_open_clip`, :func:`tiny_transformers_clip`,
  :func:`vit_b16_open_clip_visual`, :func:`known_answer_open_clip` (CCI's known answer).
* :mod:`.inpaint`: :func:`save_tiny_inpainting_pipeline` (COVAR's inpainting).
* :mod:`.world_clip`: :func:`tiny_world_clip`, :func:`tiny_clip_handle`.

Every builder takes a ``seed`` (same seed, same weights) and builds inside
``torch.random.fork_rng``: the caller's global torch RNG state is left as it was. The
builders load on first attribute access (they need the extras' libraries).

>>> import torch
>>> from concept_grounding.testing import tiny_world_clip
>>> state = torch.random.get_rng_state()
>>> tiny_world_clip(image_size=16, seed=0).image_size
16
>>> torch.equal(state, torch.random.get_rng_state())
True
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "tiny_flux_components": ".flux",
    "tiny_flux_pipeline": ".flux",
    "save_tiny_vlm": ".vlm",
    "tiny_vlm_words": ".vlm",
    "TINY_VLM_CHAT_TEMPLATE": ".vlm",
    "tiny_open_clip": ".clip",
    "tiny_transformers_clip": ".clip",
    "vit_b16_open_clip_visual": ".clip",
    "known_answer_open_clip": ".clip",
    "save_tiny_inpainting_pipeline": ".inpaint",
    "TINY_INPAINT_WORDS": ".inpaint",
    "TINY_WORLD_CLIP": ".world_clip",
    "tiny_world_clip": ".world_clip",
    "tiny_clip_handle": ".world_clip",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
