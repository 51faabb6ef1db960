"""TDG with diffusers' caches and torch.compile on the world Flux, and the tied
step's overhead work, which must leave every image bit for bit as it was."""

import copy
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from concept_grounding.errors import UsageError
from concept_grounding.tdg import ConstantEta, EtaSchedule, TiedDiffusionPipeline
from concept_grounding.tdg import pipeline as pipeline_module
from concept_grounding.tdg.acceleration import CACHES, Acceleration, TransformerCache, accelerated
from concept_grounding.tdg.generate import generate_images
from concept_grounding.tdg.generate_config import GenerateConfig
from concept_grounding.tdg.plan import Pairing, plan_jobs
from concept_grounding.tdg.resume import MANIFEST_FILE, ManifestMismatchError
from concept_grounding.tdg.tie import tie_pair
from concept_grounding.worldflux import load_world_flux, world_flux_call_kwargs
from concept_grounding.worldflux.source import WorldFlux

STEPS = 8
R, G = "a photo of a Blue Jay", "a photo of a bird with a red colored breast"
#: one setting per cache that changes the images of an 8-step world-Flux call (measured)
ACTING = {
    "first-block": "first-block:threshold=0.5",
    "taylorseer": "taylorseer",
    "pyramid-attention": "pyramid-attention",
    "faster": "faster",
    "mag": "mag",
    "text-kv": "text-kv",  # lossless: it changes nothing
}


@pytest.fixture(scope="module")
def world():
    """The shipped world Flux as a TiedDiffusionPipeline (tests enable caches only inside ``accelerated``)."""
    return load_world_flux(pipeline_cls=TiedDiffusionPipeline)


def _kw(pipe, **extra):
    return dict(world_flux_call_kwargs(pipe, num_inference_steps=STEPS), negative_prompt="", **extra)


def _pair(pipe, seed=0, schedule=None, **extra):
    out = pipe(
        R,
        G,
        eta_schedule=schedule or EtaSchedule(),
        generator=torch.Generator().manual_seed(seed),
        output_type="pt",
        **_kw(pipe, **extra),
    )
    return torch.cat([out.reference_images, out.guide_images]), out


def _transformer_inputs(pipe):
    """Records the ``hidden_states`` of every transformer call (cond and uncond passes)."""
    seen = []
    handle = pipe.transformer.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs["hidden_states"].clone()), with_kwargs=True
    )
    return seen, handle


# ---------------------------------------------------------------- overhead work: images unchanged


def _step_before_issue_25(scheduler, schedule, granularity="element"):
    """``tied_scheduler`` as it was before the overhead work: ``float(timestep)`` and the tie at every step."""
    tied = copy.deepcopy(scheduler)
    original = tied.step
    num_train = float(tied.config.num_train_timesteps)
    record = []

    def step(model_output, timestep, sample, *args, **kwargs):
        t = float(timestep) / num_train
        eta = float(schedule(t))
        e_r, e_g = model_output.chunk(2)
        e_r, e_g = tie_pair(e_r, e_g, eta, granularity)
        record.append((t, eta))
        return original(torch.cat([e_r, e_g]), timestep, sample, *args, **kwargs)

    tied.step = step
    return tied, record


@pytest.mark.slow  # three full generations per case, each compared bit for bit
@pytest.mark.parametrize(("model", "granularity"), [("world", "element"), ("tiny", "element"), ("tiny", "token")])
def test_overhead_work_leaves_every_image_bit_identical(model, granularity, world, tiny_flux, monkeypatch):
    pipe = world if model == "world" else tiny_flux
    kw = _kw(pipe) if model == "world" else dict(height=16, width=16, num_inference_steps=STEPS, max_sequence_length=32)
    calls = [
        ([R, "a photo of a Cardinal"], [G, "a photo of a bird"], EtaSchedule(0.2, 0.9, 10)),
        (R, G, EtaSchedule(0.3, 0.6, 1.0)),
        (R, G, ConstantEta(0.0)),
        (R, G, ConstantEta(1.0)),
    ]

    def run(refs, guides, schedule):
        n = 1 if isinstance(refs, str) else len(refs)
        out = pipe(
            refs,
            guides,
            eta_schedule=schedule,
            granularity=granularity,
            output_type="pt",
            generator=[torch.Generator().manual_seed(7 + i) for i in range(n)],
            **kw,
        )
        return out.reference_images, out.guide_images, out.t_per_step, out.eta_per_step

    now = [run(*call) for call in calls]
    monkeypatch.setattr(pipeline_module, "tied_scheduler", _step_before_issue_25)
    before = [run(*call) for call in calls]
    etas = [eta for *_, step_etas in now for eta in step_etas]
    assert 0.0 in etas and 1.0 in etas and any(0.0 < e < 1.0 for e in etas)  # every branch of the step ran
    for (r1, g1, t1, e1), (r0, g0, t0, e0) in zip(now, before):
        assert torch.equal(r1, r0) and torch.equal(g1, g0)
        assert t1 == t0 and e1 == e0


# ---------------------------------------------------------------- caches


def test_every_offered_cache_is_covered():
    assert set(ACTING) == set(CACHES)


@pytest.fixture(scope="module")
def plain(world):
    """The world Flux's images of ``_pair(seed=1)`` with no cache."""
    return _pair(world, seed=1)[0]


@pytest.mark.slow  # two cached generations per diffusers cache
@pytest.mark.parametrize("name", list(ACTING))
def test_cache_is_deterministic_and_sees_the_tied_latents_at_every_step(world, plain, name):
    with accelerated(world, Acceleration(TransformerCache.parse(ACTING[name])), STEPS):
        assert world.transformer.is_cache_enabled
        seen, handle = _transformer_inputs(world)
        try:
            _, tied = _pair(world, seed=0, schedule=ConstantEta(1.0))
        finally:
            handle.remove()
        # eta = 1 at every step: the pair moves identically, so every transformer call the
        # cache sees holds the same latents in both halves of [reference; guide]
        assert tied.eta_per_step == [1.0] * STEPS
        assert len(seen) == 2 * STEPS  # cond and uncond (true CFG) per step
        assert all(torch.equal(x[0], x[1]) for x in seen)
        a, _ = _pair(world, seed=1)
        _pair(world, seed=2)  # another call in between: the cache's state must not carry over
        b, _ = _pair(world, seed=1)
        assert torch.equal(a, b)
    assert not world.transformer.is_cache_enabled
    if name == "text-kv":
        assert torch.equal(a, plain)  # lossless
    else:
        assert not torch.equal(a, plain)  # the cache acted
    assert (a - plain).abs().mean() * 255 < 20


def test_first_block_cache_skips_the_remaining_blocks_until_disabled(world, plain):
    calls = []
    handle = world.transformer.single_transformer_blocks[-1].proj_out.register_forward_hook(lambda *a: calls.append(1))
    try:
        _pair(world)
        plain_calls = len(calls)
        calls.clear()
        with accelerated(world, Acceleration(TransformerCache.parse("first-block:threshold=0.5")), STEPS):
            _pair(world)
    finally:
        handle.remove()
    assert plain_calls == 2 * STEPS and len(calls) < plain_calls
    assert torch.equal(_pair(world, seed=1)[0], plain)  # disabled on exit: plain images again


def test_timestep_driven_caches_read_the_running_call(world):
    """PyramidAttentionBroadcast / FasterCache read ``pipe.current_timestep``: on a
    TiedDiffusionPipeline that is the timestep of the call in progress (its per-call view's)."""
    seen = []

    def on_step(pipeline, i, t, kwargs):
        seen.append((float(t), float(world.current_timestep)))
        return {}

    with accelerated(world, Acceleration(TransformerCache.parse("pyramid-attention")), STEPS):
        _pair(world, callback_on_step_end=on_step)
    assert len(seen) == STEPS and all(t == current for t, current in seen)
    assert world.current_timestep is None


def test_calls_with_a_cache_run_one_at_a_time_and_equal_the_calls_alone(world):
    with accelerated(world, Acceleration(TransformerCache.parse("first-block:threshold=0.5")), STEPS):
        alone = [_pair(world, seed=s)[0] for s in range(3)]
        barrier = threading.Barrier(3)

        def call(seed):
            barrier.wait(timeout=30)
            return _pair(world, seed=seed)[0]

        with ThreadPoolExecutor(3) as pool:
            together = list(pool.map(call, range(3)))
    assert all(torch.equal(a, b) for a, b in zip(alone, together))


def test_cache_names_and_options_are_checked():
    assert TransformerCache.parse("first-block:threshold=0.2").manifest() == {"name": "first-block", "threshold": 0.2}
    assert TransformerCache.parse("faster").manifest()["is_guidance_distilled"] is True
    assert TransformerCache.parse("mag").manifest(20)["num_inference_steps"] == 20
    with pytest.raises(UsageError, match="did you mean 'first-block'"):
        TransformerCache.parse("first-blok")
    with pytest.raises(UsageError, match="no option 'thresh'.*threshold"):
        TransformerCache.parse("first-block:thresh=0.2")
    with pytest.raises(UsageError, match="is_guidance_distilled must stay True"):
        TransformerCache.parse("faster:is_guidance_distilled=false")
    with pytest.raises(UsageError, match="option=value"):
        TransformerCache.parse("first-block:0.2")


# ---------------------------------------------------------------- generate: the manifest records the choice


#: the world Flux as the writer sees it: 32 px, 24-token prompts, true CFG
WORLD = WorldFlux().resolve()


def _settings(out, acceleration=Acceleration(), **changes):
    return GenerateConfig(
        out=out, num_inference_steps=4, guidance_scale=3.5, size=32, acceleration=acceleration, **changes
    )


JOBS = plan_jobs([Pairing("073.Blue_Jay", "has_crown_color::yellow")], 2, base_seed=0)


def test_generate_records_the_cache_and_refuses_a_resume_with_another(world, tmp_path):
    cached = Acceleration(TransformerCache.parse("first-block:threshold=0.3"))
    assert (
        generate_images(world, JOBS, _settings(tmp_path, cached, batch_size=2, max_images=2), WORLD, progress=False)
        == 2
    )
    assert not world.transformer.is_cache_enabled  # removed after the run
    manifest = json.loads((tmp_path / MANIFEST_FILE).read_text())
    assert manifest["cache"] == {"name": "first-block", "threshold": 0.3} and manifest["compile"] is False
    for other in (
        Acceleration(),
        Acceleration(TransformerCache.parse("first-block:threshold=0.2")),
        Acceleration(cached.cache, compile=True),
    ):
        with pytest.raises(ManifestMismatchError) as err:
            generate_images(world, JOBS, _settings(tmp_path, other, batch_size=2), WORLD, progress=False)
        assert {d[0] for d in err.value.differences} <= {"cache", "compile"}
    assert generate_images(world, JOBS, _settings(tmp_path, cached, batch_size=2), WORLD, progress=False) == 0


def test_folders_from_before_the_cache_setting_resume_plain(world, tmp_path):
    generate_images(world, JOBS[:1], _settings(tmp_path, batch_size=1), WORLD, progress=False)
    path = tmp_path / MANIFEST_FILE
    older = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("cache", "compile")}
    path.write_text(json.dumps(older))
    assert generate_images(world, JOBS[:1], _settings(tmp_path, batch_size=1), WORLD, progress=False) == 0
    with pytest.raises(ManifestMismatchError, match="cache"):
        generate_images(
            world,
            JOBS[:1],
            _settings(tmp_path, Acceleration(TransformerCache.parse("text-kv")), batch_size=1),
            WORLD,
            progress=False,
        )


def test_generate_refuses_a_cache_the_manifest_would_not_know(world, tmp_path):
    world.transformer.enable_cache(TransformerCache.parse("text-kv").config(world))
    try:
        with pytest.raises(ValueError, match="config.acceleration"):
            generate_images(world, JOBS, _settings(tmp_path), WORLD, progress=False)
    finally:
        world.transformer.disable_cache()


def test_command_maps_cache_and_compile_onto_the_config(tmp_path, capsys):
    import argparse

    from concept_grounding.commands import generate as command

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args(["--out", str(tmp_path / "o"), "--cache", "first-block:threshold=0.25", "--compile"])
    assert command.config_from_args(args).acceleration == Acceleration(
        TransformerCache("first-block", (("threshold", 0.25),)), compile=True
    )
    assert command.config_from_args(parser.parse_args(["--out", str(tmp_path / "o")])).acceleration == Acceleration()
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", str(tmp_path / "o"), "--cache", "sea"])
    assert "unknown cache 'sea'" in capsys.readouterr().err


# ---------------------------------------------------------------- torch.compile


@pytest.mark.slow
def test_compiled_transformer_with_and_without_a_cache():
    """Regional compilation (about 1.5 min of inductor on 2 CPU cores), then a cache on the
    compiled blocks: deterministic, tied at every step, within float error of eager."""
    pipe = load_world_flux(pipeline_cls=TiedDiffusionPipeline)  # compiling changes it: not the shared fixture
    eager, _ = _pair(pipe, seed=3)
    eager_cached = None
    with accelerated(pipe, Acceleration(TransformerCache.parse("first-block:threshold=0.5")), STEPS):
        eager_cached, _ = _pair(pipe, seed=3)
    with accelerated(pipe, Acceleration(compile=True), STEPS):
        compiled, _ = _pair(pipe, seed=3)
        assert torch.equal(compiled, _pair(pipe, seed=3)[0])
        assert (compiled - eager).abs().max() < 1e-3
    for cache in (None, TransformerCache.parse("first-block:threshold=0.5")):
        with accelerated(pipe, Acceleration(cache, compile=True), STEPS):
            seen, handle = _transformer_inputs(pipe)
            try:
                _, tied = _pair(pipe, seed=0, schedule=ConstantEta(1.0))
            finally:
                handle.remove()
            assert tied.eta_per_step == [1.0] * STEPS and all(torch.equal(x[0], x[1]) for x in seen)
            if cache is not None:
                both, _ = _pair(pipe, seed=3)
                assert torch.equal(both, _pair(pipe, seed=3)[0])
                assert (both - eager_cached).abs().mean() < 1e-3
    assert np.isfinite(compiled.numpy()).all()


def test_a_cache_diffusers_cannot_run_on_flux2_is_refused_before_any_step():
    """diffusers 0.42's first-block and faster hooks fail inside FLUX.2's blocks (a TypeError at
    the first step); TDG refuses them in one line that names the caches that run."""
    from concept_grounding.errors import UsageError
    from concept_grounding.testing import tiny_flux2_pipeline

    pipe = tiny_flux2_pipeline(klein=True)
    for name in ("first-block", "faster"):
        with (
            pytest.raises(
                UsageError, match=r"--cache: the .* cache does not run on Flux2Transformer2DModel.*taylorseer"
            ),
            accelerated(pipe, Acceleration(cache=TransformerCache.parse(name))),
        ):
            pass
