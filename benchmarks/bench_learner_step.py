"""A LoRA learner step: the project's loop against a reference loop written with peft and diffusers'
training utilities, on the same tiny Flux (``concept_grounding.tdg.tiny``), in one run.

Both train the same LoRA (peft ``LoraConfig``, rank ``--rank``, diffusers' Flux targets) on the same
random latents with precomputed prompt embeddings; a step draws the batch, noise and
``compute_density_for_timestep_sampling`` timesteps, runs one forward and backward, clips the
gradient norm to 1 and steps AdamW. The two loops alternate in ``--rounds`` blocks of ``--steps``
steps (after one untimed block each); printed: each loop's median seconds per step and their ratio
(project / reference; the target is at most 1.1).

    python benchmarks/bench_learner_step.py                      # about a minute on 2 cores
    python benchmarks/bench_learner_step.py --layers 4 --side 32 --json step.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

TARGETS = ["to_k", "to_q", "to_v", "to_out.0", "add_k_proj", "add_q_proj", "add_v_proj", "to_add_out"]


def _pipe(layers: int, text_tokens: int) -> Any:
    from diffusers import FluxPipeline

    from concept_grounding.tdg.tiny import tiny_flux_pipeline

    pipe = tiny_flux_pipeline(FluxPipeline, seed=0, num_layers=layers, num_single_layers=layers)
    pipe.tokenizer_2.model_max_length = text_tokens
    return pipe


def _latents(side: int) -> Any:
    import torch

    from concept_grounding.learners.train import Latents

    g = torch.Generator().manual_seed(0)
    return Latents(torch.randn(8, 1, side, side, generator=g), 0.1 * torch.rand(8, 1, side, side, generator=g))


def project_loop(args: argparse.Namespace) -> Any:
    """``step(s)``: one step of the learners' own loop (:func:`~concept_grounding.learners.train.training_step`)."""
    from concept_grounding.learners import LearnConfig
    from concept_grounding.learners.train import prepare_trainer, training_step

    config = LearnConfig(method="lora", images="unused", batch=args.batch, rank=args.rank, lr=1e-3, progress=False)
    trainer = prepare_trainer(_pipe(args.layers, args.text_tokens), config)
    latents = _latents(args.side)
    return lambda s: training_step(trainer, s, latents)


def reference_loop(args: argparse.Namespace) -> Any:
    """``step(s)``: one step written directly with peft, FluxPipeline's helpers and diffusers' training utilities."""
    import torch
    from diffusers import FluxPipeline
    from diffusers.training_utils import cast_training_params, compute_density_for_timestep_sampling
    from peft import LoraConfig

    pipe = _pipe(args.layers, args.text_tokens)
    transformer = pipe.transformer
    for module in (transformer, pipe.text_encoder, pipe.text_encoder_2):
        module.requires_grad_(False)
    transformer.add_adapter(
        LoraConfig(r=args.rank, lora_alpha=args.rank, init_lora_weights="gaussian", target_modules=TARGETS)
    )
    cast_training_params(transformer, dtype=torch.float32)
    params = [p for p in transformer.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-2)
    with torch.no_grad():
        embeds, pooled, text_ids = pipe.encode_prompt(
            ["a photo of sks bird"] * args.batch, max_sequence_length=args.text_tokens
        )
    latents = _latents(args.side)
    shift, scale = pipe.vae.config.shift_factor, pipe.vae.config.scaling_factor
    b, c, h, w = args.batch, 1, args.side, args.side
    img_ids = FluxPipeline._prepare_latent_image_ids(b, h // 2, w // 2, "cpu", torch.float32)
    guidance = torch.full((b,), 1.0)

    def step(s: int) -> Any:
        g = torch.Generator().manual_seed(s)
        idx = torch.randint(latents.mean.shape[0], (b,), generator=g)
        model_input = (latents.mean[idx] + latents.std[idx] * torch.randn(b, c, h, w, generator=g) - shift) * scale
        noise = torch.randn(b, c, h, w, generator=g)
        u = compute_density_for_timestep_sampling("logit_normal", b, logit_mean=0.0, logit_std=1.0, generator=g)
        sigmas = u.view(-1, 1, 1, 1)
        noisy = (1.0 - sigmas) * model_input + sigmas * noise
        pred = transformer(
            hidden_states=FluxPipeline._pack_latents(noisy, b, c, h, w),
            timestep=u,
            guidance=guidance,
            pooled_projections=pooled,
            encoder_hidden_states=embeds,
            txt_ids=text_ids,
            img_ids=img_ids,
            return_dict=False,
        )[0]
        target = FluxPipeline._pack_latents(noise - model_input, b, c, h, w)
        loss = torch.mean((pred.float() - target.float()) ** 2)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def _block(step: Any, start: int, steps: int) -> float:
    t0 = time.perf_counter()
    for s in range(start, start + steps):
        step(s)
    return (time.perf_counter() - t0) / steps


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Each loop's median seconds per step over ``rounds`` alternating blocks, and their ratio."""
    import torch

    torch.set_num_threads(args.threads)
    loops = {"project": project_loop(args), "reference": reference_loop(args)}
    for step in loops.values():
        _block(step, 0, args.steps)  # untimed: allocation, first calls
    times: dict[str, list[float]] = {name: [] for name in loops}
    for r in range(args.rounds):
        for name, step in loops.items():
            times[name].append(_block(step, (r + 1) * args.steps, args.steps))
    project, reference = (statistics.median(times[n]) for n in ("project", "reference"))
    return {
        "seconds_per_step": {"project": project, "reference": reference},
        "ratio": project / reference,
        "settings": {k: v for k, v in vars(args).items() if k != "json"},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2, help="double- and single-stream blocks each")
    parser.add_argument("--side", type=int, default=32, help="latent side (tokens: (side / 2) ** 2)")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--text-tokens", type=int, default=32)
    parser.add_argument("--steps", type=int, default=8, help="steps per timed block")
    parser.add_argument("--rounds", type=int, default=9, help="alternating timed blocks per loop")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    figures = measure(args)
    sec = figures["seconds_per_step"]
    print(
        f"LoRA step on the tiny Flux ({args.layers}+{args.layers} blocks, {(args.side // 2) ** 2} tokens, "
        f"batch {args.batch}): project {sec['project'] * 1e3:.2f} ms, reference {sec['reference'] * 1e3:.2f} ms, "
        f"ratio {figures['ratio']:.3f} (target <= 1.1)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
