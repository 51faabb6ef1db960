"""``concept-grounding generate``: TDG images for SUB pairings as a resumable image folder.

Pairings come from the bird world's class vectors (default), from CUB's class-level
labels (``--cub-root``), or from a file (``--pairings``). Run it again with the same
arguments to resume; launch it with ``accelerate launch`` to shard across processes/GPUs.
The job lives in :mod:`concept_grounding.tdg.generate_job` (``run_generate`` of a
:class:`~concept_grounding.tdg.generate.GenerateConfig`); this module parses the arguments, maps them onto the config
and prints.
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from concept_grounding import settings
from concept_grounding.commands._types import existing_dir, existing_file, output_dir
from concept_grounding.errors import UsageError
from concept_grounding.jobs import Job
from concept_grounding.tdg.acceleration import CACHES, Acceleration, TransformerCache
from concept_grounding.tdg.generate_config import GenerateConfig
from concept_grounding.tdg.generate_job import GenerateResult, run_generate
from concept_grounding.tdg.sources import (
    ClassTablePairings,
    FluxSource,
    PairingsFile,
    PairingSource,
    PretrainedFlux,
)
from concept_grounding.tdg.tiny import TinyFlux
from concept_grounding.worldflux.source import WORLD_MODEL, WorldFlux, world_pairings

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]

#: resumable: it writes the images under the config's ``out`` as it goes (``--out``)
JOB = Job("generate", GenerateConfig, run_generate)


def transformer_cache(text: str) -> TransformerCache:
    """``--cache NAME[:OPTION=VALUE,...]``: one of diffusers' transformer caches (:data:`CACHES`)."""
    try:
        return TransformerCache.parse(text)
    except UsageError as err:
        raise argparse.ArgumentTypeError(f"{err.reason}{'; ' + err.hint if err.hint else ''}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=output_dir, help="output folder (an imagefolder dataset)")
    parser.add_argument(
        "--model",
        default=WORLD_MODEL,
        help="'world' (default): the small Flux trained on the bird world, shipped with the package "
        "(32 px, float32, true CFG 4; see concept_grounding/assets/world_flux/README.md); "
        "or a FLUX.1 / FLUX.2 / FLUX.2 [klein] model id or folder, e.g. black-forest-labs/FLUX.1-dev, "
        "black-forest-labs/FLUX.2-klein-4B (loaded as its family's TDG pipeline)",
    )
    parser.add_argument("--tiny", action="store_true", help="use a tiny random FLUX built offline (tests, demo)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--cub-root",
        type=existing_dir,
        help="take class-level labels from a CUB_200_2011 folder (default: the bird world's class vectors)",
    )
    source.add_argument(
        "--pairings",
        type=existing_file,
        help="file of pairings: 'class,attribute' lines or JSON lines (default: SUB's pairings of the bird world)",
    )
    settings.add_arguments(parser, GenerateConfig)
    parser.add_argument(
        "--dtype",
        choices=("bfloat16", "float16", "float32"),
        default="bfloat16",
        help="precision of a named FLUX model (--model; the world model and --tiny run in float32)",
    )
    parser.add_argument(
        "--cache",
        type=transformer_cache,
        default=None,
        metavar="NAME[:OPTION=VALUE,...]",
        help="a diffusers transformer cache, enabled with transformer.enable_cache: "
        f"{', '.join(CACHES)}; options are the diffusers config's fields, "
        "e.g. first-block:threshold=0.2 (recorded in the manifest)",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the transformer's repeated blocks (diffusers' compile_repeated_blocks; "
        "minutes of compilation on CPU, recorded in the manifest)",
    )


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
        from concept_grounding.loaders.class_table import cub_class_table

        return ClassTablePairings(partial(cub_class_table, args.cub_root), f"the CUB folder {args.cub_root}")
    return world_pairings()


def config_from_args(args: argparse.Namespace) -> GenerateConfig:
    """The job's configuration (sources are read when the job runs, so errors keep their order); the
    contact sheet is drawn with the world judge's verdicts when a world Flux draws the world."""
    from concept_grounding.curation.generated_sheet import contact_sheet

    model = _model(args)
    return settings.from_args(
        GenerateConfig,
        args,
        out=args.out,
        model=model,
        pairings=_pairing_source(args),
        acceleration=Acceleration(cache=args.cache, compile=args.compile),
        sheet=partial(contact_sheet, judge=isinstance(model, WorldFlux)),
    )


def run(args: argparse.Namespace) -> int:
    from concept_grounding.errors import options_as_flags

    config = config_from_args(args)
    with options_as_flags({**settings.flags(GenerateConfig), "pairings": "--pairings"}):  # errors name the flags
        JOB(config, args.out, report=partial(_print, judged=isinstance(config.model, WorldFlux)))
    return 0


def _print(result: GenerateResult, metadata: Path, *, judged: bool) -> None:
    """The images written, the metadata and the contact sheet (the main process only)."""
    if result.metadata is None:
        return
    what = "contact sheet with the world judge's verdicts" if judged else "contact sheet"
    print(
        f"wrote {result.written} new images ({result.planned} planned); metadata: {metadata}"
        + (f"; {what}: {result.sheet}" if result.sheet else "")
    )
