"""``concept-grounding``: the command line.

Each sub-command lives in ``concept_grounding.commands.<name>`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``. Command modules import their heavy
dependencies inside ``run`` so that ``--help`` stays instant.

Errors. :func:`main` is the one error boundary:

* bad values are refused at parse time by the ``type=`` validators of
  :mod:`concept_grounding.commands._types` (``positive_int``, ``unit_interval``,
  ``multiple_of(16)``, ``class_name``, ...): usage line, then
  ``concept-grounding: error: <command>: argument --x: <what is accepted>``, exit 2;
* expected errors raised while running (see :func:`concept_grounding.errors.user_message`:
  :class:`~concept_grounding.errors.UsageError`, the loaders' format errors, missing or
  unreadable files, a full disk or a permission error while writing (named by the file, or
  by the command's ``--out``), ``ValueError`` from validation, models that cannot be loaded) print
  ``concept-grounding: error: <message>`` and exit 2;
* anything else is a bug: one line ``concept-grounding: internal error: ...`` with
  "rerun with --debug", exit 1.

``--debug`` (before or after the command) or ``CONCEPT_GROUNDING_DEBUG=1`` prints the
traceback as well.

How to raise a user error in a new command: validate arguments with ``type=`` from
``commands/_types.py`` where you can, and raise
``concept_grounding.errors.UsageError("what is wrong", argument="--x", hint="what to do")``
(or ``file=path, line=n``) before any expensive work; never ``print`` and ``return 2``,
never ``sys.exit`` from ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
import warnings

__all__ = ["main", "build_parser", "dispatch", "PROG", "DEBUG_ENV"]

PROG = "concept-grounding"
#: environment variable that turns on tracebacks (like ``--debug``)
DEBUG_ENV = "CONCEPT_GROUNDING_DEBUG"

#: sub-command -> (module, one-line help), grouped by task as :data:`GROUPS` (the order ``--help`` lists)
COMMANDS: dict[str, tuple[str, str]] = {
    # start here
    "demo": ("concept_grounding.commands.demo", "run the main job on the bird world and write a report"),
    "world": ("concept_grounding.commands.world", "render the bird world, export it, draw a contact sheet"),
    "bench": ("concept_grounding.commands.bench", "SUB Tables 1-2 and the CGIM / existence / location analysis"),
    "space": ("concept_grounding.commands.space", "launch the Gradio Space (TDG, SUB, CCI, concepts, metrics) locally"),
    # check a CLIP (CCI)
    "explain": ("concept_grounding.commands.explain", "CCI maps and overlays for images and texts (PNG report)"),
    "cci-bench": (
        "concept_grounding.commands.cci_bench",
        "CCI Tables 1-2: deletion / insertion of CCI and baselines across CLIPs",
    ),
    "covar": ("concept_grounding.commands.covar", "build COVAR variants, evaluate a CLIP, diagnose BG/FG/fine errors"),
    "diagnose": (
        "concept_grounding.commands.diagnose",
        "BG-Er / Fine-Er / FG-Er of a CLIP's errors on an image folder (CounterAnimals too)",
    ),
    # make your own SUB
    "candidates": (
        "concept_grounding.commands.candidates",
        "SUB candidate selection: classes, attributes (VQA accuracy over thresholds), the pairings plan",
    ),
    "generate": ("concept_grounding.commands.generate", "generate SUB-style TDG images as a resumable image folder"),
    "filter": (
        "concept_grounding.commands.filter",
        "VQA-filter generated images (keep the top 10 %% per pairing) and report",
    ),
    "annotate": (
        "concept_grounding.commands.annotate",
        "SUB's human studies (App. E): a Gradio app over a SQLite store, or simulated annotators",
    ),
    "curate": (
        "concept_grounding.commands.curate",
        "SUB's curation by human answers: scores, discard rules, alpha, Figs. 6/9, the dataset",
    ),
    # score your own model
    "sub": (
        "concept_grounding.commands.sub",
        "SUB s+ / s- of your own model (concept model, CLIP, saved folder) with report",
    ),
    "analyse": (
        "concept_grounding.commands.analyse",
        "Aysel et al.'s tables (CGIM, existence, location, sweep) of a post-hoc CBM",
    ),
    # concept learners (ConceptBed)
    "learn": (
        "concept_grounding.commands.learn",
        "learn a concept V* from a few images: Textual Inversion, DreamBooth, LoRA, Custom Diffusion on a Flux",
    ),
    "conceptbed": (
        "concept_grounding.commands.conceptbed",
        "ConceptBed Tables 1, 2, 7, 8: concept learners on held-out species, attributes, styles, compositions",
    ),
    # models and the Hub
    "train-flux": (
        "concept_grounding.commands.train_flux",
        "train the world Flux text-to-image pipeline on bird-world renders",
    ),
    "photos": (
        "concept_grounding.commands.photos",
        "real animal cut-outs (Debian's Tux Paint stamps) on real backgrounds with exact masks, easy / hard",
    ),
    "publish": (
        "concept_grounding.commands.publish",
        "build every Hub repo (datasets, metric Spaces, pipeline, models, Space) offline; --push uploads",
    ),
}
#: the tasks ``--help`` lists under the commands: (title, commands)
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("start here", ("demo", "world", "bench", "space")),
    ("check a CLIP (CCI)", ("explain", "cci-bench", "covar", "diagnose")),
    ("make your own SUB", ("candidates", "generate", "filter", "annotate", "curate")),
    ("score your own model", ("sub", "analyse")),
    ("concept learners (ConceptBed)", ("learn", "conceptbed")),
    ("models and the Hub", ("train-flux", "publish")),
)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse help in which every optional option that takes a value shows its default:
    `` (default: X)`` is appended unless the help text already names the default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            not action.option_strings
            or action.nargs == 0
            or action.required
            or action.default is argparse.SUPPRESS
            or "default" in text
        ):
            return text
        return f"{text} (default: {'none' if action.default is None else '%(default)s'})"


class _TopHelpFormatter(_HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """The top-level help: the epilog's lines (the commands by task) kept as written."""


class _Parser(argparse.ArgumentParser):
    """argparse with the project's error line, and nothing before it:
    ``concept-grounding: error: <command>: <message> (see concept-grounding <command> --help)``."""

    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog[len(PROG) :].strip()
        hint = f" (see {self.prog} --help)"
        self.exit(2, f"{PROG}: error: {command + ': ' if command else ''}{message}{hint}\n")


def _add_debug(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help=f"show the Python traceback of an error (or set {DEBUG_ENV}=1)",
    )


def build_parser() -> argparse.ArgumentParser:
    epilog = "commands by task:\n" + "\n".join(f"  {title}: {', '.join(names)}" for title, names in GROUPS)
    parser = _Parser(
        prog=PROG,
        description="Do interpretable vision models really see the concepts they claim?",
        formatter_class=_TopHelpFormatter,
        epilog=epilog,
    )
    _add_debug(parser, False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_text) in COMMANDS.items():
        cmd = sub.add_parser(
            name, help=help_text, description=help_text.replace("%%", "%"), formatter_class=_HelpFormatter
        )
        mod = importlib.import_module(module)
        mod.add_arguments(cmd)
        _add_debug(cmd, argparse.SUPPRESS)  # SUPPRESS: a sub-command default must not reset a top-level --debug
        cmd.set_defaults(_run=mod.run)
    return parser


def dispatch(argv: list[str]) -> int:
    """Parse ``argv`` and run the command with no error boundary (exceptions propagate);
    for commands that run other commands in-process (``demo``)."""
    args = build_parser().parse_args(argv)
    _require_extra(args.command)
    return int(args._run(args) or 0)


def _require_extra(command: str) -> None:
    """Stop with one line naming the extra to install when ``command`` needs one that is missing."""
    from .extras import COMMAND_EXTRAS, require_extra

    require_extra(COMMAND_EXTRAS.get(command), f"concept-grounding {command}")


def _debug_requested(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "debug", False)) or os.environ.get(DEBUG_ENV, "").strip().lower() in (
        "1",
        "true",
        "yes",
        "on",
    )


def _show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file=None, line: str | None = None
) -> None:
    """A warning as one line, ``concept-grounding: warning: <message>``: no source path or line
    (``--debug`` shows Python's own form)."""
    print(f"{PROG}: warning: {' '.join(str(message).split())[:500]}", file=sys.stderr)


def _flags_of(args: argparse.Namespace):
    """Messages that name a loader's ``root`` name ``--cub-root`` in a command that has it
    (:func:`concept_grounding.errors.options_as_flags`)."""
    from contextlib import nullcontext

    from .errors import options_as_flags

    return options_as_flags({"root": "--cub-root"}) if hasattr(args, "cub_root") else nullcontext()


def _print_next(args: argparse.Namespace) -> None:
    """The next command of the chain, with the folder the command just wrote (:mod:`concept_grounding.next_step`)."""
    from .next_step import next_line

    line = next_line(args)
    if line is not None:
        print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 user error, 1 bug, 130 interrupted). Progress bars
    written to a log rather than a terminal redraw once a minute
    (:func:`~concept_grounding.progress.quiet_off_terminal`)."""
    from .progress import quiet_off_terminal

    with quiet_off_terminal():
        return _main(argv)


def _main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        with warnings.catch_warnings():  # a deprecated spelling warns in one line (settings.add_option)
            warnings.showwarning = _show_warning
            args = build_parser().parse_args(argv)
    except SystemExit as done:  # --help, or a usage error argparse already printed
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 2)
    from .cpu import configure_threads
    from .errors import internal_summary, user_message

    debug = _debug_requested(args)

    try:
        _require_extra(args.command)
        configure_threads()  # before a command imports torch: threads sized to the free cores, idle ones asleep
        with _flags_of(args), warnings.catch_warnings():
            if not debug:
                warnings.showwarning = _show_warning
            status = int(args._run(args) or 0)
        if status == 0:
            _print_next(args)
        return status
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - this is the error boundary
        if debug:
            traceback.print_exc()
        message = user_message(exc, target=getattr(args, "out", None))
        if message is not None:
            print(f"{PROG}: error: {message}", file=sys.stderr)
            return 2
        print(
            f"{PROG}: internal error: {internal_summary(exc)}"
            + ("" if debug else " (a bug: rerun with --debug for the traceback and report it)"),
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
