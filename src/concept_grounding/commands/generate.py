"""``concept-grounding generate``: TDG images for SUB pairings as a resumable image folder.

Pairings come from the bird world's class vectors (default), from CUB's class-level
labels (``--cub-root``), or from a file (``--pairings``). Run it again with the same
arguments to resume; launch it with ``accelerate launch`` to shard across processes/GPUs.
The job lives in :mod:`concept_grounding.tdg.generate_job` (``run_generate`` of a
:class:`~concept_grounding.tdg.generate.GenerateConfig`); this module parses the arguments, maps them onto the config and prints.
"""

from __future__ import annotations

import argparse

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
from concept_grounding.errors import UsageError
from concept_grounding.tdg.acceleration import CACHES, Acceleration, TransformerCache
from concept_grounding.tdg.generate_config import GenerateConfig
from concept_grounding.tdg.generate_job import run_generate
from concept_grounding.tdg.sources import (
    DEFAULT_STEPS,
    ClassTablePairings,
    FluxSource,
    PairingsFile,
    PairingSource,
    PretrainedFlux,
)
from concept_grounding.testing.flux import TinyFlux
from concept_grounding.worldflux.loader import WORLD_STEPS
from concept_grounding.worldflux.source import WORLD_MODEL, WorldFlux, world_pairings

def transformer_cache(text: str) -> TransformerCache:
    """``--cache NAME[:OPTION=VALUE,...]``: one of diffusers' transformer caches (:data:`CACHES`)."""
    try:
        return TransformerCache.parse(text)
    except UsageError as err:
        raise argparse.ArgumentTypeError(f"{err.reason}{'; ' + err.hint if err.hint else ''}") from None


#: FLUX's VAE downsamples by 8 and the transformer packs 2 x 2 latents into a token.
SIZE_MULTIPLE = 16


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=output_dir, help="output folder (an imagefolder dataset)")
    parser.add_argument("--model", default=WORLD_MODEL,
                        help="'world' (default): the small Flux trained on the bird world, shipped with the package "
                             "(32 px, float32, true CFG 4; see concept_grounding/assets/world_flux/README.md); "
                             "or a FLUX.1 / FLUX.2 / FLUX.2 [klein] model id or folder, e.g. black-forest-labs/FLUX.1-dev, "
                             "black-forest-labs/FLUX.2-klein-4B (loaded as its family's TDG pipeline)")
    parser.add_argument("--tiny", action="store_true", help="use a tiny random FLUX built offline (tests, demo)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--cub-root", type=existing_dir, help="take class-level labels from a CUB_200_2011 folder (default: the bird world's class vectors)")
    source.add_argument("--pairings", type=existing_file, help="file of pairings: 'class,attribute' lines or JSON lines (default: SUB's pairings of the bird world)")
    parser.add_argument("--classes", nargs="*", type=class_name, help="restrict to these classes (CUB names; default: all)")
    parser.add_argument("--attributes", nargs="*", type=attribute_name, help="restrict to these target attributes (default: all)")
    parser.add_argument("--images-per-pairing", type=positive_int, default=500, help="images per (class, attribute) pairing (paper: 500)")
    parser.add_argument("--seed", type=int, default=0, help="base seed of the per-image seeds")
    parser.add_argument("--method", choices=("tdg", "prompting"), default="tdg",
                        help="tdg: tied diffusion (SUB Sec. 3); prompting: the reference prompt alone (baseline)")
    parser.add_argument("--steps", dest="num_inference_steps", type=positive_int, default=None,
                        help=f"denoising steps (default: the model's own: {WORLD_STEPS} for the world Flux, as its "
                             f"card says; {DEFAULT_STEPS} for the others)")
    parser.add_argument("--guidance-scale", type=nonnegative_float, default=3.5,
                        help="FLUX.1 [dev]'s distilled guidance scale (ignored by models without a guidance "
                             "embedding, such as the world Flux, which uses true CFG 4; the manifest then omits it)")
    parser.add_argument("--size", type=multiple_of(SIZE_MULTIPLE, why="FLUX: VAE factor 8 x 2 x 2 latent packing"),
                        default=None, help=f"image side, a multiple of {SIZE_MULTIPLE} (default 32 for the world model and --tiny, else 1024)")
    parser.add_argument("--t-min", type=closed_unit_interval, default=None,
                        help="eta schedule: start of the tie, in [0, 1] (default: the paper's per-attribute schedule)")
    parser.add_argument("--t-max", type=closed_unit_interval, default=None,
                        help="eta schedule: end of the tie, in [0, 1] (default: the paper's per-attribute schedule)")
    parser.add_argument("--k", type=positive_float, default=None,
                        help="eta schedule: steepness k > 0 (default: the paper's per-attribute schedule)")
    parser.add_argument("--batch-size", type=positive_int, default=4, help="image pairs per pipeline call")
    parser.add_argument("--max-images", type=positive_int, default=None, help="stop after this many new images (default: no limit)")
    parser.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16",
                        help="precision of a named FLUX model (--model; the world model and --tiny run in float32)")
    parser.add_argument("--guide-bird", default=None,
                        help="guide bird of shape / pattern attributes for pairings that name none (SUB App. B; "
                             "default: App. B's; a --pairings file's guide_bird wins)")
    parser.add_argument("--save-guides", action="store_true",
                        help="also write each guide image to .guides/ (SUB itself keeps only the reference images)")
    parser.add_argument("--cache", type=transformer_cache, default=None, metavar="NAME[:OPTION=VALUE,...]",
                        help="a diffusers transformer cache, enabled with transformer.enable_cache: "
                             f"{', '.join(CACHES)}; options are the diffusers config's fields, "
                             "e.g. first-block:threshold=0.2 (recorded in the manifest)")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the transformer's repeated blocks (diffusers' compile_repeated_blocks; "
                             "minutes of compilation on CPU, recorded in the manifest)")


def _model(args: argparse.Namespace) -> FluxSource:
    """The Flux source of ``--tiny`` / ``--model`` (nothing is resolved or loaded yet)."""
    if args.tiny:
        return TinyFlux()
    if args.model == WORLD_MODEL:
        return WorldFlux()
    return PretrainedFlux(args.model, args.dtype, argument="--model")


def _pairing_source(args: argparse.Namespace) -> PairingSource:
    """The pairing source of ``--pairings`` / ``--cub-root`` / the bird world (read when the job plans)."""
    if args.pairings:
        return PairingsFile(args.pairings)
    if args.cub_root:
        from functools import partial

        from concept_grounding.loaders.class_table import cub_class_table

        return ClassTablePairings(partial(cub_class_table, args.cub_root), f"the CUB folder {args.cub_root}")
    return world_pairings()


def _tuple(values: list[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


def config_from_args(args: argparse.Namespace) -> GenerateConfig:
    """The job's configuration (sources are read when the job runs, so errors keep their order)."""
    return GenerateConfig(
        out=args.out, model=_model(args), pairings=_pairing_source(args), classes=_tuple(args.classes),
        attributes=_tuple(args.attributes), images_per_pairing=args.images_per_pairing, seed=args.seed,
        method=args.method, num_inference_steps=args.num_inference_steps, guidance_scale=args.guidance_scale, size=args.size,
        t_min=args.t_min, t_max=args.t_max, k=args.k, batch_size=args.batch_size, max_images=args.max_images,
        save_guides=args.save_guides, guide_bird=args.guide_bird, acceleration=Acceleration(cache=args.cache, compile=args.compile),
    )


def run(args: argparse.Namespace) -> int:
    result = run_generate(config_from_args(args))
    if result.metadata is not None:  # the main process
        print(f"wrote {result.written} new images ({result.planned} planned); metadata: {result.metadata}")
    return 0
