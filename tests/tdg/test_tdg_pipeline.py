"""TiedDiffusionPipeline on a tiny FLUX built from configs (no downloads)."""

from pathlib import Path

import pytest
import torch
from diffusers import DiffusionPipeline, FluxPipeline

from concept_grounding.tdg import (
    ConstantEta,
    EtaSchedule,
    TiedDiffusionPipeline,
)
from concept_grounding.testing import tiny_flux_pipeline

REPO = Path(__file__).resolve().parents[2]
KW = dict(height=16, width=16, num_inference_steps=4, max_sequence_length=32, output_type="pt")
R, G = "a photo of a blue jay with a yellow crown", "a photo of a bird with a yellow crown"


@pytest.fixture(scope="module")
def pipe(tiny_flux):
    """The session's tiny TiedDiffusionPipeline (conftest ``tiny_flux``, seed 0)."""
    return tiny_flux


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _latent_recorder(store):
    def callback(pipeline, i, t, kwargs):
        store.append(kwargs["latents"].clone())
        return {}

    return callback


def test_eta_one_makes_the_pair_identical_at_every_step(pipe):
    steps = []
    out = pipe(
        R, G, eta_schedule=ConstantEta(1.0), generator=_gen(0), callback_on_step_end=_latent_recorder(steps), **KW
    )
    assert len(steps) == 4
    for latents in steps:
        assert torch.equal(latents[0], latents[1])
    assert torch.equal(out.reference_images, out.guide_images)
    assert out.eta_per_step == [1.0] * 4


def test_eta_zero_equals_plain_flux_from_the_same_latents(pipe):
    out = pipe(R, G, eta_schedule=ConstantEta(0.0), generator=_gen(1), **KW)
    flux = tiny_flux_pipeline(FluxPipeline, seed=0)
    lat, _ = flux.prepare_latents(1, 1, 16, 16, torch.float32, "cpu", _gen(1))
    batch = flux([R, G], latents=torch.cat([lat, lat]), **KW).images
    assert torch.equal(out.reference_images[0], batch[0])
    assert torch.equal(out.guide_images[0], batch[1])
    alone_r = flux(R, generator=_gen(1), **KW).images[0]
    alone_g = flux(G, latents=lat, **KW).images[0]
    torch.testing.assert_close(out.reference_images[0], alone_r, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.guide_images[0], alone_g, atol=1e-5, rtol=0)


def test_schedule_applied_per_step_and_tie_changes_the_images(pipe):
    s = EtaSchedule(t_min=0.2, t_max=0.6, k=1)
    out = pipe(R, G, eta_schedule=s, generator=_gen(2), **KW)
    assert out.t_per_step == pytest.approx([1.0, 0.75, 0.5, 0.25])
    assert out.eta_per_step == pytest.approx([1.0, 1.0, 0.75, 0.125])
    free = pipe(R, G, eta_schedule=ConstantEta(0.0), generator=_gen(2), **KW)
    assert not torch.equal(out.reference_images, free.reference_images)
    assert not torch.equal(out.reference_images, out.guide_images)


def test_multi_pair_batch_layout_and_generators(pipe):
    refs, guides = [R, "a photo of a cardinal"], [G, "a photo of a bird"]
    out = pipe(
        refs,
        guides,
        num_images_per_prompt=2,
        eta_schedule=ConstantEta(1.0),
        generator=[_gen(s) for s in (10, 11, 12, 13)],
        **KW,
    )
    assert out.reference_images.shape == (4, 3, 16, 16) and out.guide_images.shape == (4, 3, 16, 16)
    assert torch.equal(out.reference_images, out.guide_images)
    # pair 1, image 0 sits at row 1 * 2 + 0 and used generator 12: same as that pair alone
    alone = pipe(refs[1], guides[1], eta_schedule=ConstantEta(1.0), generator=_gen(12), **KW)
    torch.testing.assert_close(out.reference_images[2], alone.reference_images[0], atol=1e-5, rtol=0)
    assert not torch.allclose(out.reference_images[2], out.reference_images[3])


def test_multi_pair_with_schedule_matches_pairs_run_alone(pipe):
    refs, guides = [R, "a photo of a cardinal"], [G, "a photo of a bird"]
    s = EtaSchedule(0.2, 0.9, 1)
    out = pipe(refs, guides, eta_schedule=s, generator=[_gen(20), _gen(21)], **KW)
    for i in range(2):
        alone = pipe(refs[i], guides[i], eta_schedule=s, generator=_gen(20 + i), **KW)
        torch.testing.assert_close(out.reference_images[i], alone.reference_images[0], atol=1e-4, rtol=0)
        torch.testing.assert_close(out.guide_images[i], alone.guide_images[0], atol=1e-4, rtol=0)


def test_true_cfg_and_token_granularity_run(pipe):
    out = pipe(
        R, G, negative_prompt="blurry", true_cfg_scale=2.0, eta_schedule=ConstantEta(1.0), generator=_gen(3), **KW
    )
    assert torch.equal(out.reference_images, out.guide_images)
    tok = pipe(R, G, granularity="token", t_min=0.2, t_max=0.9, k=1, generator=_gen(3), **KW)
    el = pipe(R, G, granularity="element", t_min=0.2, t_max=0.9, k=1, generator=_gen(3), **KW)
    assert not torch.equal(tok.reference_images, el.reference_images)


def test_return_tuple_and_scheduler_restored(pipe):
    refs, guides, etas = pipe(R, G, generator=_gen(4), return_dict=False, **KW)
    assert refs.shape == guides.shape == (1, 3, 16, 16) and len(etas) == 4
    assert "step" not in vars(pipe.scheduler)


def test_concurrent_calls_from_threads_equal_the_calls_alone(pipe):
    """One shared pipeline, six calls at once (different prompts, seeds, step counts,
    schedules and T5 lengths): each gets exactly its sequential images and etas. Before the
    per-call scheduler, calls patched the shared ``scheduler.step`` and overwrote each
    other's step index (IndexError or wrong images in every round)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    jobs = [
        (f"a photo of bird number {i}", G, 2 + i % 3, 100 + i, 16 + 16 * (i % 2), EtaSchedule(0.2, 0.9, 1 + i))
        for i in range(6)
    ]

    def call(job, barrier=None):
        ref, guide, steps, seed, length, schedule = job
        if barrier is not None:
            barrier.wait(timeout=30)
        kw = dict(KW, num_inference_steps=steps, max_sequence_length=length)
        return pipe(ref, guide, eta_schedule=schedule, generator=_gen(seed), **kw)

    alone = [call(job) for job in jobs]
    scheduler = pipe.scheduler
    for _ in range(2):
        barrier = threading.Barrier(len(jobs))
        with ThreadPoolExecutor(len(jobs)) as pool:
            together = list(pool.map(lambda job, barrier=barrier: call(job, barrier), jobs))
        for a, b in zip(alone, together):
            assert torch.equal(a.reference_images, b.reference_images) and torch.equal(a.guide_images, b.guide_images)
            assert a.eta_per_step == b.eta_per_step and a.t_per_step == b.t_per_step
    assert pipe.scheduler is scheduler and "step" not in vars(scheduler)


def test_save_and_custom_pipeline_reload(pipe, tmp_path):
    pipe.save_pretrained(tmp_path / "tiny")
    loaded = DiffusionPipeline.from_pretrained(
        tmp_path / "tiny", custom_pipeline=str(REPO / "pipelines" / "tied_diffusion"), trust_remote_code=True
    )
    assert isinstance(loaded, TiedDiffusionPipeline)
    loaded.set_progress_bar_config(disable=True)
    a = pipe(R, G, generator=_gen(5), **KW)
    b = loaded(R, G, generator=_gen(5), **KW)
    assert torch.equal(a.reference_images, b.reference_images) and torch.equal(a.guide_images, b.guide_images)


def test_bad_inputs(pipe):
    with pytest.raises(ValueError, match="same length"):
        pipe([R, R], [G], **KW)
    with pytest.raises(ValueError, match="t_min must be <= t_max"):
        pipe(R, G, t_min=0.8, t_max=0.3, **KW)
    with pytest.raises(ValueError, match="k must be > 0"):
        pipe(R, G, k=0, **KW)
    with pytest.raises(TypeError, match="'prompt'"):  # renamed: reference_prompt / guide_prompt
        pipe(R, G, prompt="x", **KW)
    with pytest.raises(ValueError, match="granularity"):
        pipe(R, G, granularity="pixel", **KW)
    with pytest.raises(ValueError, match="generators"):
        pipe(R, G, generator=[_gen(0), _gen(1)], **KW)
    assert "step" not in vars(pipe.scheduler)
