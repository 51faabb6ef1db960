"""Cost of Tied Diffusion Guidance against FluxPipeline generating the same two prompts in one batch.

CPU (default): 512 x 512 images, a small random transformer (2 double + 4 single blocks,
4 heads x 32 dims, 64 latent channels, VAE scale 8 -> 1024 tokens per image), few steps,
``output_type="latent"`` (the VAE decode is identical for both and is left out).
``--gpu-flux-dev``: FLUX.1-dev's transformer shape (19 double + 38 single blocks, 24 heads
x 128 dims, in_channels 64, joint_attention_dim 4096, pooled 768, guidance embedding)
with random bf16 weights at 1024 x 1024, 28 steps on CUDA. The text encoders stay tiny
(their outputs are projected to 4096 / 768 dims), since only the transformer loop and
the tie differ between the two runs.

Prints seconds per pair for both, the ratio (targets: <= 1.05 CPU, <= 1.02 GPU) and the
tie alone (all steps).

    python benchmarks/bench_tdg.py            # CPU, a couple of minutes
    python benchmarks/bench_tdg.py --gpu-flux-dev
"""

from __future__ import annotations

import argparse
import time

import torch
from diffusers import AutoencoderKL, FluxPipeline, FluxTransformer2DModel
from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

from concept_grounding.tdg import EtaSchedule, TiedDiffusionPipeline
from concept_grounding.tdg.tie import tie_pair
from concept_grounding.tdg.tiny import tiny_flux_components

R = "A photo of a Blue Jay with yellow colored feathers on the crown of its head"
G = "A photo of a bird with yellow colored feathers on the crown of its head"


def build(flux_dev: bool, device: str) -> TiedDiffusionPipeline:
    comps = tiny_flux_components(seed=0)
    dtype = torch.bfloat16 if flux_dev else torch.float32
    if flux_dev:
        cfg = dict(num_layers=19, num_single_layers=38, attention_head_dim=128, num_attention_heads=24,
                   joint_attention_dim=4096, pooled_projection_dim=768, axes_dims_rope=[16, 56, 56])
        te, te2 = comps["text_encoder"], comps["text_encoder_2"]
        comps["text_encoder"] = CLIPTextModel(CLIPTextConfig(**{**te.config.to_dict(), "projection_dim": 768, "hidden_size": 768, "intermediate_size": 64, "num_attention_heads": 4})).eval()
        comps["text_encoder_2"] = T5EncoderModel(T5Config(**{**te2.config.to_dict(), "d_model": 4096, "d_kv": 64, "num_heads": 4, "d_ff": 64, "num_layers": 1})).eval()
    else:
        cfg = dict(num_layers=2, num_single_layers=4, attention_head_dim=32, num_attention_heads=4,
                   joint_attention_dim=32, pooled_projection_dim=32, axes_dims_rope=[8, 12, 12])
    torch.manual_seed(0)
    with torch.device(device):
        default = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            comps["transformer"] = FluxTransformer2DModel(patch_size=1, in_channels=64, guidance_embeds=True, **cfg).eval()
        finally:
            torch.set_default_dtype(default)
    comps["vae"] = AutoencoderKL(block_out_channels=(4, 4, 4, 4), latent_channels=16, norm_num_groups=1,
                                 layers_per_block=1, down_block_types=("DownEncoderBlock2D",) * 4,
                                 up_block_types=("UpDecoderBlock2D",) * 4).eval()
    pipe = TiedDiffusionPipeline(**comps).to(device, dtype)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def timed(fn, device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-flux-dev", action="store_true")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    device = "cuda" if args.gpu_flux_dev else "cpu"
    steps = args.steps or (28 if args.gpu_flux_dev else 4)
    size = args.size or (1024 if args.gpu_flux_dev else 512)
    pipe = build(args.gpu_flux_dev, device)
    kw = dict(height=size, width=size, num_inference_steps=steps, max_sequence_length=32 if not args.gpu_flux_dev else 64,
              guidance_scale=3.5, output_type="latent")
    num_ch = pipe.transformer.config.in_channels // 4
    lat, _ = pipe.prepare_latents(1, num_ch, size, size, pipe.transformer.dtype, device, torch.Generator(device).manual_seed(0))
    schedule = EtaSchedule(0.2, 0.9, 10)

    def run_tdg():
        pipe(R, G, eta_schedule=schedule, latents=lat, **kw)

    def run_flux():
        FluxPipeline.__call__(pipe, prompt=[R, G], latents=torch.cat([lat, lat]), **kw)

    run_tdg(), run_flux()  # warm-up
    tdg, flux = [], []
    for _ in range(args.repeats):  # interleaved, to share machine-load drift
        flux.append(timed(run_flux, device))
        tdg.append(timed(run_tdg, device))
    e = torch.randn(2, lat.shape[1], lat.shape[2], device=device, dtype=lat.dtype)
    etas = [schedule(1 - i / steps) for i in range(steps)]
    tie_s = min(timed(lambda: [tie_pair(e[:1], e[1:], eta) for eta in etas], device) for _ in range(args.repeats))
    label = "FLUX.1-dev-size transformer, bf16, CUDA" if args.gpu_flux_dev else "small transformer, fp32, CPU"
    print(f"{label}: {size}x{size}, {steps} steps, {lat.shape[1]} tokens x {lat.shape[2]} channels per image")
    print(f"FluxPipeline, both prompts in one batch: {min(flux):.3f} s per pair (runs: {', '.join(f'{t:.3f}' for t in flux)})")
    print(f"TiedDiffusionPipeline, one pair:         {min(tdg):.3f} s per pair (runs: {', '.join(f'{t:.3f}' for t in tdg)})")
    print(f"ratio TDG / Flux (best of {args.repeats}): {min(tdg) / min(flux):.3f}x")
    paired = sorted(t / f for t, f in zip(tdg, flux))
    print(f"ratio TDG / Flux (median of {args.repeats} interleaved pairs): {paired[len(paired) // 2]:.3f}x")
    print(f"tie alone, {steps} steps: {tie_s * 1000:.2f} ms ({100 * tie_s / min(flux):.2f} % of the Flux run)")


if __name__ == "__main__":
    main()
