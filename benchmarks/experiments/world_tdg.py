"""SUB's central claim where the truth is known: TDG vs prompting on the world-trained Flux.

The stages of ``benchmarks/bench_tdg_world.py`` (which only parses its arguments into a
:class:`WorldTDGSettings` and calls :func:`run_world_tdg`); all seeded, judges cached under
``settings.out``:

1. **validate**: a grounded judge (:class:`~concept_grounding.judge.WorldJudge`, trained on
   typical renders, their exact edits and deviation-rate-1 renders of the generator's own
   world, at its resolution; :func:`cached_judge`) is validated on held-out exact edits of
   every SUB pairing and on ordinary renders, raw and after the world VAE's round trip
   (:func:`validate`). A judge that misses the bars gets no substitution finding.
2. **quality** (:func:`quality`) on in-distribution prompts, by the judge: species agreement,
   prompted attributes found, colour guides showing S+.
3. **substitution** (:func:`substitution`) for every SUB pairing of the world, ``images``
   images each, ``prompting`` (c_R alone, :func:`~concept_grounding.tdg.baseline.prompting_images`)
   vs ``tdg`` (c_R tied to c_G, SUB's schedule per category), same seeds and steps; for
   pattern / shape pairings also TDG with SUB App. B's guide bird and with a generic "bird"
   guide (:func:`method_prompts`). The statistics (95 % bootstrap intervals over pairings,
   power) are :mod:`.world_tdg_stats`'.
4. **sweep** (:func:`eta_sweep`): constant eta values and the paper schedules.
5. **filter** (:func:`filter_agreement`): the VQA filter (world-CLIP scorer) against the judge.
6. **timing** (:func:`timing`): TDG pair vs FluxPipeline batch-2 (CPU time, interleaved rounds).

The world Flux is loaded and sampled through its one declaration
(:class:`~concept_grounding.worldflux.source.WorldFlux`,
:class:`~concept_grounding.worldflux.loader.WorldFluxSettings`), as ``generate`` and the Space do.

The settings live in :mod:`.world_tdg_settings`, the judges in :mod:`.world_tdg_judges`, the
generation and the stages in :mod:`.world_tdg_stages`; their public names are importable from here too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .world_tdg_judges import (
    WorldClipScorer,
    cached_clip,
    cached_judge,
    export_judge,
    judge_cost,
    judge_folder,
    make_judge_fn,
    to_unit,
)
from .world_tdg_settings import STAGES, WorldTDGSettings, check_settings
from .world_tdg_stages import (
    contact_sheet,
    eta_sweep,
    filter_agreement,
    generators,
    guide_colour_prompt,
    method_prompts,
    quality,
    run_prompting,
    run_tdg,
    substitution,
    timing,
    vae_roundtrip,
    validate,
    world_guide,
)
from .world_tdg_stats import power, table, write_world_tdg_report

__all__ = [
    "STAGES",
    "WorldTDGSettings",
    "run_world_tdg",
    # re-exported from the modules they live in
    "check_settings",
    "judge_folder",
    "cached_judge",
    "cached_clip",
    "to_unit",
    "judge_cost",
    "export_judge",
    "make_judge_fn",
    "WorldClipScorer",
    "world_guide",
    "generators",
    "run_prompting",
    "run_tdg",
    "vae_roundtrip",
    "validate",
    "guide_colour_prompt",
    "quality",
    "method_prompts",
    "substitution",
    "eta_sweep",
    "filter_agreement",
    "timing",
    "contact_sheet",
]


def run_world_tdg(settings: WorldTDGSettings, command: str) -> tuple[dict[str, Any], bool]:
    """Run the stages of ``settings`` and write ``results.json``, ``report.md``, ``validation.md``
    and ``contact_sheet.png`` under ``settings.out``.

    Args:
        settings: the run's settings (checked by :func:`check_settings` first).
        command: the command line, recorded in the results and the report.

    Returns:
        ``(results, refused)``: the results written to ``results.json``, and whether the judge
        missed the validation bars (then there is no substitution finding).
    """
    check_settings(settings)
    import torch

    from concept_grounding.world import BirdWorld
    from concept_grounding.worldflux.loader import trained_world_config, world_flux_settings
    from concept_grounding.worldflux.source import WorldFlux

    torch.set_num_threads(settings.threads)
    t0 = time.perf_counter()
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    stages = set(settings.stages)
    tdg = (
        WorldFlux(settings.pipeline).resolve().load().to(settings.device)
    )  # every stage needs it (validation: its VAE's round trip)
    kw = world_flux_settings(settings.pipeline).call_kwargs(
        true_cfg_scale=settings.cfg, num_inference_steps=settings.steps
    )
    world = BirdWorld(trained_world_config(settings.pipeline))
    pairings = world.default_pairings()
    pairings = pairings[: settings.limit_pairings] if settings.limit_pairings else pairings
    print(f"judge ({world.config}) ...", flush=True)
    judge = cached_judge(world, settings)
    judge_fn = make_judge_fn(judge)
    results: dict[str, Any] = {
        "command": command,
        "settings": settings.as_dict(),
        "world": dict(vars(world.config)),
        "call_kwargs": kw,
    }
    validation = validate(world, judge_fn, tdg.vae, settings, pairings)
    results["validation"] = {**validation.to_dict(), "markdown": validation.to_markdown()}
    (out / "validation.md").write_text(validation.to_markdown() + "\n")
    print(validation.to_markdown(), flush=True)
    if settings.export_judge is not None:
        export_judge(judge, validation, results, Path(settings.export_judge), judge_cost(world, settings))
    if "quality" in stages:
        print("quality ...", flush=True)
        results["quality"], _ = quality(world, tdg, judge_fn, kw, settings, pairings)
        print(json.dumps(results["quality"]), flush=True)
    refused = not validation.supports_finding
    if refused:
        print("no substitution finding: the judge misses the bars (" + "; ".join(validation.failures) + ")", flush=True)
    if not refused and "substitution" in stages:
        sub = substitution(world, tdg, judge_fn, kw, settings, pairings)
        results["table"] = table(sub["records"], validation.validated_groups, settings.bootstrap, settings.seed)
        results["power"] = power(results["table"])
        results["records"] = sub["records"]
        print(json.dumps(results["table"]["overall"]), flush=True)
        contact_sheet(sub, out / "contact_sheet.png")
        if "filter" in stages:
            print("filter ...", flush=True)
            results["filter"] = filter_agreement(world, sub, cached_clip(world, settings), settings, pairings)
    if not refused and "sweep" in stages:
        print("eta sweep ...", flush=True)
        results["eta_sweep"] = eta_sweep(world, tdg, judge_fn, kw, settings, pairings, validation.validated_groups)
    if "timing" in stages:
        from diffusers import FluxPipeline

        flux = FluxPipeline(**tdg.components)  # the reference the TDG pair is timed against
        flux.set_progress_bar_config(disable=True)
        results["timing"] = timing(flux, tdg, kw)
    results["seconds"] = time.perf_counter() - t0
    (out / "results.json").write_text(json.dumps(results, indent=1, default=float))
    write_world_tdg_report(results, out / "report.md")
    return results, refused
