"""The prompting-only baseline (SUB Fig. 4): ``c_R`` alone, untied, from the same weights.

:func:`prompting_images` is the one implementation: ``generate --method prompting``
(:mod:`.generate`), the Space's TDG tab and ``benchmarks/bench_tdg_world.py`` call it. It runs
the base pipeline's own ``__call__`` (:meth:`~.pipeline.TiedPipelineMixin.base_call`, on a
per-call view, so concurrent calls on one shared pipeline do not disturb one another) with
one seeded generator per image, ``batch_size`` images per call.

Batching. A call whose prompts are all the same encodes the prompt once and draws
``num_images_per_prompt`` images (what ``generate`` does with one pairing per call); a call
of several prompts passes them as a list with one negative prompt each. With the same
seeds, generator device and batch composition the images are the same bit for bit;
another batch size can change the last bits (batched matrix products).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["prompting_images"]


def prompting_images(
    pipe: Any,
    prompts: Sequence[str],
    seeds: Sequence[int],
    *,
    batch_size: int,
    generator_device: Any = "cpu",
    **call_kwargs: Any,
) -> list[Any]:
    """The prompting-only images of ``prompts``, image ``i`` from ``torch.Generator(generator_device)``
    seeded with ``seeds[i]``.

    Args:
        pipe: a Tied Diffusion pipeline (:class:`~.pipeline.TiedDiffusionPipeline` or a FLUX.2 one).
        prompts: one prompt per image (``c_R``, e.g. :func:`~.prompts.prompting_only_prompt`).
        seeds: one seed per image, same length.
        batch_size: images per pipeline call (> 0).
        generator_device: where the generators draw the initial noise (``generate``: the
            pipeline's execution device; the Space and the benchmark: ``"cpu"``).
        call_kwargs: the base pipeline's other arguments for every call (``height``, ``width``,
            ``num_inference_steps``, ``max_sequence_length``, ``true_cfg_scale``,
            ``negative_prompt`` (one string), ``output_type``, ``callback_on_step_end``, ...).

    Returns:
        the images in the order of ``prompts`` (PIL images or arrays, as ``output_type`` says).

    Raises:
        ValueError: ``prompts`` and ``seeds`` differ in length, or ``batch_size`` < 1.
    """
    import torch

    if len(prompts) != len(seeds):
        raise ValueError(f"prompts and seeds must have the same length, got {len(prompts)} and {len(seeds)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    images: list[Any] = []
    for start in range(0, len(prompts), batch_size):
        batch, batch_seeds = list(prompts[start : start + batch_size]), seeds[start : start + batch_size]
        generators = [torch.Generator(device=generator_device).manual_seed(int(s)) for s in batch_seeds]
        images += list(pipe.base_call(**_batch_prompts(batch, call_kwargs), generator=generators).images)
    return images


def _batch_prompts(batch: list[str], call_kwargs: dict[str, Any]) -> dict[str, Any]:
    """One call's prompt arguments with ``call_kwargs``: a repeated prompt once with
    ``num_images_per_prompt``, else the list with its negative prompt repeated per prompt.

    >>> _batch_prompts(["a", "a"], {"negative_prompt": ""})
    {'negative_prompt': '', 'prompt': 'a', 'num_images_per_prompt': 2}
    >>> _batch_prompts(["a", "b"], {"negative_prompt": ""})
    {'negative_prompt': ['', ''], 'prompt': ['a', 'b'], 'num_images_per_prompt': 1}
    """
    if len(set(batch)) == 1:
        return {**call_kwargs, "prompt": batch[0], "num_images_per_prompt": len(batch)}
    kwargs = dict(call_kwargs)
    if isinstance(kwargs.get("negative_prompt"), str):
        kwargs["negative_prompt"] = [kwargs["negative_prompt"]] * len(batch)
    return {**kwargs, "prompt": batch, "num_images_per_prompt": 1}
