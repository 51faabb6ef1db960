"""Concept learners' cost: seconds per step and per concept, and peak memory, for each method.

Default (world Flux, CPU): each of the four methods learns one held-out world species (eight
32 px renders of a class the world Flux never saw) with ``learn`` for ``--steps`` steps, in
its own process (so each peak resident memory is its own); printed: seconds per step,
seconds for the whole concept (loading, prior images, latents, steps, saving), and the
estimated seconds per concept at ConceptBed's Table 5 step counts (the fixed costs plus
``s/step x steps``).

``--flux-dev-size`` (needs CUDA): FLUX.1-dev's published transformer shape (19 double + 38
single blocks, 24 heads x 128, in_channels 64, joint_attention_dim 4096,
pooled_projection_dim 768, guidance_embeds True; 11.9 B parameters) with random bf16 weights,
small random text encoders (one-layer CLIP 768-wide and T5 4096-wide, word-level tokenizers;
the encoders' cost is not FLUX.1-dev's, their embedding rows are what TI trains), and
1024 x 1024 images as random 16 x 128 x 128 latents (64 x 64 = 4,096 packed tokens; the VAE is
not run), 512 T5 tokens. Each method is set up with the learners' own
``prepare_trainer`` / ``training_step`` (the code ``learn`` runs) on a fresh transformer:
TI, LoRA rank 16, DreamBooth (a full fine-tune with float32 master weights under bf16 autocast,
as diffusers' ``train_dreambooth_flux.py``: 12 B x (4 + 4 + 8) B = 192 GB of weights, gradients
and AdamW moments, more than one 141 GB GPU holds; no 8-bit optimiser, bitsandbytes is not a
dependency) and Custom Diffusion, with gradient checkpointing, batch ``--batch`` (DreamBooth and Custom Diffusion add a
prior batch each step, as ``learn`` does). Printed: s/step (mean of ``--steps`` timed steps
after one untimed), peak GPU memory, and the estimated seconds per concept at Table 5's step
counts (steps only, and with 200 prior images sampled at 28 steps, timed from one forward pass).
``--width-divisor N --device cpu --size 128`` runs the same code on a transformer N times
narrower and shallower (a smoke test; its figures mean nothing).

    python benchmarks/bench_learners.py --steps 20                 # world Flux, about 4 minutes on 2 cores
    python benchmarks/bench_learners.py --flux-dev-size --steps 3 --json dev.json     # CUDA
    python benchmarks/bench_learners.py --flux-dev-size --width-divisor 24 --device cpu --size 64 \\
        --text-tokens 16 --steps 1
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from concept_grounding.learners import METHOD_DEFAULTS, METHODS, LearnConfig

#: FLUX.1-dev's published transformer config (black-forest-labs/FLUX.1-dev transformer/config.json).
FLUX_DEV = dict(
    patch_size=1,
    in_channels=64,
    num_layers=19,
    num_single_layers=38,
    attention_head_dim=128,
    num_attention_heads=24,
    joint_attention_dim=4096,
    pooled_projection_dim=768,
    guidance_embeds=True,
    axes_dims_rope=(16, 56, 56),
)
#: prior images and their sampling steps in a Table 5 DreamBooth / Custom Diffusion concept (FLUX.1-dev: 28 steps).
PRIOR_IMAGES, PRIOR_SAMPLING_STEPS = 200, 28
HELD_OUT = "001.Black_footed_Albatross"


# ----------------------------------------------------------------------------- world Flux (CPU)
def world_concept(folder: Path, n: int = 8) -> Path:
    """``n`` renders of :data:`HELD_OUT` (not among the world Flux's 33 classes) in the world Flux's world."""
    from dataclasses import replace

    from PIL import Image

    from concept_grounding.world import BirdWorld
    from concept_grounding.worldflux.components import TRAINING_WORLD

    world = BirdWorld(replace(TRAINING_WORLD, class_names=(HELD_OUT,)))
    folder.mkdir(parents=True, exist_ok=True)
    for i, sample in enumerate(world.samples(range(n))):
        Image.fromarray(sample.image).save(folder / f"{i:02d}.png")
    return folder


def _learn_once(config: LearnConfig, out: str, threads: int) -> dict[str, Any]:
    """Run ``learn`` in this (fresh) process; its figures and peak resident memory."""
    import torch

    from concept_grounding.learners import learn

    torch.set_num_threads(threads)
    folder = learn(config, out)
    log = json.loads((Path(folder) / "learned.json").read_text())
    return {
        "steps": log["steps"],
        "seconds_training": log["seconds_training"],
        "seconds_total": log["seconds_total"],
        "trained_parameters": log["trained_parameters"],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def bench_world(steps: int, num_prior: int, threads: int, methods: tuple[str, ...]) -> dict[str, Any]:
    """Each method's figures on the world Flux (one spawned process per method)."""
    out: dict[str, Any] = {"model": "world", "steps": steps, "threads": threads, "methods": {}}
    with tempfile.TemporaryDirectory() as tmp:
        images = world_concept(Path(tmp) / "concept")
        ctx = multiprocessing.get_context("spawn")
        for method in methods:
            config = LearnConfig(method=method, images=images, steps=steps, num_prior=num_prior, progress=False)
            with ctx.Pool(1) as pool:
                fig = pool.apply(_learn_once, (config, str(Path(tmp) / method), threads))
            per_step = fig["seconds_training"] / fig["steps"]
            fixed = fig["seconds_total"] - fig["seconds_training"]
            fig.update(
                seconds_per_step=per_step,
                seconds_fixed=fixed,
                table5_steps=METHOD_DEFAULTS[method][0],
                seconds_per_concept_table5=fixed + per_step * METHOD_DEFAULTS[method][0],
            )
            out["methods"][method] = fig
            print(
                f"{method:18s} {per_step:7.3f} s/step  {fig['seconds_total']:7.1f} s for {steps} steps  "
                f"~{fig['seconds_per_concept_table5']:7.1f} s/concept at {METHOD_DEFAULTS[method][0]} steps  "
                f"peak RSS {fig['peak_rss_mib']:.0f} MiB  ({fig['trained_parameters']:,} trained)",
                flush=True,
            )
    return out


# ----------------------------------------------------------------------------- FLUX.1-dev size (GPU)
def dev_size_pipeline(device: str, divisor: int = 1, text_tokens: int = 512) -> Any:
    """A ``FluxPipeline`` with FLUX.1-dev's transformer shape (``divisor`` > 1 divides heads,
    depth and text widths), random weights (bf16 on CUDA, float32 elsewhere), small random
    CLIP / T5 encoders with word-level tokenizers (77 / ``text_tokens`` tokens), no VAE."""
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    from concept_grounding.worldflux.captions import word_tokenizers

    config = dict(FLUX_DEV)
    if divisor > 1:
        heads = max(1, 24 // divisor)
        config.update(
            num_layers=max(1, 19 // divisor),
            num_single_layers=max(1, 38 // divisor),
            num_attention_heads=heads,
            joint_attention_dim=max(16, 4096 // divisor),
            pooled_projection_dim=max(16, 768 // divisor),
        )
    words = ["a", "photo", "of", "bird", "sks", "the", "with", "in", "style"]
    clip_tok, _ = word_tokenizers(words, 77)
    _, t5_tok = word_tokenizers(words, text_tokens)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    previous = torch.get_default_dtype()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        torch.set_default_dtype(dtype)
        try:
            with torch.device(device):
                transformer = FluxTransformer2DModel(**config)
                clip = CLIPTextModel(
                    CLIPTextConfig(
                        vocab_size=len(clip_tok),
                        hidden_size=config["pooled_projection_dim"],
                        intermediate_size=1024,
                        num_hidden_layers=1,
                        num_attention_heads=4,
                        max_position_embeddings=77,
                        bos_token_id=1,
                        eos_token_id=3,
                        pad_token_id=0,
                        projection_dim=config["pooled_projection_dim"],
                    )
                )
                t5 = T5EncoderModel(
                    T5Config(
                        vocab_size=len(t5_tok),
                        d_model=config["joint_attention_dim"],
                        d_kv=64,
                        d_ff=1024,
                        num_layers=1,
                        num_heads=8,
                        pad_token_id=0,
                        eos_token_id=3,
                    )
                )
        finally:
            torch.set_default_dtype(previous)
    pipe = FluxPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=None,
        text_encoder=clip,
        tokenizer=clip_tok,
        text_encoder_2=t5,
        tokenizer_2=t5_tok,
        transformer=transformer.to(dtype),
    )
    return pipe.to(device)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def bench_dev_size(
    device: str,
    divisor: int,
    size: int,
    steps: int,
    batch: int,
    rank: int,
    methods: tuple[str, ...],
    text_tokens: int = 512,
) -> dict[str, Any]:
    """Each method's s/step and peak memory on the FLUX.1-dev-shaped pipeline."""
    import torch

    from concept_grounding.learners.train import Latents, flow_loss, prepare_trainer, training_step

    cuda = device.startswith("cuda")
    side = size // 8  # FLUX.1's VAE downsamples 8x: 1024 px -> 128 x 128 latents -> 64 x 64 packed tokens
    out: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device) if cuda else device,
        "width_divisor": divisor,
        "size": size,
        "tokens": (side // 2) ** 2,
        "text_tokens": text_tokens,
        "batch": batch,
        "methods": {},
    }
    for method in methods:
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        pipe = dev_size_pipeline(device, divisor, text_tokens)
        out["parameters"] = sum(p.numel() for p in pipe.transformer.parameters())
        dtype = pipe.transformer.dtype
        g = torch.Generator().manual_seed(0)
        lat = Latents(
            torch.randn(4, 16, side, side, generator=g).to(device, dtype),
            torch.zeros(4, 16, side, side).to(device, dtype),
        )
        config = LearnConfig(
            method=method,
            images="unused",
            batch=batch,
            rank=rank,
            device=device,
            gradient_checkpointing=True,
            dtype="bfloat16" if cuda else "float32",
            class_prompt="a photo of a bird",
            init_word="bird",
        )
        learner = prepare_trainer(pipe, config)
        prior = lat if config.uses_prior() else None
        training_step(learner, 0, lat, prior)  # untimed: allocation, kernel selection
        _sync(device)
        t0 = time.perf_counter()
        for s in range(steps):
            training_step(learner, 1 + s, lat, prior)
        _sync(device)
        per_step = (time.perf_counter() - t0) / steps
        fig: dict[str, Any] = {
            "seconds_per_step": per_step,
            "trained_parameters": int(sum(p.numel() for p in learner.params.values())),
            "table5_steps": METHOD_DEFAULTS[method][0],
            "seconds_per_concept_table5_steps_only": per_step * METHOD_DEFAULTS[method][0],
        }
        if cuda:
            fig["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        if prior is not None:  # sampling the prior images: one forward per image and sampling step
            with torch.no_grad():
                for _ in range(2):  # the second call is timed
                    _sync(device)
                    t1 = time.perf_counter()
                    flow_loss(learner, lat, config.class_prompt, torch.Generator().manual_seed(1))
                    _sync(device)
            forward = (time.perf_counter() - t1) / batch
            fig["seconds_prior_images"] = forward * PRIOR_IMAGES * PRIOR_SAMPLING_STEPS
        fig["seconds_per_concept_table5"] = fig["seconds_per_concept_table5_steps_only"] + fig.get(
            "seconds_prior_images", 0.0
        )
        out["methods"][method] = fig
        peak = f"  peak {fig['peak_gib']:.1f} GiB" if "peak_gib" in fig else ""
        print(
            f"{method:18s} {per_step:8.3f} s/step{peak}  ~{fig['seconds_per_concept_table5']:8.0f} s/concept at "
            f"{METHOD_DEFAULTS[method][0]} steps"
            + (
                f" (incl. {fig['seconds_prior_images']:.0f} s of {PRIOR_IMAGES} prior images)"
                if prior is not None
                else ""
            )
            + f"  ({fig['trained_parameters']:,} trained)",
            flush=True,
        )
        del learner, pipe, lat, prior
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per method (default 20; dev size: 3)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--num-prior", type=int, default=8, help="world: prior images of DreamBooth / CD (default 8)")
    parser.add_argument("--threads", type=int, default=1, help="world: torch CPU threads (default 1)")
    parser.add_argument("--flux-dev-size", action="store_true", help="FLUX.1-dev-shaped transformer (CUDA)")
    parser.add_argument("--device", default="cuda", help="device of --flux-dev-size (default cuda)")
    parser.add_argument(
        "--width-divisor", type=int, default=1, help="divide the dev-size widths and depth (smoke test)"
    )
    parser.add_argument("--size", type=int, default=1024, help="dev size: image side in pixels (default 1024)")
    parser.add_argument("--batch", type=int, default=1, help="dev size: images per step (default 1)")
    parser.add_argument("--text-tokens", type=int, default=512, help="dev size: T5 prompt tokens (default 512)")
    parser.add_argument("--rank", type=int, default=16, help="dev size: LoRA rank (default 16)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    methods = tuple(args.methods)
    if args.flux_dev_size:
        figures = bench_dev_size(
            args.device, args.width_divisor, args.size, args.steps, args.batch, args.rank, methods, args.text_tokens
        )
    else:
        figures = bench_world(args.steps, args.num_prior, args.threads, methods)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
