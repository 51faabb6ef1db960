"""``concept-grounding generate``: TDG images for SUB pairings as a resumable image folder.

Pairings come from the bird world's class vectors (default), from CUB's class-level
labels (``--cub-root``), or from a file (``--pairings``). Run it again with the same
arguments to resume; launch it with ``accelerate launch`` to shard across processes/GPUs.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output folder (an imagefolder dataset)")
    parser.add_argument("--model", default="black-forest-labs/FLUX.1-dev", help="FLUX model id or folder")
    parser.add_argument("--tiny", action="store_true", help="use a tiny random FLUX built offline (tests, demo)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--cub-root", help="take class-level labels from a CUB_200_2011 folder")
    source.add_argument("--pairings", help="file of pairings: 'class,attribute' lines or JSON lines")
    parser.add_argument("--classes", nargs="*", help="restrict to these class folder names")
    parser.add_argument("--attributes", nargs="*", help="restrict to these target attributes")
    parser.add_argument("--images-per-pairing", type=int, default=500, help="N (paper: 500)")
    parser.add_argument("--seed", type=int, default=0, help="base seed of the per-image seeds")
    parser.add_argument("--method", choices=("tdg", "prompting"), default="tdg")
    parser.add_argument("--steps", type=int, default=28)
    parser.add_argument("--guidance-scale", type=float, default=3.5)
    parser.add_argument("--size", type=int, default=None, help="image side (default 1024; 32 with --tiny)")
    parser.add_argument("--t-min", type=float, default=None, help="override the paper's schedule (with --t-max, --k)")
    parser.add_argument("--t-max", type=float, default=None)
    parser.add_argument("--k", type=float, default=None)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-images", type=int, default=None, help="stop after this many new images")
    parser.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16")
    parser.add_argument("--save-guides", action="store_true",
                        help="also write each guide image to .guides/ (SUB itself keeps only the reference images)")


def _pairings(args: argparse.Namespace):
    from concept_grounding.tdg.generate import plan_pairings, read_pairings

    if args.pairings:
        pairings = read_pairings(args.pairings)
    elif args.cub_root:
        from concept_grounding.loaders import load_cub
        import numpy as np

        train = load_cub(args.cub_root, progress=False)["train"]
        names = train.features["label"].names
        matrix = np.zeros((len(names), 312), dtype=np.uint8)
        for label, row in zip(train["label"], train["class_attributes"]):
            matrix[label] = row
        pairings = plan_pairings(names, matrix, args.attributes)
    else:
        from concept_grounding.world import BirdWorld

        world = BirdWorld()
        pairings = plan_pairings(world.class_names, world.class_attributes, args.attributes)
    if args.classes:
        pairings = [p for p in pairings if p.reference_class in set(args.classes)]
    if args.attributes:
        pairings = [p for p in pairings if p.target_attribute in set(args.attributes)]
    return pairings


def run(args: argparse.Namespace) -> int:
    import torch
    from accelerate import PartialState

    from concept_grounding.tdg import EtaSchedule, TiedDiffusionPipeline, tiny_flux_pipeline
    from concept_grounding.tdg.generate import GenerationSettings, finalize, generate_images, plan_jobs

    state = PartialState()
    schedule = None
    if any(v is not None for v in (args.t_min, args.t_max, args.k)):
        schedule = EtaSchedule(
            t_min=0.2 if args.t_min is None else args.t_min,
            t_max=0.9 if args.t_max is None else args.t_max,
            k=10.0 if args.k is None else args.k,
        )
    if args.tiny:
        pipe = tiny_flux_pipeline()
        size, max_len = args.size or 32, 32
    else:
        pipe = TiedDiffusionPipeline.from_pretrained(args.model, torch_dtype=getattr(torch, args.dtype))
        size, max_len = args.size or 1024, 512
    pipe.to(state.device)
    pipe.set_progress_bar_config(disable=True)
    jobs = plan_jobs(_pairings(args), args.images_per_pairing, args.seed)
    settings = GenerationSettings(
        method=args.method,
        num_inference_steps=args.steps,
        guidance_scale=args.guidance_scale,
        height=size,
        width=size,
        max_sequence_length=max_len,
        schedule=schedule,
        save_guides=args.save_guides,
    )
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
    )
    state.wait_for_everyone()
    if state.is_main_process:
        path = finalize(args.out, jobs)
        print(f"wrote {written} new images ({len(jobs)} planned); metadata: {path}")
    return 0
