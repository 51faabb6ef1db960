"""``concept-grounding train-flux``: train the world Flux text-to-image pipeline (resumable).

Renders the bird world, fits an AutoencoderKL, trains word-level CLIP and T5 text encoders
jointly with a FluxTransformer2DModel (rectified flow) and saves a ``FluxPipeline`` folder
(float16 safetensors) with ``loss_curve.png``, ``samples.png`` and ``train_log.json``.
Re-running the same command with the same ``--work-dir`` resumes from the last checkpoint.
``--tiny`` trains a seconds-long smoke configuration. The job and its settings live in
:mod:`concept_grounding.worldflux.job` (``TrainFluxJobConfig``, ``run_train_flux``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from concept_grounding import settings
from concept_grounding.jobs import Job, add_job_arguments
from concept_grounding.worldflux.job import TrainFluxJobConfig, TrainFluxResult, run_train_flux

__all__ = ["JOB", "add_arguments", "run", "config_from_args"]

#: resumable: it writes checkpoints under ``--work-dir`` and the pipeline under ``--out`` as it goes
JOB = Job("train-flux", TrainFluxJobConfig, run_train_flux)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out``, the settings :class:`TrainFluxJobConfig` declares (how the job runs, the world),
    then those of its nested training config (``FluxTrainConfig``)."""
    add_job_arguments(parser, JOB, out_help="output pipeline folder")


def config_from_args(args: argparse.Namespace) -> TrainFluxJobConfig:
    """The job's configuration from the parsed arguments, in one parse (``.training_config()`` is
    what trains); the nested training settings are checked on the world they train on."""
    return settings.from_args(TrainFluxJobConfig, args, out=args.out)


def run(args: argparse.Namespace) -> int:
    JOB(config_from_args(args), args.out, report=_print)
    return 0


def _print(result: TrainFluxResult, path: Path) -> None:
    """The training summary (JSON) and the pipeline folder written."""
    print(json.dumps(result.summary(), indent=1))
    print(f"wrote {result.out}")
