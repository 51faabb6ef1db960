"""TDG's overhead over each base pipeline of the Flux family, on this CPU.

For FLUX.1 (``TiedDiffusionPipeline`` vs ``FluxPipeline``), FLUX.2 [dev] (``TiedFlux2Pipeline``
vs ``Flux2Pipeline``) and FLUX.2 [klein] (``TiedFlux2KleinPipeline`` vs ``Flux2KleinPipeline``,
classifier-free guidance on, as the non-distilled [klein] runs): a TDG pair (one reference, one
guide prompt, the paper's colour schedule ``EtaSchedule(0.2, 0.9, 10)``) against the base
pipeline on both prompts in one batch of two, from the same initial latents, with the same
steps and guidance, on the tiny models of ``concept_grounding.testing`` (random weights from
configs) sharing their modules. Every figure comes from
:func:`concept_grounding.tdg.timing.interleave`: one untimed call each, then ``--rounds``
rounds calling every callable once in a rotating order; CPU time of this process with one
torch thread (wall time beside it); ratios are the median [min, max] of the per-round ratios.
An A/A control (the base pipeline against itself) shows what the machine's load alone does
to a ratio in the same run. Target: <= 1.02x per family member.

TDG's own code (the per-call scheduler copy, view and published state, and the tie of every
step on a batch shaped like the call's) is also timed alone, as a share of the base call: on
calls this short the end-to-end ratio moves by several per cent with the machine's load (the
A/A control), the share does not.

``--klein-size`` (needs CUDA) instead times FLUX.2 [klein] 4B's transformer
shape (its published transformer config: 5 double + 20 single blocks, 24 heads x 128 dims,
128 latent channels, joint attention over 3 x 2560 Qwen3 features, no guidance embedding),
random bf16 weights, at 1024 x 1024 (4,096 image tokens), 4 steps, guidance 1 (the distilled
[klein]'s call), from precomputed random prompt embeddings (the text encoder is not timed: it
runs once per prompt for TDG and the base alike), latent output (the VAE decode is the same for
both), plain and with a TaylorSeer cache (``--cache``): time, the ratio, and peak GPU memory.
``--klein-size --klein-scale 64 --device cpu`` runs the same code on a transformer 64x narrower
and shallower (a smoke test, no figure).

    python benchmarks/bench_tdg_family.py                    # 15 rounds, 64 px, 8 steps: about 3 minutes on 2 cores
    python benchmarks/bench_tdg_family.py --rounds 9 --size 32 --json out.json
    python benchmarks/bench_tdg_family.py --klein-size --rounds 5 --json klein.json   # CUDA
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from diffusers import Flux2KleinPipeline, Flux2Pipeline, FluxPipeline
from diffusers.utils.torch_utils import randn_tensor

from concept_grounding.tdg import EtaSchedule
from concept_grounding.tdg.pipeline import TiedDiffusionPipeline, tied_scheduler
from concept_grounding.tdg.pipeline_flux2 import TiedFlux2KleinPipeline, TiedFlux2Pipeline
from concept_grounding.tdg.tie import tie_batch
from concept_grounding.tdg.timing import interleave
from concept_grounding.testing import tiny_flux2_pipeline, tiny_flux_pipeline

R, G = (
    "a photo of a blue jay with yellow colored feathers on the crown",
    "a photo of a bird with yellow colored feathers on the crown",
)
SCHEDULE = EtaSchedule(0.2, 0.9, 10.0)
#: name -> (TDG class, base class, builder, extra call arguments)
FAMILY: dict[str, tuple[type, type, Callable[[type], Any], dict[str, Any]]] = {
    "FLUX.1": (
        TiedDiffusionPipeline,
        FluxPipeline,
        lambda cls: tiny_flux_pipeline(cls, seed=0),
        {"guidance_scale": 3.5},
    ),
    "FLUX.2 [dev]": (
        TiedFlux2Pipeline,
        Flux2Pipeline,
        lambda cls: tiny_flux2_pipeline(cls, seed=0),
        {"guidance_scale": 4.0},
    ),
    "FLUX.2 [klein]": (
        TiedFlux2KleinPipeline,
        Flux2KleinPipeline,
        lambda cls: tiny_flux2_pipeline(cls, seed=0),
        {"guidance_scale": 4.0},
    ),
}


def reference_latents(base: Any, size: int) -> torch.Tensor:
    """One image's initial latents in the layout the base pipeline's ``latents`` takes."""
    generator = torch.Generator().manual_seed(0)
    if isinstance(base, FluxPipeline):
        channels = base.transformer.config.in_channels // 4
        return base.prepare_latents(1, channels, size, size, torch.float32, "cpu", generator)[0]
    side = 2 * (size // (base.vae_scale_factor * 2)) // 2
    return randn_tensor((1, base.transformer.config.in_channels, side, side), generator=generator)


def own_code(tdg: Any, packed: torch.Tensor, steps: int) -> Callable[[], None]:
    """TDG's own work in one call, alone: the scheduler copy, the per-call view and its published
    state, and ``steps`` ties of a (2, seq, C) prediction at the schedule's etas."""
    prediction = torch.randn(2, *packed.shape[1:], generator=torch.Generator().manual_seed(1))
    times = [1.0 - i / steps for i in range(steps)]

    def run() -> None:
        scheduler, _ = tied_scheduler(tdg.scheduler, SCHEDULE)
        tdg.publish_call_state(tdg.call_view(scheduler, 1))
        for t in times:
            tie_batch(prediction, t, SCHEDULE)

    return run


def time_member(name: str, size: int, steps: int, rounds: int) -> dict[str, Any]:
    """Interleaved CPU/wall timings of the TDG pair, the base batch of two and the A/A control."""
    tdg_cls, base_cls, build, extra = FAMILY[name]
    tdg = build(tdg_cls)
    base = base_cls(**tdg.components)  # the same modules
    base.set_progress_bar_config(disable=True)
    latents = reference_latents(base, size)
    common = dict(height=size, width=size, num_inference_steps=steps, max_sequence_length=32, output_type="pt", **extra)
    pair = torch.cat([latents, latents])
    calls = {
        "tdg": lambda: tdg(R, G, eta_schedule=SCHEDULE, latents=latents, **common),
        "base": lambda: base(prompt=[R, G], latents=pair, **common),
        "base_again": lambda: base(prompt=[R, G], latents=pair, **common),
    }
    packed = latents if latents.ndim == 3 else latents.flatten(2).transpose(1, 2)  # FLUX.2: (1, C, h, w) -> (1, hw, C)
    calls["tdg_own_code"] = own_code(tdg, packed, steps)
    result = interleave(calls, rounds=rounds, warmup=1)
    ratios = {
        "TDG / base": ("tdg", "base"),
        "A/A control": ("base_again", "base"),
        "TDG's own code / base": ("tdg_own_code", "base"),
    }
    print(f"{name}: {size} px, {steps} steps, guidance {extra['guidance_scale']}")
    print(result.report(ratios))
    return {"size": size, "steps": steps, **result.as_dict(ratios)}


#: FLUX.2 [klein] 4B's transformer config (black-forest-labs/FLUX.2-klein-4B, transformer/config.json)
KLEIN_4B = dict(
    patch_size=1,
    in_channels=128,
    num_layers=5,
    num_single_layers=20,
    attention_head_dim=128,
    num_attention_heads=24,
    joint_attention_dim=3 * 2560,
    timestep_guidance_channels=256,
    mlp_ratio=3.0,
    axes_dims_rope=(32, 32, 32, 32),
    guidance_embeds=False,
)


def klein_size_pipelines(device: str, scale: int = 1) -> tuple[Any, Any]:
    """``(TiedFlux2KleinPipeline, Flux2KleinPipeline)`` sharing a [klein]-4B-shaped transformer
    (random weights; ``scale`` > 1 divides its heads, depth and text width for a smoke run), a VAE
    with [klein]'s 8x downsampling and 32 latent channels, and the tiny text encoder (unused:
    the calls take prompt embeddings). bf16 on CUDA, float32 elsewhere."""
    from diffusers import AutoencoderKLFlux2, Flux2Transformer2DModel

    from concept_grounding.testing.flux2 import tiny_flux2_components

    config = dict(KLEIN_4B)
    if scale > 1:
        config.update(
            num_layers=1,
            num_single_layers=1,
            num_attention_heads=max(1, 24 // scale),
            joint_attention_dim=max(8, 7680 // scale),
        )
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    components = tiny_flux2_components(0, klein=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        with torch.device(device):
            components["transformer"] = Flux2Transformer2DModel(**config).to(dtype).eval()
            components["vae"] = (
                AutoencoderKLFlux2(
                    block_out_channels=(4, 4, 4, 4), latent_channels=32, layers_per_block=1, norm_num_groups=1
                )
                .to(dtype)
                .eval()
            )
    tdg = TiedFlux2KleinPipeline(**components).to(device)
    base = Flux2KleinPipeline(**tdg.components)
    for pipe in (tdg, base):
        pipe.set_progress_bar_config(disable=True)
    return tdg, base


def time_klein_size(
    device: str, size: int, steps: int, rounds: int, cache: str | None, scale: int = 1
) -> dict[str, Any]:
    """Interleaved timings (and peak CUDA memory) of a TDG pair vs ``Flux2KleinPipeline`` batch-2 at
    [klein] size, plain and, with ``cache``, with that diffusers transformer cache on both."""
    from concept_grounding.tdg.acceleration import Acceleration, TransformerCache, accelerated

    tdg, base = klein_size_pipelines(device, scale)
    transformer = tdg.transformer
    generator = torch.Generator(device).manual_seed(0)
    embeds = torch.randn(
        2, 64, transformer.config.joint_attention_dim, generator=generator, device=device, dtype=transformer.dtype
    )
    side = 2 * (size // (base.vae_scale_factor * 2)) // 2
    latents = randn_tensor(
        (1, transformer.config.in_channels, side, side), generator=generator, device=device, dtype=transformer.dtype
    )
    common = dict(height=size, width=size, num_inference_steps=steps, guidance_scale=1.0, output_type="latent")
    calls = {
        "tdg": lambda: tdg(
            reference_prompt_embeds=embeds[:1],
            guide_prompt_embeds=embeds[1:],
            eta_schedule=SCHEDULE,
            latents=latents,
            **common,
        ),
        "base": lambda: base(prompt_embeds=embeds, latents=torch.cat([latents, latents]), **common),
    }
    calls["base_again"] = calls["base"]
    sync = torch.cuda.synchronize if device == "cuda" else None
    ratios = {"TDG / base": ("tdg", "base"), "A/A control": ("base_again", "base")}
    out: dict[str, Any] = {
        "device": device,
        "size": size,
        "steps": steps,
        "scale": scale,
        "parameters": sum(p.numel() for p in transformer.parameters()),
    }
    for label, acceleration in (
        ("plain", Acceleration()),
        *((("cached", Acceleration(cache=TransformerCache.parse(cache))),) if cache else ()),
    ):
        with accelerated(tdg, acceleration, steps):
            result = interleave(calls, rounds=rounds, warmup=1, sync=sync)
            figures = result.as_dict(ratios)
            if device == "cuda":
                figures["peak_gib"] = {}
                for name in ("tdg", "base"):
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    calls[name]()
                    torch.cuda.synchronize()
                    figures["peak_gib"][name] = torch.cuda.max_memory_allocated() / 2**30
        print(
            f"FLUX.2 [klein]-4B-shaped transformer ({out['parameters'] / 1e9:.2f} B parameters), {device}, {size} px, "
            f"{steps} steps, {label}:"
        )
        print(result.report(ratios))
        if "peak_gib" in figures:
            print(
                f"  peak GPU memory: TDG {figures['peak_gib']['tdg']:.2f} GiB, "
                f"base batch-2 {figures['peak_gib']['base']:.2f} GiB"
            )
        out[label] = figures
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--size", type=int, default=64, help="image side in pixels (default 64)")
    parser.add_argument("--steps", type=int, default=8, help="denoising steps (default 8)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: CPU time counts the work)")
    parser.add_argument("--members", nargs="*", choices=list(FAMILY), default=list(FAMILY))
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument(
        "--klein-size",
        action="store_true",
        help="time FLUX.2 [klein] 4B's transformer shape instead (CUDA, bf16, 1024 px, 4 steps unless given)",
    )
    parser.add_argument("--klein-scale", type=int, default=1, help="divide the [klein] shape by this (smoke runs)")
    parser.add_argument("--device", default="cuda", help="device of --klein-size (default cuda)")
    parser.add_argument(
        "--cache",
        default="taylorseer",
        help="the cached configuration of --klein-size (generate's --cache; '' for none; diffusers' "
        "first-block and faster caches do not run on FLUX.2's transformer)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.klein_size:
        size = args.size if args.size != 64 else 1024
        steps = args.steps if args.steps != 8 else 4
        figures = time_klein_size(args.device, size, steps, args.rounds, args.cache or None, args.klein_scale)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        return 0
    figures = {name: time_member(name, args.size, args.steps, args.rounds) for name in args.members}
    print("\nTDG / base pipeline, CPU time, median [min, max] of per-round ratios (target <= 1.02x):")
    for name, data in figures.items():
        tdg, control = data["ratios"]["TDG / base"]["cpu"], data["ratios"]["A/A control"]["cpu"]
        share = data["ratios"]["TDG's own code / base"]["cpu"]["median"]
        print(
            f"  {name:<15} {tdg['median']:.3f}x [{tdg['min']:.3f}, {tdg['max']:.3f}]   "
            f"A/A {control['median']:.3f}x [{control['min']:.3f}, {control['max']:.3f}]   "
            f"TDG's own code {100 * share:.2f} % of a base call"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
