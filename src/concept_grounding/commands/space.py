"""``concept-grounding space``: launch the Gradio Space locally.

Same app as ``spaces/concept-grounding/app.py``. Models come from ``--artifacts`` (the
folder ``make demo`` writes) or are built on first use of each tab. Visitors may only
load the models named here at launch (``--tdg-model``, ``--clip-model``) unless
``--allow-any-model`` is given; at most ``--model-cache`` of those stay loaded
(:mod:`concept_grounding.space.policy`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from concept_grounding.commands._types import int_at_least, positive_int
from concept_grounding.progress import log_lines


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model-policy flags, shared with ``spaces/concept-grounding/app.py``.

    Each defaults to its environment variable (:mod:`concept_grounding.space.policy`).
    """
    parser.add_argument(
        "--tdg-model",
        action="append",
        default=None,
        metavar="NAME",
        help="a Flux model (local folder or Hub id) visitors may pick in the Tied Diffusion tab; repeat for more "
        "(default: $CONCEPT_GROUNDING_TDG_MODEL, comma-separated)",
    )
    parser.add_argument(
        "--clip-model",
        action="append",
        default=None,
        metavar="NAME",
        help="a CLIP model (open_clip name, transformers id or local folder) visitors may pick in the Explain tab; "
        "repeat for more (default: $CONCEPT_GROUNDING_CLIP_MODELS, comma-separated)",
    )
    parser.add_argument(
        "--allow-any-model",
        action="store_true",
        default=None,
        help="let visitors load ANY local folder or Hub repo by name (default: only the listed models; "
        "or set CONCEPT_GROUNDING_ALLOW_ANY_MODEL=1)",
    )
    parser.add_argument(
        "--model-cache",
        type=positive_int,
        default=None,
        metavar="N",
        help="visitor-chosen models kept loaded at once; the least recently used is dropped "
        "(default: $CONCEPT_GROUNDING_MODEL_CACHE or 2)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (0.0.0.0 to expose it)")
    parser.add_argument("--port", type=int_at_least(0, 65535), default=7860, help="HTTP port (0: any free port)")
    parser.add_argument(
        "--artifacts",
        type=Path,
        default=None,
        help="folder of trained models (default: $CONCEPT_GROUNDING_ARTIFACTS or ./artifacts if present)",
    )
    add_model_arguments(parser)


def policy_from_args(args: argparse.Namespace):
    """The :class:`~concept_grounding.space.policy.ModelPolicy` of the parsed flags, with the
    environment variables filling what the flags leave unset.

    Raises:
        concept_grounding.errors.UsageError: an environment variable holds a bad value.
    """
    from dataclasses import replace

    from concept_grounding.errors import UsageError
    from concept_grounding.space.policy import CACHE_SIZE_ENV, ModelPolicy

    try:
        policy = ModelPolicy.from_env()
    except ValueError as err:
        raise UsageError(str(err), hint=f"unset {CACHE_SIZE_ENV} or use --model-cache") from None
    changes = {}
    if getattr(args, "tdg_model", None):
        changes["tdg_models"] = tuple(args.tdg_model)
    if getattr(args, "clip_model", None):
        changes["clip_models"] = tuple(args.clip_model)
    if getattr(args, "allow_any_model", None):
        changes["allow_any"] = True
    if getattr(args, "model_cache", None) is not None:
        changes["cache_size"] = args.model_cache
    return replace(policy, **changes)


def check_address(host: str, port: int) -> None:
    """Raise :class:`~concept_grounding.errors.UsageError` naming ``--host``/``--port`` when
    the server could not listen there (a port in use, an unknown interface), before the
    Space is built."""
    import socket

    from concept_grounding.errors import UsageError

    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
        try:
            probe.bind((host, port))
        except OSError as err:
            raise UsageError(
                f"cannot listen on {host}:{port} ({err.strerror or err})",
                argument="--host/--port",
                hint="pick a free port (0: any) or another interface",
            ) from None


def run(args: argparse.Namespace) -> int:
    import logging

    from concept_grounding.errors import UsageError
    from concept_grounding.space.env import configure_environment

    if args.artifacts is not None and not args.artifacts.is_dir():
        raise UsageError(
            f"{args.artifacts} is not a folder",
            argument="--artifacts",
            hint="give the folder `make demo` wrote (reports/demo/bench) or leave it out",
        )
    check_address(args.host, args.port)
    policy = policy_from_args(args)
    configure_environment()
    from concept_grounding.space import build_demo, launch

    with log_lines():
        if policy.allow_any:
            logging.getLogger(__name__).warning(
                "space: --allow-any-model: visitors can load any local folder or Hub repo"
            )
        launch(build_demo(artifacts=args.artifacts, policy=policy), host=args.host, port=args.port)
    return 0
