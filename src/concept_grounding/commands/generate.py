"""``concept-grounding generate``: TDG images for SUB pairings as a resumable image folder.

Pairings come from the bird world's class vectors (default), from CUB's class-level
labels (``--cub-root``), or from a file (``--pairings``). Run it again with the same
arguments to resume; launch it with ``accelerate launch`` to shard across processes/GPUs.
"""

from __future__ import annotations

import argparse
import json

from concept_grounding.commands._types import (
    attribute_name,
    class_name,
    closed_unit_interval,
    existing_dir,
    existing_file,
    multiple_of,
    nonnegative_float,
    output_dir,
    positive_float,
    positive_int,
)

#: FLUX's VAE downsamples by 8 and the transformer packs 2 x 2 latents into a token.
SIZE_MULTIPLE = 16
TINY_MODEL = "tiny_flux_pipeline(seed=0)"
#: ``--model`` value of the world-trained Flux shipped with the package (the default).
WORLD_MODEL = "world"
#: How the world Flux is sampled: true classifier-free guidance against the empty prompt
#: (it was trained with 10 % caption dropout and has no distilled guidance embedding).
WORLD_EXTRA = {"true_cfg_scale": 4.0, "negative_prompt": ""}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=output_dir, help="output folder (an imagefolder dataset)")
    parser.add_argument("--model", default=WORLD_MODEL,
                        help="'world' (default): the small Flux trained on the bird world, shipped with the package "
                             "(32 px, float32, true CFG 4; see concept_grounding/assets/world_flux/README.md); "
                             "or a FLUX model id or folder, e.g. black-forest-labs/FLUX.1-dev")
    parser.add_argument("--tiny", action="store_true", help="use a tiny random FLUX built offline (tests, demo)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--cub-root", type=existing_dir, help="take class-level labels from a CUB_200_2011 folder")
    source.add_argument("--pairings", type=existing_file, help="file of pairings: 'class,attribute' lines or JSON lines")
    parser.add_argument("--classes", nargs="*", type=class_name, help="restrict to these classes (CUB names)")
    parser.add_argument("--attributes", nargs="*", type=attribute_name, help="restrict to these target attributes")
    parser.add_argument("--images-per-pairing", type=positive_int, default=500, help="N (paper: 500)")
    parser.add_argument("--seed", type=int, default=0, help="base seed of the per-image seeds")
    parser.add_argument("--method", choices=("tdg", "prompting"), default="tdg")
    parser.add_argument("--steps", type=positive_int, default=28)
    parser.add_argument("--guidance-scale", type=nonnegative_float, default=3.5)
    parser.add_argument("--size", type=multiple_of(SIZE_MULTIPLE, why="FLUX: VAE factor 8 x 2 x 2 latent packing"),
                        default=None, help=f"image side, a multiple of {SIZE_MULTIPLE} (default 32 for the world model and --tiny, else 1024)")
    parser.add_argument("--t-min", type=closed_unit_interval, default=None,
                        help="override the paper's schedule (with --t-max, --k)")
    parser.add_argument("--t-max", type=closed_unit_interval, default=None)
    parser.add_argument("--k", type=positive_float, default=None)
    parser.add_argument("--batch-size", type=positive_int, default=4)
    parser.add_argument("--max-images", type=positive_int, default=None, help="stop after this many new images")
    parser.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16")
    parser.add_argument("--save-guides", action="store_true",
                        help="also write each guide image to .guides/ (SUB itself keeps only the reference images)")


def _pairings(args: argparse.Namespace):
    """The planned pairings after ``--classes`` / ``--attributes``; empty or unknown selections are errors."""
    from concept_grounding.errors import UsageError
    from concept_grounding.tdg.generate import plan_pairings, read_pairings

    if args.pairings:
        pairings = read_pairings(args.pairings)
        source, names = f"the pairings file {args.pairings}", sorted({p.reference_class for p in pairings})
    elif args.cub_root:
        from concept_grounding.loaders import load_cub
        import numpy as np

        train = load_cub(args.cub_root, progress=False)["train"]
        names = train.features["label"].names
        matrix = np.zeros((len(names), 312), dtype=np.uint8)
        for label, row in zip(train["label"], train["class_attributes"]):
            matrix[label] = row
        pairings = plan_pairings(names, matrix, args.attributes)
        source = f"the CUB folder {args.cub_root}"
    else:
        from concept_grounding.world import BirdWorld

        world = BirdWorld()
        names = world.class_names
        pairings = plan_pairings(names, world.class_attributes, args.attributes)
        source = f"the bird world ({len(names)} SUB classes)"
    if args.classes:
        missing = [c for c in args.classes if c not in set(names)]
        if missing:
            raise UsageError(f"{missing} not among the classes of {source}", argument="--classes",
                             hint=f"choose from {list(names)[:6]}...")
        pairings = [p for p in pairings if p.reference_class in set(args.classes)]
    if args.attributes:
        pairings = [p for p in pairings if p.target_attribute in set(args.attributes)]
    if not pairings:
        raise UsageError(f"no (class, attribute) pairing is left to generate from {source}: every selected class "
                         "already has every selected attribute", argument="--classes/--attributes",
                         hint="choose other classes or attributes")
    return pairings


def _schedule(args: argparse.Namespace):
    from concept_grounding.errors import UsageError
    from concept_grounding.tdg import EtaSchedule

    if all(v is None for v in (args.t_min, args.t_max, args.k)):
        return None
    t_min = 0.2 if args.t_min is None else args.t_min
    t_max = 0.9 if args.t_max is None else args.t_max
    if t_min > t_max:
        raise UsageError(f"--t-min {t_min} is above --t-max {t_max}", argument="--t-min/--t-max")
    return EtaSchedule(t_min=t_min, t_max=t_max, k=10.0 if args.k is None else args.k)


#: manifest setting -> the argument that sets it (for resume messages)
MANIFEST_ARGUMENTS = {
    "model": "--model/--tiny", "dtype": "--dtype", "seed": "--seed", "method": "--method",
    "num_inference_steps": "--steps", "guidance_scale": "--guidance-scale", "height": "--size", "width": "--size",
    "max_sequence_length": "--tiny/--model", "schedule": "--t-min/--t-max/--k", "save_guides": "--save-guides",
    "batch_size": "--batch-size", "pairings": "--classes/--attributes/--pairings/--images-per-pairing",
}


def run(args: argparse.Namespace) -> int:
    from concept_grounding.tdg.generate import (
        GenerationSettings,
        check_manifest,
        finalize,
        generate_images,
        generation_manifest,
        plan_jobs,
    )

    # 1. everything cheap first (no torch yet): arguments, pairings, the model's availability, the manifest
    schedule = _schedule(args)
    jobs = plan_jobs(_pairings(args), args.images_per_pairing, args.seed)
    extra: dict = {}
    if args.tiny:
        model, dtype, size, max_len = TINY_MODEL, "float32", args.size or 32, 32
    elif args.model == WORLD_MODEL:
        from concept_grounding.worldflux import world_flux_path

        max_len = json.loads((world_flux_path() / "tokenizer_2" / "tokenizer_config.json").read_text())["model_max_length"]
        model, dtype, size, extra = WORLD_MODEL, "float32", args.size or 32, dict(WORLD_EXTRA)
    else:
        from concept_grounding.hub import resolve_model

        model, dtype, size, max_len = resolve_model(args.model, "--model"), args.dtype, args.size or 1024, 512
    settings = GenerationSettings(
        method=args.method,
        num_inference_steps=args.steps,
        guidance_scale=args.guidance_scale,
        height=size,
        width=size,
        max_sequence_length=max_len,
        schedule=schedule,
        save_guides=args.save_guides,
        extra=extra,
    )
    run_info = {"model": model, "dtype": dtype, "seed": args.seed}
    check_manifest(args.out, generation_manifest(jobs, settings, args.batch_size, run_info), MANIFEST_ARGUMENTS)

    # 2. the pipeline
    import torch
    from accelerate import PartialState

    from concept_grounding.tdg import TiedDiffusionPipeline, tiny_flux_pipeline

    state = PartialState()
    if args.tiny:
        pipe = tiny_flux_pipeline()
    elif model == WORLD_MODEL:
        from concept_grounding.worldflux import load_world_flux

        pipe = load_world_flux(pipeline_cls=TiedDiffusionPipeline)
    else:
        pipe = TiedDiffusionPipeline.from_pretrained(model, torch_dtype=getattr(torch, dtype))
    pipe.to(state.device)
    pipe.set_progress_bar_config(disable=True)

    # 3. generate, then merge the metadata
    written = generate_images(
        pipe,
        jobs,
        args.out,
        settings,
        batch_size=args.batch_size,
        process_index=state.process_index,
        num_processes=state.num_processes,
        max_images=args.max_images,
        progress=state.is_local_main_process,
        run_info=run_info,
    )
    state.wait_for_everyone()
    if state.is_main_process:
        path = finalize(args.out, jobs)
        print(f"wrote {written} new images ({len(jobs)} planned); metadata: {path}")
    return 0
