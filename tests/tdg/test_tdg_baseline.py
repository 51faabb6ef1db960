"""The one prompting-only baseline: ``tdg.baseline.prompting_images``, used by
``generate --method prompting``, the Space's TDG tab and ``benchmarks/bench_tdg_world.py``."""

import numpy as np
import pytest
import torch
from diffusers import FluxPipeline

from concept_grounding.tdg.baseline import prompting_images

KW = dict(height=16, width=16, num_inference_steps=2, max_sequence_length=32, output_type="np")
A, B = "a photo of a Cardinal", "a photo of a Blue Jay"


def _plain(pipe, prompts, seeds, **extra):
    """FluxPipeline's own call on one batch (the reference the baseline must equal)."""
    generators = [torch.Generator().manual_seed(s) for s in seeds]
    return FluxPipeline.__call__(pipe, prompt=prompts, generator=generators, **KW, **extra).images


def test_a_repeated_prompt_is_generate_s_call_bit_for_bit(tiny_flux):
    """One prompt, n seeds: FluxPipeline with ``num_images_per_prompt=n`` (what ``generate`` ran)."""
    images = prompting_images(tiny_flux, [A, A, A], [1, 2, 3], batch_size=3, **KW)
    generators = [torch.Generator().manual_seed(s) for s in (1, 2, 3)]
    expected = FluxPipeline.__call__(tiny_flux, prompt=A, num_images_per_prompt=3, generator=generators, **KW).images
    assert np.array_equal(np.stack(images), expected)


def test_mixed_prompts_are_the_benchmark_s_call_bit_for_bit(tiny_flux):
    """Several prompts per call: FluxPipeline on the list, one negative prompt each (what the benchmark ran)."""
    images = prompting_images(
        tiny_flux, [A, B, A], [4, 5, 6], batch_size=2, negative_prompt="", true_cfg_scale=2.0, **KW
    )
    first = _plain(tiny_flux, [A, B], [4, 5], negative_prompt=["", ""], true_cfg_scale=2.0)
    second = FluxPipeline.__call__(
        tiny_flux,
        prompt=A,
        negative_prompt="",
        true_cfg_scale=2.0,
        num_images_per_prompt=1,
        generator=[torch.Generator().manual_seed(6)],
        **KW,
    ).images
    assert np.array_equal(np.stack(images), np.concatenate([first, second]))


def test_each_image_depends_on_its_own_seed_only(tiny_flux):
    one = prompting_images(tiny_flux, [A], [7], batch_size=1, **KW)[0]
    again = prompting_images(tiny_flux, [A, A], [7, 8], batch_size=1, **KW)
    assert np.array_equal(one, again[0]) and not np.array_equal(again[0], again[1])


def test_the_shared_pipeline_s_scheduler_is_left_alone(tiny_flux):
    """The baseline runs on a per-call view (the Space shares one pipeline between visitors): the
    shared scheduler keeps no state of the call (FluxPipeline's own call leaves its step index)."""
    before = (tiny_flux.scheduler.step_index, tiny_flux.scheduler.timesteps.clone())
    prompting_images(tiny_flux, [A], [0], batch_size=1, **KW)
    assert tiny_flux.scheduler.step_index == before[0]
    assert torch.equal(tiny_flux.scheduler.timesteps, before[1])


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="same length"):
        prompting_images(None, [A, B], [0], batch_size=1)
    with pytest.raises(ValueError, match="batch_size"):
        prompting_images(None, [A], [0], batch_size=0)


def test_the_space_s_prompting_only_image_is_this_baseline(tiny_space_store):
    """The Space's TDG tab no longer runs TDG at eta 0 on (c_R, c_R) (two prompt encodings and a batch
    of two): its prompting-only image is ``prompting_images`` of c_R from the pair's seed."""
    from concept_grounding.space import tab_tdg
    from concept_grounding.tdg.prompts import prompting_only_prompt

    cls, attribute, seed = "017.Cardinal", "has_crown_color::black", 3
    _, _, base = tab_tdg.generate(tiny_space_store, cls, attribute, model=tab_tdg.TINY_MODEL, steps=2, seed=seed)
    pipe = tab_tdg.get_pipeline(tiny_space_store, tab_tdg.TINY_MODEL)
    expected = prompting_images(
        pipe,
        [prompting_only_prompt(cls, attribute)],
        [seed],
        batch_size=1,
        height=32,
        width=32,
        num_inference_steps=2,
        max_sequence_length=32,
        output_type="np",
    )[0]
    assert np.array_equal(base, np.clip(np.rint(expected * 255.0), 0, 255).astype(np.uint8))
