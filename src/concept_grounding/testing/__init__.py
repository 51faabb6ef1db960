"""Tiny models built from configs, for the tests and users' own tests (as diffusers keeps
``testing_utils``): random weights, no download, seconds on a CPU. Only tests import this package;
the tiny models production runs live in :mod:`concept_grounding.tdg.tiny` and
:mod:`concept_grounding.models.clip.tiny`, re-exported here.

* :mod:`.flux`: :func:`tiny_flux_components`, :func:`tiny_flux_pipeline` (a 1+1-block Flux),
  :func:`tiny_flux_ip_adapter`.
* :mod:`.flux2`: :func:`tiny_flux2_components`, :func:`tiny_flux2_pipeline` (FLUX.2 [dev] and [klein]).
* :mod:`.vlm`: :func:`save_tiny_vlm` (a tiny LLaVA for the VQA filter), :func:`save_tiny_internvl`
  (SUB's scorer's architecture, InternVL 2.5, in transformers' converted form), :func:`tiny_vlm_words`.
* :mod:`.clip`: :func:`tiny_open_clip`, :func:`tiny_transformers_clip`,
  :func:`vit_b16_open_clip_visual`, :func:`known_answer_open_clip` (CCI's known answer).
* :mod:`.inpaint`: :func:`save_tiny_inpainting_pipeline` (COVAR's inpainting).
* :mod:`.world_clip`: :func:`tiny_world_clip`, :func:`tiny_clip_handle`.
* :mod:`.serving`: :func:`free_port`, :func:`wait_until_serving`, :func:`stop_server` (an app started in a subprocess,
  for browser tests and benchmarks), :func:`http_request` (a raw request, from another loopback address if asked).

Every builder takes a ``seed`` (same seed, same weights) and builds inside
``torch.random.fork_rng``: the caller's global torch RNG state is left as it was. The
builders (listed in ``__init__.pyi``) load on first use through ``lazy_loader`` (they need the extras' libraries).

>>> import torch
>>> from concept_grounding.testing import tiny_world_clip
>>> state = torch.random.get_rng_state()
>>> tiny_world_clip(image_size=16, seed=0).image_size
16
>>> torch.equal(state, torch.random.get_rng_state())
True
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
