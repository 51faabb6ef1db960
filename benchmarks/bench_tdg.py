"""TDG's cost against FluxPipeline on the same two prompts, plain and with diffusers' caches and torch.compile.

Every figure comes from :func:`concept_grounding.tdg.timing.interleave`: each callable runs
once untimed, then ``--rounds`` rounds call every callable once, in an order that rotates
from round to round; each call is read on this process's CPU time and on the wall clock,
and a ratio is the median (with min and max) of the per-round ratios. With one torch
thread (the default) the CPU time counts the work and hardly moves with the load of the
other processes on a shared machine; the wall time is printed beside it.

1. **Overhead**: a TDG pair (``TiedDiffusionPipeline``, one
   reference and one guide prompt, the paper's schedule) vs ``FluxPipeline`` on both
   prompts in one batch of two, from the same initial latents, same steps, same
   guidance; target <= 1.05x. On

   * ``world``: the shipped world Flux, 32 px, 20 steps, true CFG 4 against the empty
     prompt (the call ``bench_tdg_world.py`` times), PIL output;
   * ``small``: a small random transformer at 512 x 512 (2 double + 4 single blocks,
     4 heads x 32 dims, 64 latent channels, VAE scale 8: 1024 tokens per image), 4 steps,
     latent output (the VAE decode is the same for both).

   An A/A control (FluxPipeline timed against itself under a second name) shows how far
   the ratio moves with the machine's load alone, in the same run. TDG's own code (the
   per-call scheduler copy and view, the tie of every step) is also timed alone, as a share
   of the FluxPipeline call: the overhead that the end-to-end ratio cannot resolve under load.
2. **Acceleration** (item 2), world Flux: ``plain``, ``cached`` (``--cache``, default
   first-block cache at threshold 0.2), ``compiled`` (``transformer.compile_repeated_blocks()``)
   and ``both``: seconds per TDG pair, the ratio to FluxPipeline batch-2 in the same
   configuration, the speed-up over plain TDG, and the drift of the TDG images from the
   plain ones: mean absolute difference of the uint8 pixels (0-255) over ``--drift-pairs``
   pairs (references and guides), and the species and attribute agreement with the plain
   images by ``--judge MODULE:CALLABLE`` (default: the shipped world judge, validated on the
   world's exact edits; a callable mapping a list of PIL images to ``(species (N,),
   attribute probabilities (N, A))``).

``--flux-dev`` (not run here: no GPU) times section 1 on CUDA with FLUX.1-dev's transformer
shape (19 double + 38 single blocks, 24 heads x 128 dims, guidance embedding), random bf16
weights, 1024 x 1024, 28 steps (target <= 1.02x), with peak GPU memory, and section 2's
configurations on that model.

    python benchmarks/bench_tdg.py                     # both sections, about 5 minutes on 2 CPU cores
    python benchmarks/bench_tdg.py --sections overhead --rounds 9
    python benchmarks/bench_tdg.py --flux-dev          # CUDA
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from diffusers import AutoencoderKL, FluxPipeline, FluxTransformer2DModel
from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

from concept_grounding.tdg import EtaSchedule, TiedDiffusionPipeline
from concept_grounding.tdg.acceleration import Acceleration, TransformerCache, accelerated
from concept_grounding.tdg.pipeline import tied_scheduler
from concept_grounding.tdg.tie import tie_pair
from concept_grounding.tdg.timing import interleave
from concept_grounding.testing import tiny_flux_components

R = "a photo of a Blue Jay"
G = "a photo of a bird with a yellow colored crown"
#: (reference, guide) prompts of the drift measurement: world species and attributes
DRIFT_PROMPTS = [
    ("a photo of a Blue Jay", "a photo of a bird with a yellow colored crown"),
    ("a photo of a Cardinal", "a photo of a bird with a blue colored wing"),
    ("a photo of a Gray Catbird", "a photo of a bird with a red colored breast"),
    ("a photo of a Cedar Waxwing", "a photo of a bird with a black colored back"),
]
SCHEDULE = EtaSchedule(0.2, 0.9, 10.0)  # SUB's colour/shape schedule


def world_pipeline() -> tuple[TiedDiffusionPipeline, dict[str, Any], str]:
    from concept_grounding.worldflux import load_world_flux, world_flux_call_kwargs

    pipe = load_world_flux(pipeline_cls=TiedDiffusionPipeline)
    return pipe, dict(world_flux_call_kwargs(pipe), negative_prompt=""), "world Flux (shipped), fp32, CPU"


def sized_pipeline(flux_dev: bool, device: str) -> tuple[TiedDiffusionPipeline, dict[str, Any], str]:
    """The small 512 px transformer (CPU) or FLUX.1-dev's transformer shape (CUDA, bf16), random weights."""
    comps = tiny_flux_components(seed=0)
    dtype = torch.bfloat16 if flux_dev else torch.float32
    if flux_dev:
        cfg = dict(
            num_layers=19,
            num_single_layers=38,
            attention_head_dim=128,
            num_attention_heads=24,
            joint_attention_dim=4096,
            pooled_projection_dim=768,
            axes_dims_rope=[16, 56, 56],
        )
        te, te2 = comps["text_encoder"], comps["text_encoder_2"]
        comps["text_encoder"] = CLIPTextModel(
            CLIPTextConfig(
                **{
                    **te.config.to_dict(),
                    "projection_dim": 768,
                    "hidden_size": 768,
                    "intermediate_size": 64,
                    "num_attention_heads": 4,
                }
            )
        ).eval()
        comps["text_encoder_2"] = T5EncoderModel(
            T5Config(
                **{**te2.config.to_dict(), "d_model": 4096, "d_kv": 64, "num_heads": 4, "d_ff": 64, "num_layers": 1}
            )
        ).eval()
    else:
        cfg = dict(
            num_layers=2,
            num_single_layers=4,
            attention_head_dim=32,
            num_attention_heads=4,
            joint_attention_dim=32,
            pooled_projection_dim=32,
            axes_dims_rope=[8, 12, 12],
        )
    torch.manual_seed(0)
    with torch.device(device):
        default = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            comps["transformer"] = FluxTransformer2DModel(
                patch_size=1, in_channels=64, guidance_embeds=True, **cfg
            ).eval()
        finally:
            torch.set_default_dtype(default)
    comps["vae"] = AutoencoderKL(
        block_out_channels=(4, 4, 4, 4),
        latent_channels=16,
        norm_num_groups=1,
        layers_per_block=1,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        shift_factor=0.0,
        scaling_factor=1.0,
    ).eval()
    pipe = TiedDiffusionPipeline(**comps).to(device, dtype)
    pipe.set_progress_bar_config(disable=True)
    size, steps = (1024, 28) if flux_dev else (512, 4)
    kw = dict(
        height=size,
        width=size,
        num_inference_steps=steps,
        max_sequence_length=64 if flux_dev else 32,
        guidance_scale=3.5,
        output_type="latent",
    )
    label = (
        "FLUX.1-dev-shaped transformer, bf16, CUDA, 1024 px, 28 steps"
        if flux_dev
        else "small transformer (2+4 blocks), fp32, CPU, 512 px, 4 steps"
    )
    return pipe, kw, label


def pair_callables(
    pipe: TiedDiffusionPipeline,
    kw: dict[str, Any],
    flux: FluxPipeline,
    seed: int = 0,
    prompts: tuple[str, str] = (R, G),
) -> dict[str, Callable[[], Any]]:
    """``{"tdg": one TDG pair, "flux": FluxPipeline on both prompts}``, same initial latents and arguments."""
    device = pipe._execution_device
    num_channels = pipe.transformer.config.in_channels // 4
    latents, _ = pipe.prepare_latents(
        1,
        num_channels,
        kw["height"],
        kw["width"],
        pipe.transformer.dtype,
        device,
        torch.Generator(device).manual_seed(seed),
    )
    reference, guide = prompts
    common = {k: v for k, v in kw.items() if k != "negative_prompt"}
    negative = kw.get("negative_prompt")
    return {
        "tdg": lambda: pipe(
            reference, guide, eta_schedule=SCHEDULE, latents=latents, negative_prompt=negative, **common
        ),
        "flux": lambda: flux(
            prompt=[reference, guide],
            latents=torch.cat([latents, latents]),
            negative_prompt=None if negative is None else [negative, negative],
            **common,
        ),
    }


def sibling_flux(pipe: TiedDiffusionPipeline) -> FluxPipeline:
    """A FluxPipeline over the same modules (a cache or compilation of the transformer applies to both)."""
    flux = FluxPipeline(**pipe.components)
    flux.set_progress_bar_config(disable=True)
    flux.default_sample_size = pipe.default_sample_size
    return flux


def cuda_sync(device: str) -> Callable[[], Any] | None:
    return torch.cuda.synchronize if device == "cuda" else None


def peak_memory_gib(fn: Callable[[], Any]) -> float:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**30


def overhead(pipe: TiedDiffusionPipeline, kw: dict[str, Any], label: str, args: argparse.Namespace) -> dict[str, Any]:
    device = str(pipe._execution_device.type)
    flux = sibling_flux(pipe)
    calls = pair_callables(pipe, kw, flux)
    timed = {**calls, "flux (A/A)": calls["flux"]}  # the same call again: the noise floor of this run
    result = interleave(timed, rounds=args.rounds, warmup=1, sync=cuda_sync(device))
    ratios = {
        "TDG pair / FluxPipeline batch-2": ("tdg", "flux"),
        "A/A control, FluxPipeline / itself": ("flux (A/A)", "flux"),
    }
    print(f"\n== overhead: {label}")
    print(result.report(ratios))
    out = {"model": label, **result.as_dict(ratios)}
    if device == "cuda":
        out["peak_gib"] = {name: peak_memory_gib(fn) for name, fn in calls.items()}
        print(
            f"  peak GPU memory: TDG {out['peak_gib']['tdg']:.2f} GiB, "
            f"FluxPipeline batch-2 {out['peak_gib']['flux']:.2f} GiB"
        )
    return out


def own_code(
    pipe: TiedDiffusionPipeline, kw: dict[str, Any], flux_seconds: float, args: argparse.Namespace
) -> dict[str, float]:
    """TDG's own work in a call, timed alone (CPU time, median of rounds): per call the
    scheduler copy, the per-call view and the tied initial latents; per step the tie (every
    step with ``eta > 0`` of the paper schedule, on the model's latent shape)."""
    device = pipe._execution_device
    tokens = (kw["height"] // pipe.vae_scale_factor // 2) * (kw["width"] // pipe.vae_scale_factor // 2)
    e = torch.randn(2, tokens, pipe.transformer.config.in_channels, device=device, dtype=pipe.transformer.dtype)
    steps = kw["num_inference_steps"]
    etas = [SCHEDULE(1 - i / steps) for i in range(steps)]
    repeats = 20

    def per_call() -> None:
        for _ in range(repeats):
            pipe.call_view(tied_scheduler(pipe.scheduler, SCHEDULE)[0])
            torch.cat([e[:1], e[:1]])

    result = interleave(
        {"per call": per_call, "tie": lambda: [tie_pair(e[:1], e[1:], eta) for eta in etas if eta]},
        rounds=args.rounds,
        sync=cuda_sync(device.type),
    )
    call_ms = 1000 * result.timings["per call"].spread("cpu").median / repeats
    tie_ms = 1000 * result.timings["tie"].spread("cpu").median
    share = (call_ms + tie_ms) / 1000 / flux_seconds
    print(
        f"  TDG's own code, timed alone: {call_ms:.2f} ms per call (scheduler copy, view, latents) + "
        f"{tie_ms:.2f} ms for the tie of {steps} steps = {100 * share:.2f} % of the FluxPipeline call"
    )
    return {"per_call_ms": call_ms, "tie_ms": tie_ms, "percent_of_flux": 100 * share}


def load_judge(spec: str | None) -> Callable[[list], tuple[np.ndarray, np.ndarray]] | None:
    """A registered judge's name (``create_judge``) or ``MODULE:CALLABLE`` -> the judge
    (images -> (species (N,), attribute probabilities (N, A)))."""
    if not spec:
        return None
    if ":" not in spec:
        from concept_grounding.judge import create_judge

        judge = create_judge(spec)

        def verdict(images: list) -> tuple[np.ndarray, np.ndarray]:
            probs = judge.probabilities(images)
            return probs["species"].argmax(1), probs["attributes"]

        return verdict
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def drift(images: list[np.ndarray], plain: list[np.ndarray], judge: Callable | None) -> dict[str, float]:
    """Mean |uint8 difference| (0-255) from the plain images; with a judge, species and attribute agreement."""
    a, b = np.stack(images).astype(np.int16), np.stack(plain).astype(np.int16)
    out = {"mean_abs_pixel": float(np.abs(a - b).mean()), "max_abs_pixel": int(np.abs(a - b).max())}
    if judge is not None:
        from PIL import Image

        s1, p1 = judge([Image.fromarray(x) for x in images])
        s0, p0 = judge([Image.fromarray(x) for x in plain])
        out["species_agreement"] = float(np.mean(np.asarray(s1) == np.asarray(s0)))
        out["attribute_agreement"] = float(np.mean((np.asarray(p1) > 0.5) == (np.asarray(p0) > 0.5)))
    return out


def tdg_images(pipe: TiedDiffusionPipeline, kw: dict[str, Any], pairs: int) -> list[np.ndarray]:
    """uint8 (H, W, 3) references and guides of the drift prompts, seeds 0..pairs-1."""
    prompts = [DRIFT_PROMPTS[i % len(DRIFT_PROMPTS)] for i in range(pairs)]
    out = pipe(
        [r for r, _ in prompts],
        [g for _, g in prompts],
        eta_schedule=SCHEDULE,
        output_type="np",
        generator=[torch.Generator().manual_seed(i) for i in range(pairs)],
        **{k: v for k, v in kw.items() if k != "output_type"},
    )
    ims = np.concatenate([out.reference_images, out.guide_images])
    return list((ims * 255).round().clip(0, 255).astype(np.uint8))


def acceleration(
    pipe: TiedDiffusionPipeline, kw: dict[str, Any], label: str, args: argparse.Namespace
) -> dict[str, Any]:
    """plain / cached / compiled / both, on one pipeline (compilation stays, so it comes last)."""
    cache = TransformerCache.parse(args.cache)
    configs = {
        "plain": Acceleration(),
        "cached": Acceleration(cache),
        "compiled": Acceleration(compile=True),
        "both": Acceleration(cache, compile=True),
    }
    judge = load_judge(args.judge)
    device = str(pipe._execution_device.type)
    flux = sibling_flux(pipe)
    calls_kw = dict(kw, output_type="latent") if device == "cuda" else kw
    rows: dict[str, Any] = {}
    plain_images: list[np.ndarray] = []
    print(f"\n== acceleration: {label}; cache = {args.cache}")
    for name, acc in configs.items():
        with accelerated(pipe, acc, kw["num_inference_steps"]):
            start = time.perf_counter()
            calls = pair_callables(pipe, calls_kw, flux)
            for fn in calls.values():  # first calls: compilation happens here, outside the timed rounds
                fn()
            first = time.perf_counter() - start
            result = interleave(calls, rounds=args.rounds, warmup=0, sync=cuda_sync(device))
            images = tdg_images(pipe, kw, args.drift_pairs)
        plain_images = plain_images or images
        tdg_s = result.timings["tdg"].spread("cpu")
        rows[name] = {
            "label": acc.label,
            "first_calls_s": first,
            **result.as_dict({"tdg / flux": ("tdg", "flux")}),
            "drift": drift(images, plain_images, judge),
        }
        ratio = result.ratio("tdg", "flux")
        print(
            f"  {name:<9} TDG pair CPU {tdg_s.format(3, ' s')}, "
            f"wall {result.timings['tdg'].spread('wall').format(3, ' s')}; "
            f"TDG / FluxPipeline batch-2 CPU {ratio.format(3, 'x')}, "
            f"wall {result.ratio('tdg', 'flux', 'wall').format(3, 'x')}; "
            f"first two calls {first:.1f} s; drift {rows[name]['drift']['mean_abs_pixel']:.2f} / 255"
            + (
                f", species {rows[name]['drift']['species_agreement']:.2f}, "
                f"attributes {rows[name]['drift']['attribute_agreement']:.2f}"
                if judge is not None
                else ""
            ),
            flush=True,
        )
    base = rows["plain"]["seconds"]["tdg"]["cpu"]["median"]
    for row in rows.values():
        row["speedup_vs_plain"] = base / row["seconds"]["tdg"]["cpu"]["median"]
    print(
        "  speed-up of a TDG pair over plain (CPU medians): "
        + ", ".join(f"{name} {row['speedup_vs_plain']:.2f}x" for name, row in rows.items())
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sections", nargs="+", choices=("overhead", "acceleration"), default=["overhead", "acceleration"]
    )
    parser.add_argument(
        "--models",
        nargs="+",
        choices=("world", "small"),
        default=["world", "small"],
        help="models of the overhead section (acceleration runs on the world Flux)",
    )
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timed rounds")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: CPU time counts the work)")
    parser.add_argument(
        "--cache", default="first-block:threshold=0.2", help="the cached configuration (generate's --cache)"
    )
    parser.add_argument("--drift-pairs", type=int, default=4)
    parser.add_argument(
        "--judge",
        default="world-judge",
        help="a registered judge (concept_grounding.judge.list_judges()) or MODULE:CALLABLE, images -> "
        "(species (N,), attribute probs (N, A)); default: the shipped world judge (validated on exact "
        "edits, assets/world_judge); '' for none",
    )
    parser.add_argument("--flux-dev", action="store_true", help="FLUX.1-dev-shaped transformer on CUDA (untested here)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results: dict[str, Any] = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    if args.flux_dev:
        models = {"flux-dev": lambda: sized_pipeline(True, "cuda")}
    else:
        models = {"world": world_pipeline, "small": lambda: sized_pipeline(False, "cpu")}
        models = {
            k: v for k, v in models.items() if k in args.models or (k == "world" and "acceleration" in args.sections)
        }
    for name, build in models.items():
        pipe, kw, label = build()
        if "overhead" in args.sections and (args.flux_dev or name in args.models):
            res = overhead(pipe, kw, label, args)
            flux_s = res["seconds"]["flux"]["cpu" if not args.flux_dev else "wall"]["median"]
            res["own_code"] = own_code(pipe, kw, flux_s, args)
            results.setdefault("overhead", {})[name] = res
        if "acceleration" in args.sections and name in ("world", "flux-dev"):
            results["acceleration"] = acceleration(pipe, kw, label, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
