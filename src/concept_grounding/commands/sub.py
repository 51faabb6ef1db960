"""``concept-grounding sub``: SUB accuracy of any model, written as a report folder.

``--model`` takes a saved project model folder, ``path/to/file.py:factory`` or
``package.module:factory`` (returning the model, optionally with its transform and concept
names; a pytorch-concepts model names its own concepts), or an open_clip / transformers
CLIP name or path. A plain module needs its preprocessing stated: ``--mean`` and
``--std``, a transform from the factory, or ``--no-normalize``. ``--sub`` takes a local
SUB copy or the Hub id; without it the bird world's SUB export is used. Under
``accelerate launch`` the images are split across the processes; the main process writes
the report. Errors name these flags, not the Python keywords behind them (:data:`FLAGS`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concept_grounding.hub import ModelSpec

from concept_grounding import settings
from concept_grounding.bench.sub_job import ScoredModel, SubConfig, SubResult, expand_models, run_sub
from concept_grounding.jobs import Job, add_out_argument

__all__ = ["JOB", "add_arguments", "run", "config_from_args", "FLAGS"]

#: ``config -> run -> result -> save`` (:mod:`concept_grounding.jobs`)
JOB = Job("sub", SubConfig, run_sub)

#: how an error raised by the Python API names each keyword when this command runs it
#: (:func:`concept_grounding.errors.options_as_flags`).
FLAGS: dict[str, str] = {
    "concept_names": "--concept-names",
    "index_base": "--index-base",
    "output": "--output",
    "outputs": "--outputs",
    "image_size": "--image-size",
    "size": "--image-size",
    "mean": "--mean",
    "std": "--std",
    "normalize=False": "--no-normalize",
    "include_none": "--include-none",
    "include_none=True": "--include-none",
    "protocol": "--protocol",
    "batch_size": "--batch-size",
    "dtype": "--dtype",
    "device": "--device",
    "split": "--split",
    "transform": "a transform",
    "processor": "a processor returned by the --model factory",
    "preprocess": "a preprocess returned by the --model factory",
    "tokenizer": "a tokenizer returned by the --model factory",
    "pretrained": "--pretrained",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model`` and ``--pretrained`` (resolved before the config is built), ``--out`` and the
    settings :class:`~concept_grounding.bench.sub_job.SubConfig` declares."""
    parser.add_argument(
        "--model",
        required=True,
        action="append",
        help="saved model folder, file.py:factory, package.module:factory, or a CLIP name / path; "
        "repeat it to score several in one run (one report each under --out, and a summary "
        "table), or 'paper' for SUB Table 2's six open_clip models with their weights",
    )
    parser.add_argument(
        "--pretrained",
        default=None,
        help="open_clip weights tag for an architecture name (e.g. openai, laion2b_s34b_b79k), a "
        "weights file, or 'random' for random weights on purpose (an architecture without it "
        "is refused)",
    )
    add_out_argument(parser, help="report folder", default="reports/sub")
    settings.add_arguments(parser, SubConfig)


def _concept_names(text: str | None, index_base: str):
    """A named set as it is; a file's lines as CUB names, each error naming its line."""
    from concept_grounding.errors import UsageError, read_text_file
    from concept_grounding.evaluation.concepts import NAMED_SETS, resolve_concept_names

    if text is None or text in NAMED_SETS:
        return text
    path = Path(text)
    if not path.is_file():
        raise UsageError(f"{text!r} is not a named set ({', '.join(NAMED_SETS)}) or a file", argument="--concept-names")
    names = []
    for line, item in enumerate(read_text_file(path, "--concept-names").splitlines(), start=1):
        item = item.strip()
        if not item:
            continue
        try:
            names += resolve_concept_names([int(item) if item.isdigit() else item], index_base=index_base)
        except UsageError as err:
            raise UsageError(err.reason, argument="--concept-names", file=path, line=line, hint=err.hint) from None
    return names


def run(args: argparse.Namespace) -> int:
    from concept_grounding.errors import options_as_flags

    with options_as_flags(FLAGS):
        return _run(args)


def check_model(name: str, pretrained: str | None) -> ModelSpec:
    """First, before torch: a ``--model`` goes through the one resolver
    (:func:`concept_grounding.hub.resolve_model_spec`): a folder must exist, a factory's file or
    module too, a CLIP name must be loadable now and an open_clip architecture must name its
    weights (``--pretrained``). The :class:`~concept_grounding.hub.ModelSpec` goes on to
    :func:`~concept_grounding.evaluation.evaluate_sub`, which does not check it again."""
    from concept_grounding.hub import resolve_model_spec

    return resolve_model_spec(name, "--model", pretrained=pretrained, pretrained_argument="--pretrained")


def config_from_args(args: argparse.Namespace) -> SubConfig:
    """The job's configuration: every ``--model`` resolved first (:func:`check_model`; all of them
    before any is scored), then the ``--concept-names`` file read."""
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {args.batch_size}")
    models = tuple(
        ScoredModel(model, tag, check_model(model, tag)) for model, tag in expand_models(args.model, args.pretrained)
    )
    return settings.from_args(
        SubConfig, args, models=models, concept_names=_concept_names(args.concept_names, args.index_base)
    )


def _run(args: argparse.Namespace) -> int:
    from concept_grounding.evaluation.distributed import process_info

    result = JOB.run(config_from_args(args))
    report = result.save(args.out)
    if process_info().is_main:
        _print(result, args.out, report)
    return 0


def _print(result: SubResult, out: Path, report: Path) -> None:
    """Each model's headline (named when there are several) and the reports written."""
    several = len(result.evaluations) > 1
    for model, folder, e in zip(result.config.models, result.config.folders(), result.evaluations):
        print(
            f"{model.name + ': ' if several else ''}s+ {e.s_plus:.4f} (chance {e.chance_s_plus:.4f})  "
            f"s- {e.s_minus:.4f} (chance {e.chance_s_minus:.4f})  "
            f"{e.num_images} images, {e.images_per_second:.1f} images/s"
        )
        print(f"wrote {(out / folder if several else out) / 'report.md'}")
    if several:
        print(f"wrote {report}")
