"""diffusers' pipeline checklist, as our own tests, for every TDG pipeline of the Flux family.

The behaviours diffusers' own suites check (``tests/pipelines/flux/test_pipeline_flux.py``,
``tests/pipelines/flux2/``, the pipeline tester mixins in ``tests/pipelines/testing_utils/``),
written for TDG: each test names the upstream check it stands for. Where the upstream
check passes ``prompt`` we pass the pair (``reference_prompt``, ``guide_prompt``); what TDG
refuses by design is :data:`concept_grounding.tdg.REFUSED_ARGUMENTS`. Tiny models from
configs (``concept_grounding.testing``), CPU, no downloads. Upstream checks that are N/A
here (accelerator offloading, xformers, PEFT LoRA) are listed in the
guide's TDG page (docs/guide/tdg.md) with the reason.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from diffusers import DiffusionPipeline, Flux2KleinPipeline, Flux2Pipeline, FluxPipeline
from diffusers.utils.torch_utils import randn_tensor

from concept_grounding.tdg import ConstantEta, EtaSchedule, TiedDiffusionPipeline
from concept_grounding.tdg.pipeline import REFUSED_ARGUMENTS, RENAMED_ARGUMENTS
from concept_grounding.tdg.pipeline_flux2 import TiedFlux2KleinPipeline, TiedFlux2Pipeline
from concept_grounding.testing import TINY_FLUX2_CALL, tiny_flux2_pipeline, tiny_flux_ip_adapter, tiny_flux_pipeline

REPO = Path(__file__).resolve().parents[2]
R, G = "a photo of a blue jay with a yellow crown", "a photo of a bird with a yellow crown"
SIZE, STEPS = 16, 3


def _flux_reference_latents(base: Any, generator: torch.Generator, rows: int) -> torch.Tensor:
    """FLUX.1's packed initial latents of ``rows`` images, drawn as FluxPipeline draws them."""
    return base.prepare_latents(
        rows, base.transformer.config.in_channels // 4, SIZE, SIZE, torch.float32, "cpu", generator
    )[0]


def _flux2_reference_latents(base: Any, generator: torch.Generator, rows: int) -> torch.Tensor:
    """FLUX.2's unpacked (rows, C, H/2, W/2) initial latents, drawn as Flux2Pipeline draws them."""
    return randn_tensor((rows, base.transformer.config.in_channels, SIZE // 2, SIZE // 2), generator=generator)


@dataclass(frozen=True)
class Member:
    """One TDG pipeline, its base pipeline and how to build and call both on tiny models."""

    tdg: type
    base: type
    build: Callable[[type], Any]
    reference_latents: Callable[[Any, torch.Generator, int], torch.Tensor]
    call: dict[str, Any] = field(default_factory=dict)
    folder: str = ""
    embeds: tuple[str, ...] = ("prompt_embeds",)
    state: str = "_attention_kwargs"


FAMILY = {
    "flux": Member(
        TiedDiffusionPipeline,
        FluxPipeline,
        lambda cls: tiny_flux_pipeline(cls, seed=0),
        _flux_reference_latents,
        {"max_sequence_length": 32},
        "tied_diffusion",
        ("prompt_embeds", "pooled_prompt_embeds"),
        "_joint_attention_kwargs",
    ),
    "flux2": Member(
        TiedFlux2Pipeline,
        Flux2Pipeline,
        lambda cls: tiny_flux2_pipeline(cls, seed=0),
        _flux2_reference_latents,
        TINY_FLUX2_CALL,
        "tied_flux2",
    ),
    "flux2_klein": Member(
        TiedFlux2KleinPipeline,
        Flux2KleinPipeline,
        lambda cls: tiny_flux2_pipeline(cls, seed=0),
        _flux2_reference_latents,
        TINY_FLUX2_CALL,
        "tied_flux2_klein",
    ),
}


@pytest.fixture(scope="module", params=list(FAMILY))
def member(request) -> Member:
    return FAMILY[request.param]


@pytest.fixture(scope="module")
def pipes(member):
    """(TDG pipeline, base pipeline) with the same tiny weights; tests must not modify them."""
    return member.build(member.tdg), member.build(member.base)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _kw(member: Member, **extra: Any) -> dict[str, Any]:
    return dict(height=SIZE, width=SIZE, num_inference_steps=STEPS, output_type="pt", **member.call) | extra


# ------------------------------------------------------------------ signature (test_pipeline_call_signature)


def test_call_signature_lists_every_base_argument(member):
    """upstream ``test_pipeline_call_signature`` / ``FluxIPAdapterTesterMixin.test_pipeline_signature``: every
    argument of the base ``__call__`` is in TDG's explicit signature, renamed per side, or refused with a reason."""
    ours = inspect.signature(member.tdg.__call__).parameters
    theirs = inspect.signature(member.base.__call__).parameters
    assert not [p for p in ours.values() if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    unaccounted = []
    for name, param in theirs.items():
        if name == "self" or name in REFUSED_ARGUMENTS:
            continue
        if name in RENAMED_ARGUMENTS:
            assert set(RENAMED_ARGUMENTS[name]) <= set(ours), name
            continue
        if name not in ours:
            unaccounted.append(name)
        elif name != "max_sequence_length" or member.tdg is not TiedDiffusionPipeline:  # FLUX.1: None = tokenizer's
            assert ours[name].default == param.default, name
    assert unaccounted == []
    for name in ("height", "width", "guidance_scale", "callback_on_step_end", "callback_on_step_end_tensor_inputs"):
        assert ours[name].default is not inspect.Parameter.empty  # upstream's required optional parameters


def test_refused_arguments_are_base_arguments_and_raise(member, pipes):
    """The one list of refusals names real base-pipeline arguments; passing one fails at the call."""
    every_base = set().union(*(inspect.signature(c.__call__).parameters for c in (FluxPipeline, Flux2Pipeline)))
    assert set(REFUSED_ARGUMENTS) <= every_base and all(REFUSED_ARGUMENTS.values())
    assert not set(REFUSED_ARGUMENTS) & set(inspect.signature(member.tdg.__call__).parameters)
    for name in set(REFUSED_ARGUMENTS) & set(inspect.signature(member.base.__call__).parameters):
        with pytest.raises(TypeError, match=name):
            pipes[0](R, G, **{name: "x"}, **_kw(member))


def test_encode_prompt_is_the_base_method_with_its_signature(member):
    """upstream ``test_encode_prompt_works_in_isolation`` reads ``encode_prompt``'s signature."""
    ours, theirs = member.tdg.encode_prompt, member.base.encode_prompt
    assert ours.__wrapped__ is theirs and ours.__doc__ == theirs.__doc__ and ours.__name__ == "encode_prompt"
    assert inspect.signature(ours) == inspect.signature(theirs)


# ------------------------------------------------------------------ the tie against the base pipeline


def test_eta_zero_equals_the_base_pipeline_bit_for_bit(member, pipes):
    tdg, base = pipes
    out = tdg(R, G, eta_schedule=ConstantEta(0.0), generator=_gen(1), **_kw(member))
    latents = member.reference_latents(base, _gen(1), 1)
    batch = base(prompt=[R, G], latents=torch.cat([latents, latents]), **_kw(member)).images
    assert torch.equal(out.images[0], batch[0]) and torch.equal(out.guide_images[0], batch[1])
    assert out.eta_per_step == [0.0] * STEPS


def test_eta_one_moves_the_pair_identically(member, pipes):
    out = pipes[0](R, G, eta_schedule=ConstantEta(1.0), generator=_gen(2), **_kw(member))
    assert torch.equal(out.images, out.guide_images)
    free = pipes[0](R, G, eta_schedule=ConstantEta(0.0), generator=_gen(2), **_kw(member))
    assert not torch.equal(free.images, free.guide_images)


def test_batch_of_pairs_equals_each_pair_alone(member, pipes):
    """upstream ``test_inference_batch_consistent`` / ``test_inference_batch_single_identical``."""
    refs, guides = [R, "a photo of a cardinal"], [G, "a photo of a bird"]
    schedule = EtaSchedule(0.2, 0.9, 1.0)
    out = pipes[0](refs, guides, eta_schedule=schedule, generator=[_gen(20), _gen(21)], **_kw(member))
    for i in range(2):
        alone = pipes[0](refs[i], guides[i], eta_schedule=schedule, generator=_gen(20 + i), **_kw(member))
        torch.testing.assert_close(out.images[i], alone.images[0], atol=1e-4, rtol=0)
        torch.testing.assert_close(out.guide_images[i], alone.guide_images[0], atol=1e-4, rtol=0)


@pytest.mark.parametrize(("pairs", "per_prompt"), [(1, 2), (2, 1), (2, 2)])
def test_num_images_per_prompt(member, pipes, pairs, per_prompt):
    """upstream ``test_num_images_per_prompt``: n pairs x m images give n * m of each side."""
    out = pipes[0]([R] * pairs, [G] * pairs, num_images_per_prompt=per_prompt, **_kw(member, num_inference_steps=1))
    assert out.images.shape == out.guide_images.shape == (pairs * per_prompt, 3, SIZE, SIZE)


# ------------------------------------------------------------------ outputs and state


def test_images_are_the_references_and_the_tuple_matches(member, pipes):
    """upstream ``test_dict_tuple_outputs_equivalent`` and every output's ``.images``."""
    out = pipes[0](R, G, generator=_gen(3), **_kw(member))
    as_tuple = pipes[0](R, G, generator=_gen(3), return_dict=False, **_kw(member))
    assert out.images is out.reference_images and out[0] is out.images
    assert torch.equal(as_tuple[0], out.images) and torch.equal(as_tuple[1], out.guide_images)
    assert as_tuple[2] == out.eta_per_step


def test_pipeline_state_after_a_call(member):
    """FluxPipeline leaves ``guidance_scale``, ``num_timesteps``, ... set after a call; so does TDG."""
    pipe = member.build(member.tdg)
    attention_kwargs = {"scale": 1.0} if member.tdg is TiedDiffusionPipeline else {}
    name = "joint_attention_kwargs" if member.tdg is TiedDiffusionPipeline else "attention_kwargs"
    pipe(R, G, guidance_scale=2.5, **{name: attention_kwargs}, **_kw(member, num_inference_steps=2))
    assert pipe.guidance_scale == 2.5 and pipe.num_timesteps == 2
    assert pipe.current_timestep is None and pipe.interrupt is False
    assert getattr(pipe, member.state) == attention_kwargs


def test_callback_tensor_inputs(member, pipes):
    """upstream ``test_callback_inputs``: a subset, all of ``_callback_tensor_inputs``, and a change that sticks."""
    pipe = pipes[0]
    seen = []

    def check(names):
        def callback(pipeline, i, t, kwargs):
            assert set(kwargs) == set(names)
            seen.append(i)
            return kwargs

        return callback

    for names in (["latents"], list(pipe._callback_tensor_inputs)):
        pipe(
            R,
            G,
            callback_on_step_end=check(names),
            callback_on_step_end_tensor_inputs=names,
            **_kw(member, output_type="latent"),
        )

    def zero_last(pipeline, i, t, kwargs):
        if i == pipeline.num_timesteps - 1:
            kwargs["latents"] = torch.zeros_like(kwargs["latents"])
        return kwargs

    out = pipe(R, G, callback_on_step_end=zero_last, **_kw(member, output_type="latent"))
    assert seen == list(range(STEPS)) * 2
    assert out.images.abs().sum() == 0 and out.guide_images.abs().sum() == 0


def test_callback_changes_guidance_scale_and_the_pipeline_keeps_it(member):
    """upstream ``test_callback_cfg``: +1 per step, read back from the pipeline after the call."""
    pipe = member.build(member.tdg)

    def more_guidance(pipeline, i, t, kwargs):
        pipeline._guidance_scale += 1.0
        return kwargs

    pipe(R, G, guidance_scale=2.0, callback_on_step_end=more_guidance, **_kw(member))
    assert pipe.guidance_scale == 2.0 + pipe.num_timesteps == 2.0 + STEPS


def test_callback_interrupt_stops_the_tied_steps(member, pipes):
    def stop(pipeline, i, t, kwargs):
        pipeline._interrupt = True
        return kwargs

    out = pipes[0](R, G, callback_on_step_end=stop, **_kw(member))
    assert len(out.eta_per_step) == 1  # the loop skips every later step, as the base pipeline's does


# ------------------------------------------------------------------ precomputed embeddings


def _encode(pipe: Any, member: Member, prompt: str) -> dict[str, torch.Tensor]:
    """The base ``encode_prompt``'s embeddings of one prompt, by base argument name."""
    extra = {k: v for k, v in member.call.items() if k in inspect.signature(pipe.encode_prompt).parameters}
    encoded = pipe.encode_prompt(prompt=prompt, device="cpu", num_images_per_prompt=1, **extra)
    return dict(zip(member.embeds, encoded))  # FLUX.1: (T5, pooled CLIP, ids); FLUX.2: (embeds, ids)


def _side(embeds: dict[str, torch.Tensor], side: str) -> dict[str, torch.Tensor]:
    return {RENAMED_ARGUMENTS[name][side == "guide"]: value for name, value in embeds.items()}


def test_precomputed_embeddings_from_a_text_only_pipeline_equal_the_prompts(member, pipes):
    """upstream ``test_encode_prompt_works_in_isolation``: a pipeline holding only the text encoders
    encodes each side; the full pipeline given those embeddings makes the prompts' images."""
    tdg = pipes[0]
    text_only = member.tdg(
        **{name: (module if "text" in name or "token" in name else None) for name, module in tdg.components.items()}
    )
    # CFG would need negative_prompt_embeds (its own test below)
    extra = {"guidance_scale": 1.0} if member.tdg is TiedFlux2KleinPipeline else {}
    embeds = _side(_encode(text_only, member, R), "reference") | _side(_encode(text_only, member, G), "guide")
    from_embeds = tdg(eta_schedule=EtaSchedule(0.2, 0.9, 1.0), generator=_gen(4), **embeds, **extra, **_kw(member))
    from_text = tdg(R, G, eta_schedule=EtaSchedule(0.2, 0.9, 1.0), generator=_gen(4), **extra, **_kw(member))
    torch.testing.assert_close(from_embeds.images, from_text.images, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(from_embeds.guide_images, from_text.guide_images, atol=1e-4, rtol=1e-4)


def test_mismatched_or_half_given_embeddings_fail_in_one_line(member, pipes):
    tdg = pipes[0]
    ref, guide = _encode(tdg, member, R), _encode(tdg, member, G)
    short = {name: value[:, :-1] if value.ndim == 3 else value for name, value in guide.items()}
    cases = [
        (_side(ref, "reference") | _side(short, "guide"), "must have the same shape"),
        (_side(ref, "reference"), "go together"),
    ]
    for embeds, message in cases:
        with pytest.raises(ValueError, match=message) as caught:
            tdg(**embeds, **_kw(member))
        assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="not both"):
        tdg(R, G, **_side(ref, "reference"), **_side(guide, "guide"), **_kw(member))
    if "pooled_prompt_embeds" in member.embeds:  # FLUX.1: the pooled CLIP embeddings come with the T5 ones
        with pytest.raises(
            ValueError,
            match="reference_pooled_prompt_embeds and guide_pooled_prompt_embeds are "
            "required with reference_prompt_embeds / guide_prompt_embeds",
        ):
            tdg(reference_prompt_embeds=ref["prompt_embeds"], guide_prompt_embeds=guide["prompt_embeds"], **_kw(member))


def test_eta_outside_the_unit_interval_fails_in_one_line(member, pipes):
    with pytest.raises(ValueError, match=r"eta in \[0, 1\], got 1.5") as caught:
        pipes[0](R, G, eta_schedule=lambda t: 1.5, **_kw(member))
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="must lie in"):
        ConstantEta(-0.1)


# ------------------------------------------------------------------ components, save / load, dtypes


def test_components_are_the_base_pipelines(member, pipes):
    """upstream ``test_components_function``; and ``from_pipe`` turns a base pipeline into TDG, sharing its modules."""
    tdg, base = pipes
    assert set(tdg.components) == set(base.components)
    converted = member.tdg.from_pipe(base)
    assert isinstance(converted, member.tdg) and converted.transformer is base.transformer


def test_save_load_local_and_as_custom_pipeline(member, pipes, tmp_path):
    """upstream ``test_save_load_local`` / ``test_save_load_optional_components``; loaded through
    ``custom_pipeline=pipelines/<folder>`` it is the TDG class and makes the same images (the other
    folders' tests load theirs into the same process: see ``test_the_three_folders_load_side_by_side``).
    """
    tdg = pipes[0]
    tdg.save_pretrained(tmp_path)
    loaded = DiffusionPipeline.from_pretrained(
        tmp_path, custom_pipeline=str(REPO / "pipelines" / member.folder), trust_remote_code=True
    )
    assert type(loaded).__name__ == member.tdg.__name__
    for name in getattr(member.base, "_optional_components", []):
        assert getattr(loaded, name) is None
    loaded.set_progress_bar_config(disable=True)
    a = tdg(R, G, generator=_gen(5), **_kw(member))
    b = loaded(R, G, generator=_gen(5), **_kw(member))
    assert torch.equal(a.images, b.images) and torch.equal(a.guide_images, b.guide_images)


def test_the_three_folders_load_side_by_side(tmp_path):
    """diffusers executes every local folder's ``pipeline.py`` into one module; each shell leaves only its
    class there, so the three folders load one after another (and back) in one process, each as its
    TDG class making its class's images (whole tensors, bit for bit)."""
    order = ["flux", "flux2", "flux2_klein", "flux", "flux2_klein"]
    built = {name: FAMILY[name].build(FAMILY[name].tdg) for name in set(order)}
    for name, pipe in built.items():
        pipe.save_pretrained(tmp_path / name)
    for name in order:
        member = FAMILY[name]
        loaded = DiffusionPipeline.from_pretrained(
            tmp_path / name, trust_remote_code=True, custom_pipeline=str(REPO / "pipelines" / member.folder)
        )
        assert type(loaded).__name__ == member.tdg.__name__
        loaded.set_progress_bar_config(disable=True)
        a = built[name](R, G, generator=_gen(5), **_kw(member))
        b = loaded(R, G, generator=_gen(5), **_kw(member))
        torch.testing.assert_close(b.images, a.images, atol=0, rtol=0)
        torch.testing.assert_close(b.guide_images, a.guide_images, atol=0, rtol=0)


def test_to_dtype_and_half_precision_has_no_nan(member):
    """upstream ``test_to_dtype`` / ``test_half_precision_inference_no_nan`` (bfloat16: CPU)."""
    pipe = member.build(member.tdg).to(torch.bfloat16)
    dtypes = {m.dtype for m in pipe.components.values() if isinstance(m, torch.nn.Module)}
    assert dtypes == {torch.bfloat16}
    out = pipe(R, G, generator=_gen(6), **_kw(member, output_type="np"))
    assert out.images.shape == (1, SIZE, SIZE, 3) and not torch.isnan(torch.from_numpy(out.images)).any()


def test_variants_and_dtype_dict_load(tmp_path, tiny_flux):
    """upstream ``test_serialization_with_variants`` / ``test_loading_with_variants`` / ``test_torch_dtype_dict``."""
    tiny_flux.save_pretrained(tmp_path, variant="fp16")
    assert list((tmp_path / "transformer").glob("*.fp16.safetensors"))
    loaded = TiedDiffusionPipeline.from_pretrained(
        tmp_path, variant="fp16", torch_dtype={"transformer": torch.bfloat16, "default": torch.float32}
    )
    assert loaded.transformer.dtype == torch.bfloat16 and loaded.vae.dtype == torch.float32


# ------------------------------------------------------------------ FLUX.1 specifics (test_pipeline_flux.py)


def test_image_output_shape(member, pipes):
    """upstream ``test_flux_image_output_shape`` / ``test_image_output_shape``: sides round down to a
    multiple of 2 * vae_scale_factor."""
    pipe = pipes[0]
    for height, width in [(32, 32), (24, 19)]:
        out = pipe(R, G, **_kw(member, height=height, width=width, num_inference_steps=1))
        step = 2 * pipe.vae_scale_factor
        assert out.images.shape[-2:] == out.guide_images.shape[-2:] == (height - height % step, width - width % step)


def test_klein_image_input_conditions_both_sides():
    """upstream ``test_image_input`` (FLUX.2 [klein]): a conditioning image serves the whole pair, and at
    eta = 0 the pair equals Flux2KleinPipeline's batch of two with that image bit for bit."""
    from PIL import Image

    member = FAMILY["flux2_klein"]
    tdg, base = member.build(member.tdg), member.build(member.base)
    image = Image.new("RGB", (64, 64), (200, 40, 40))
    out = tdg(R, G, image=image, eta_schedule=ConstantEta(0.0), generator=_gen(14), **_kw(member))
    plain = tdg(R, G, eta_schedule=ConstantEta(0.0), generator=_gen(14), **_kw(member))
    assert not torch.equal(out.images, plain.images)
    latents = member.reference_latents(base, _gen(14), 1)
    batch = base(image=image, prompt=[R, G], latents=torch.cat([latents, latents]), **_kw(member)).images
    assert torch.equal(out.images[0], batch[0]) and torch.equal(out.guide_images[0], batch[1])


def test_flux_true_cfg_changes_the_images_and_negative_embeds_are_checked(tiny_flux):
    """upstream ``test_flux_true_cfg`` and ``test_flux_negative_embeds_shape_check``."""
    kw = _kw(FAMILY["flux"])
    plain = tiny_flux(R, G, generator=_gen(7), **kw)
    cfg = tiny_flux(R, G, negative_prompt="blurry", true_cfg_scale=2.0, generator=_gen(7), **kw)
    assert not torch.allclose(plain.images, cfg.images)
    embeds = dict(
        reference_prompt_embeds=torch.randn(1, 4, 32),
        guide_prompt_embeds=torch.randn(1, 4, 32),
        reference_pooled_prompt_embeds=torch.randn(1, 32),
        guide_pooled_prompt_embeds=torch.randn(1, 32),
    )
    negative = dict(negative_prompt_embeds=torch.randn(1, 5, 32), negative_pooled_prompt_embeds=torch.randn(1, 32))
    with pytest.raises(ValueError, match="must have the same shape when passed directly"):
        tiny_flux(**embeds, **negative, true_cfg_scale=2.0, **kw)
    tiny_flux(**embeds, **negative, true_cfg_scale=1.0, **kw)  # no CFG: the negative is not used


def test_klein_cfg_with_precomputed_embeddings_needs_the_negative():
    pipe = tiny_flux2_pipeline(TiedFlux2KleinPipeline)
    embeds = dict(reference_prompt_embeds=torch.randn(1, 32, 48), guide_prompt_embeds=torch.randn(1, 32, 48))
    with pytest.raises(ValueError, match="negative_prompt_embeds"):
        pipe(**embeds, guidance_scale=4.0, **_kw(FAMILY["flux2_klein"]))
    out = pipe(
        **embeds,
        negative_prompt_embeds=torch.randn(1, 32, 48),
        guidance_scale=4.0,
        generator=_gen(8),
        eta_schedule=ConstantEta(1.0),
        **_kw(FAMILY["flux2_klein"]),
    )
    assert torch.equal(out.images, out.guide_images)


@pytest.mark.parametrize("name", list(FAMILY))
def test_fused_qkv_projections_keep_the_images(name):
    """upstream ``test_fused_qkv_projections``."""
    member = FAMILY[name]
    pipe = member.build(member.tdg)
    before = pipe(R, G, generator=_gen(9), **_kw(member)).images
    pipe.transformer.fuse_qkv_projections()
    after = pipe(R, G, generator=_gen(9), **_kw(member)).images
    torch.testing.assert_close(before, after, atol=1e-3, rtol=0)


def test_ip_adapter_reaches_both_sides_and_matches_flux_pipeline():
    """upstream ``TestFluxPipelineIPAdapter.test_ip_adapter`` (one adapter): scale 0 changes nothing, a large
    scale changes the images; and TDG at eta = 0 equals FluxPipeline with the same adapter bit for bit."""
    kw = _kw(FAMILY["flux"], negative_prompt="", true_cfg_scale=4.0)
    embeds = torch.randn(1, 1, 32, generator=_gen(12))
    ip = dict(ip_adapter_image_embeds=[embeds], negative_ip_adapter_image_embeds=[embeds * 0.5])
    pipe = tiny_flux_pipeline(seed=0)
    without = pipe(R, G, generator=_gen(13), **kw)
    pipe.load_ip_adapter(
        tiny_flux_ip_adapter(pipe.transformer), weight_name="", image_encoder_pretrained_model_name_or_path=None
    )
    pipe.set_ip_adapter_scale(0.0)
    zero = pipe(R, G, generator=_gen(13), **ip, **kw)
    torch.testing.assert_close(zero.images, without.images, atol=1e-5, rtol=0)
    pipe.set_ip_adapter_scale(42.0)
    strong = pipe(R, G, eta_schedule=ConstantEta(0.0), generator=_gen(13), **ip, **kw)
    assert (strong.images - without.images).abs().max() > 1e-2
    base = FluxPipeline(**pipe.components)
    base.set_progress_bar_config(disable=True)
    latents = _flux_reference_latents(base, _gen(13), 1)
    batch = base(
        prompt=[R, G], latents=torch.cat([latents, latents]), **ip, **(kw | {"negative_prompt": ["", ""]})
    ).images
    assert torch.equal(strong.images[0], batch[0]) and torch.equal(strong.guide_images[0], batch[1])


def test_layerwise_casting_runs(tiny_flux):
    """upstream ``test_layerwise_casting_inference`` (float8 storage, float32 compute)."""
    pipe = tiny_flux_pipeline(seed=0)
    pipe.transformer.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn, compute_dtype=torch.float32)
    out = pipe(R, G, generator=_gen(10), **_kw(FAMILY["flux"]))
    assert torch.isfinite(out.images).all()


def test_lora_scale_reaches_the_transformer_through_joint_attention_kwargs():
    """upstream ``LoraTesterMixin`` (the scale part): PEFT reads ``joint_attention_kwargs['scale']``."""
    peft = pytest.importorskip("peft", reason="LoRA needs peft, which this environment does not install")
    pipe = tiny_flux_pipeline(seed=0)
    kw = _kw(FAMILY["flux"])
    plain = pipe(R, G, generator=_gen(11), **kw).images
    pipe.transformer.add_adapter(
        peft.LoraConfig(r=4, lora_alpha=4, target_modules=["to_q", "to_k", "to_v"], init_lora_weights=False)
    )
    zero = pipe(R, G, generator=_gen(11), joint_attention_kwargs={"scale": 0.0}, **kw).images
    full = pipe(R, G, generator=_gen(11), joint_attention_kwargs={"scale": 1.0}, **kw).images
    torch.testing.assert_close(zero, plain, atol=1e-5, rtol=0)
    assert not torch.allclose(full, plain)


def test_concurrent_calls_each_see_their_own_state_and_one_is_published():
    """Thread safety with published state: a callback reads its own call's ``guidance_scale`` while other
    calls run, and after them the pipeline holds the state of one of them (the last to finish)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    pipe = tiny_flux_pipeline(seed=0)
    scales, barrier = [1.5, 2.5, 3.5, 4.5], threading.Barrier(4)
    seen: dict[float, set[float]] = {scale: set() for scale in scales}

    def call(scale):
        def record(pipeline, i, t, kwargs):
            seen[scale].add(pipeline.guidance_scale)
            return kwargs

        barrier.wait(timeout=30)
        pipe(R, G, guidance_scale=scale, callback_on_step_end=record, **_kw(FAMILY["flux"]))

    with ThreadPoolExecutor(len(scales)) as pool:
        list(pool.map(call, scales))
    assert seen == {scale: {scale} for scale in scales}
    assert pipe.guidance_scale in scales and pipe.num_timesteps == STEPS and pipe.current_timestep is None
