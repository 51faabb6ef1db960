"""``concept-grounding``: the command line.

Each sub-command lives in ``concept_grounding.commands.<name>`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``. Command modules import their heavy
dependencies inside ``run`` so that ``--help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main", "build_parser"]

#: sub-command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "explain": ("concept_grounding.commands.explain", "CCI maps and overlays for images and texts (PNG report)"),
    "covar": ("concept_grounding.commands.covar", "build COVAR variants, evaluate a CLIP, diagnose BG/FG/fine errors"),
    "space": ("concept_grounding.commands.space", "launch the Gradio Space (TDG, SUB, CCI, concepts, metrics) locally"),
    "world": ("concept_grounding.commands.world", "render the bird world, export it, draw a contact sheet"),
    "bench": ("concept_grounding.commands.bench", "SUB Tables 1-2 and the CGIM / existence / location analysis"),
    "demo": ("concept_grounding.commands.demo", "run the main job on the bird world and write a report"),
    "generate": ("concept_grounding.commands.generate", "generate SUB-style TDG images as a resumable image folder"),
    "filter": ("concept_grounding.commands.filter", "VQA-filter generated images (keep the top 10 %% per pairing) and report"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="concept-grounding",
        description="Do interpretable vision models really see the concepts they claim?",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text.replace("%%", "%"))
        mod = importlib.import_module(module)
        mod.add_arguments(cmd)
        cmd.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
