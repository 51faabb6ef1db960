"""One LoRA step of the learners' loop equals a reference written directly with peft and diffusers'
training utilities on the tiny Flux: the same loss, the same gradients, the same updated adapters.

The reference shares only the inputs with the project: the latents, V*'s row, the seed, and the
order in which one step draws from its generator (images, latent samples, noise, timesteps).
"""

from __future__ import annotations

import torch

SEED, BATCH, RANK, LR, GUIDANCE, TEXT_TOKENS = 3, 2, 4, 1e-2, 1.0, 32
TARGETS = ["to_k", "to_q", "to_v", "to_out.0", "add_k_proj", "add_q_proj", "add_v_proj", "to_add_out"]


def _tiny():
    from diffusers import FluxPipeline

    from concept_grounding.tdg.tiny import tiny_flux_pipeline

    pipe = tiny_flux_pipeline(FluxPipeline, seed=1)
    pipe.tokenizer_2.model_max_length = TEXT_TOKENS
    return pipe


def _latents():
    from concept_grounding.learners.train import Latents

    g = torch.Generator().manual_seed(11)
    return Latents(torch.randn(5, 1, 16, 16, generator=g), 0.1 * torch.rand(5, 1, 16, 16, generator=g))


def _project():
    from concept_grounding.learners import LearnConfig
    from concept_grounding.learners.train import prepare_trainer

    config = LearnConfig(
        method="lora", images="unused", batch=BATCH, rank=RANK, lr=LR, seed=SEED, guidance=GUIDANCE, progress=False
    )
    return prepare_trainer(_tiny(), config)


def _reference_adapters(pipe):
    """peft LoRA on the frozen transformer, as diffusers' ``train_dreambooth_lora_flux.py`` adds it."""
    from diffusers.training_utils import cast_training_params
    from peft import LoraConfig

    transformer = pipe.transformer
    transformer.requires_grad_(False)
    pipe.text_encoder.requires_grad_(False)
    pipe.text_encoder_2.requires_grad_(False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        transformer.add_adapter(
            LoraConfig(r=RANK, lora_alpha=RANK, init_lora_weights="gaussian", target_modules=TARGETS)
        )
    cast_training_params(transformer, dtype=torch.float32)
    return {n: p for n, p in transformer.named_parameters() if p.requires_grad}


def _reference_loss(pipe, latents, prompt):
    """The rectified-flow loss of one step, written with FluxPipeline's helpers and diffusers' density."""
    from diffusers import FluxPipeline
    from diffusers.training_utils import compute_density_for_timestep_sampling

    g = torch.Generator().manual_seed(SEED * 1_000_003 + 7)  # step 0's generator
    idx = torch.randint(latents.mean.shape[0], (BATCH,), generator=g)
    mean, std = latents.mean[idx], latents.std[idx]
    sample = mean + std * torch.randn(mean.shape, generator=g)
    model_input = (sample - pipe.vae.config.shift_factor) * pipe.vae.config.scaling_factor
    noise = torch.randn(mean.shape, generator=g)
    u = compute_density_for_timestep_sampling("logit_normal", BATCH, logit_mean=0.0, logit_std=1.0, generator=g)
    sigmas = u.view(-1, 1, 1, 1)
    noisy = (1.0 - sigmas) * model_input + sigmas * noise
    b, c, h, w = model_input.shape
    with torch.no_grad():
        prompt_embeds, pooled, text_ids = pipe.encode_prompt([prompt] * b, max_sequence_length=TEXT_TOKENS)
    pred = pipe.transformer(
        hidden_states=FluxPipeline._pack_latents(noisy, b, c, h, w),
        timestep=u,
        guidance=torch.full((b,), GUIDANCE),
        pooled_projections=pooled,
        encoder_hidden_states=prompt_embeds,
        txt_ids=text_ids,
        img_ids=FluxPipeline._prepare_latent_image_ids(b, h // 2, w // 2, "cpu", torch.float32),
        return_dict=False,
    )[0]
    target = FluxPipeline._pack_latents(noise - model_input, b, c, h, w)
    return torch.mean((pred.float() - target.float()) ** 2)


def _reference(project):
    """A fresh tiny Flux with V*'s row loaded by ``load_textual_inversion``, LoRA, and one step's loss."""
    pipe = _tiny()
    token = project.config.token
    row = project.pipe.text_encoder.get_input_embeddings().weight[-1].detach().clone()
    row_2 = project.pipe.text_encoder_2.get_input_embeddings().weight[-1].detach().clone()
    pipe.load_textual_inversion({token: row}, token=token, text_encoder=pipe.text_encoder, tokenizer=pipe.tokenizer)
    pipe.load_textual_inversion(
        {token: row_2}, token=token, text_encoder=pipe.text_encoder_2, tokenizer=pipe.tokenizer_2
    )
    params = _reference_adapters(pipe)
    return pipe, params, _reference_loss(pipe, _latents(), f"a photo of {token}")


def test_one_lora_step_equals_the_peft_and_diffusers_reference():
    from concept_grounding.learners.train import chunk_losses, training_step

    latents = _latents()
    project = _project()
    _, params, ref_loss = _reference(project)
    assert set(params) == set(project.params) and len(params) > 0
    for name, p in params.items():  # the same adapters before the step
        assert torch.equal(p, project.params[name]), name

    g = torch.Generator().manual_seed(SEED * 1_000_003 + 7)
    (loss,) = chunk_losses(project, [(latents, project.config.prompt())], g)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-6, atol=1e-7)
    loss.backward()
    ref_loss.backward()
    moved = 0
    for name, p in params.items():
        grad = project.params[name].grad
        torch.testing.assert_close(grad, p.grad, rtol=1e-5, atol=1e-8, msg=name)
        moved += int(p.grad.abs().sum() > 0)
    assert moved > 0  # LoRA's B starts at 0: A has no gradient, B has

    # the whole step: clip to norm 1 and AdamW (weight decay 1e-2), as the reference would
    for p in project.params.values():
        p.grad = None
    stepped = training_step(project, 0, latents)
    torch.testing.assert_close(stepped, ref_loss.detach(), rtol=1e-6, atol=1e-7)
    torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
    optimizer = torch.optim.AdamW(params.values(), lr=LR, weight_decay=1e-2)
    optimizer.step()
    for name, p in params.items():
        torch.testing.assert_close(project.params[name], p, rtol=1e-5, atol=1e-7, msg=name)
    assert all(bool(p.abs().sum() > 0) for n, p in project.params.items() if "lora_B" in n)  # the step moved B
