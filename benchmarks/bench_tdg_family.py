"""TDG's overhead over each base pipeline of the Flux family, on this CPU (issue 36).

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

    python benchmarks/bench_tdg_family.py                    # 15 rounds, 64 px, 8 steps: about 3 minutes on 2 cores
    python benchmarks/bench_tdg_family.py --rounds 9 --size 32 --json out.json
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

R, G = "a photo of a blue jay with yellow colored feathers on the crown", "a photo of a bird with yellow colored feathers on the crown"
SCHEDULE = EtaSchedule(0.2, 0.9, 10.0)
#: name -> (TDG class, base class, builder, extra call arguments)
FAMILY: dict[str, tuple[type, type, Callable[[type], Any], dict[str, Any]]] = {
    "FLUX.1": (TiedDiffusionPipeline, FluxPipeline, lambda cls: tiny_flux_pipeline(cls, seed=0),
               {"guidance_scale": 3.5}),
    "FLUX.2 [dev]": (TiedFlux2Pipeline, Flux2Pipeline, lambda cls: tiny_flux2_pipeline(cls, seed=0),
                     {"guidance_scale": 4.0}),
    "FLUX.2 [klein]": (TiedFlux2KleinPipeline, Flux2KleinPipeline, lambda cls: tiny_flux2_pipeline(cls, seed=0),
                       {"guidance_scale": 4.0}),
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
    common = dict(height=size, width=size, num_inference_steps=steps, max_sequence_length=32, output_type="pt",
                  **extra)
    pair = torch.cat([latents, latents])
    calls = {
        "tdg": lambda: tdg(R, G, eta_schedule=SCHEDULE, latents=latents, **common),
        "base": lambda: base(prompt=[R, G], latents=pair, **common),
        "base_again": lambda: base(prompt=[R, G], latents=pair, **common),
    }
    packed = latents if latents.ndim == 3 else latents.flatten(2).transpose(1, 2)  # FLUX.2: (1, C, h, w) -> (1, hw, C)
    calls["tdg_own_code"] = own_code(tdg, packed, steps)
    result = interleave(calls, rounds=rounds, warmup=1)
    ratios = {"TDG / base": ("tdg", "base"), "A/A control": ("base_again", "base"),
              "TDG's own code / base": ("tdg_own_code", "base")}
    print(f"{name}: {size} px, {steps} steps, guidance {extra['guidance_scale']}")
    print(result.report(ratios))
    return {"size": size, "steps": steps, **result.as_dict(ratios)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--size", type=int, default=64, help="image side in pixels (default 64)")
    parser.add_argument("--steps", type=int, default=8, help="denoising steps (default 8)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: CPU time counts the work)")
    parser.add_argument("--members", nargs="*", choices=list(FAMILY), default=list(FAMILY))
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    figures = {name: time_member(name, args.size, args.steps, args.rounds) for name in args.members}
    print("\nTDG / base pipeline, CPU time, median [min, max] of per-round ratios (target <= 1.02x):")
    for name, data in figures.items():
        tdg, control = data["ratios"]["TDG / base"]["cpu"], data["ratios"]["A/A control"]["cpu"]
        share = data["ratios"]["TDG's own code / base"]["cpu"]["median"]
        print(f"  {name:<15} {tdg['median']:.3f}x [{tdg['min']:.3f}, {tdg['max']:.3f}]   "
              f"A/A {control['median']:.3f}x [{control['min']:.3f}, {control['max']:.3f}]   "
              f"TDG's own code {100 * share:.2f} % of a base call")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
