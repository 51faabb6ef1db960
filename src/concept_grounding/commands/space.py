"""``concept-grounding space``: launch the Gradio Space locally.

Same app as ``spaces/concept-grounding/app.py``. Models come from ``--artifacts`` (the
folder ``make demo`` writes) or are built on first use of each tab.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (0.0.0.0 to expose it)")
    parser.add_argument("--port", type=int, default=7860, help="HTTP port")
    parser.add_argument(
        "--artifacts", type=Path, default=None,
        help="folder of trained models (default: $CONCEPT_GROUNDING_ARTIFACTS or ./artifacts if present)",
    )


def run(args: argparse.Namespace) -> int:
    import logging

    from concept_grounding.space.env import configure_environment

    configure_environment()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from concept_grounding.space import build_demo, launch

    if args.artifacts is not None and not args.artifacts.is_dir():
        raise SystemExit(f"--artifacts: {args.artifacts} is not a folder")
    launch(build_demo(artifacts=args.artifacts), host=args.host, port=args.port)
    return 0
