"""What to run next: every command ends by printing the next command of its chain with the folder it just wrote.

The chains are the manual's (docs/guide/): the bird world and the bench (``world`` -> ``bench`` -> ``sub`` /
``explain``), SUB's candidate selection (``candidates classes`` -> ``attributes`` -> ``plan`` ->
``generate`` -> ``filter``), the human half (``filter`` -> ``annotate`` -> ``curate`` -> ``sub`` /
``bench --sub``) and checking a CLIP (``explain`` / ``cci-bench`` / ``diagnose`` / ``covar``, whose
next step is reading their report). :func:`next_line` gives the line :func:`concept_grounding.cli.main`
prints after a command succeeds; the program is spelled as the user can type it (:func:`program`).

>>> import argparse
>>> from pathlib import Path
>>> next_line(argparse.Namespace(command="generate", out=Path("gen")), "concept-grounding")
'next: concept-grounding filter --in gen --out gen-kept --scorer world-judge'
>>> next_line(argparse.Namespace(command="explain", out=Path("reports/explain")), "concept-grounding")
'next: open reports/explain/report.md'
>>> next_line(argparse.Namespace(command="annotate", candidates=Path("kept"), db="kept.db", simulate=(1.0,)), "cg")
'next: cg curate --candidates kept --annotations kept.db --out kept-curated'
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["next_line", "program", "NEXT"]

PROG = "concept-grounding"


def program() -> str:
    """``concept-grounding`` when that is what the shell finds, else the path of the script that is running (a
    ``.venv/bin/concept-grounding`` run without activating the virtual environment); ``python -m`` runs and tests
    get the plain name."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is None or script.name != PROG:
        return PROG
    found = shutil.which(PROG)
    return PROG if found and Path(found).resolve() == script.resolve() else str(script)


def _q(path: object) -> str:
    return shlex.quote(str(path))


def _sibling(out: Path, suffix: str) -> str:
    """A folder beside ``out`` for the next step's output (``gen`` -> ``gen-kept``)."""
    return _q(out.with_name(out.name + suffix))


def _report(args: argparse.Namespace) -> str:
    return f"open {_q(Path(args.out) / 'report.md')}"


def _candidates(args: argparse.Namespace) -> str:
    out = Path(args.out)
    if args.step == "classes":
        return f"{{prog}} candidates attributes --out {_q(out)}"
    if args.step == "attributes":
        return (
            f"{{prog}} candidates plan --classes-file {_q(out / 'classes.json')} --attributes-file "
            f"{_q(out / 'attributes.json')} --images-per-pairing 10 --out {_q(out)}"
        )
    return f"{{prog}} generate --pairings {_q(out / 'pairings.jsonl')} --out {_sibling(out, '-gen')}"


def _annotate(args: argparse.Namespace) -> str:
    if getattr(args, "simulate", None) or getattr(args, "status", False) or getattr(args, "export", None):
        curated = _q(Path(args.candidates).with_name(Path(args.candidates).name + "-curated"))
        truth = f" --truth {_q(args.truth)}" if getattr(args, "truth", None) else ""
        return f"{{prog}} curate --candidates {_q(args.candidates)} --annotations {_q(args.db)} --out {curated}{truth}"
    return f"{{prog}} annotate --candidates {_q(args.candidates)} --db {_q(args.db)} --status"


def _filter(args: argparse.Namespace) -> str:
    """Annotate what was kept; when nothing was, the sheet to read and the generated folder to annotate instead."""
    out = Path(args.out)
    if getattr(args, "input", None) is None:
        return _report(args)
    kept = out / "metadata.jsonl"
    if kept.is_file() and not kept.read_text().strip():
        return (
            f"open {_q(out / 'filter_sheet.png')}   # nothing kept: generate more images per pairing, or annotate "
            f"all of them: {{prog}} annotate --candidates {_q(args.input)} --db {_sibling(out, '-annotations.db')}"
        )
    return f"{{prog}} annotate --candidates {_q(out)} --db {_sibling(out, '-annotations.db')}"


def _world(args: argparse.Namespace) -> str:
    out = Path(args.out)
    if getattr(args, "format", "hf") == "all":
        return (
            f"{{prog}} bench --cub-root {_q(out / 'CUB_200_2011')} --sub {_q(out / 'SUB')} --out "
            f"{_sibling(out, '-bench')}   # Tables 1-2 on the exported folders, as on real CUB and SUB"
        )
    return f"{{prog}} bench --out {_sibling(out, '-bench')}   # or world --format all, for CUB and SUB folders"


#: command -> the next command (``{prog}`` stands for the program) or what to read, from its arguments
NEXT: dict[str, Callable[[argparse.Namespace], str]] = {
    "world": _world,
    "bench": lambda a: (
        f"{{prog}} sub --model {_q(Path(a.out) / 'models' / 'cbm-ind-per-img')}"
        + (f" --sub {_q(a.sub)}" if getattr(a, "sub", None) and not getattr(a, "cub_root", None) else "")
        + f" --out {_sibling(Path(a.out), '-sub')}   # or explain --model "
        f"{_q(Path(a.out) / 'models' / 'world-clip')} --out {_sibling(Path(a.out), '-explain')}"
    ),
    "candidates": _candidates,
    "generate": lambda a: (
        f"{{prog}} filter --in {_q(a.out)} --out {_sibling(Path(a.out), '-kept')} --scorer world-judge"
    ),
    "filter": _filter,
    "annotate": _annotate,
    "curate": lambda a: (
        f"{{prog}} bench --sub {_q(Path(a.out) / 'dataset')} --out {_sibling(Path(a.out), '-bench')}"
        f"   # or sub --model <your model> --sub {_q(Path(a.out) / 'dataset')}"
    ),
    "sub": _report,
    "analyse": _report,
    "explain": _report,
    "covar": _report,
    "cci-bench": _report,
    "diagnose": _report,
    "demo": lambda a: (
        f"{{prog}} space --artifacts {_q(Path(a.out) / 'bench')}   # the Gradio Space on the demo's models"
    ),
    "train-flux": lambda a: f"{{prog}} generate --model {_q(a.out)} --out {_sibling(Path(a.out), '-gen')}",
}


#: commands whose folders are other arguments than ``--out`` (annotate: ``--candidates`` and ``--db``)
WITHOUT_OUT = frozenset({"annotate"})


def next_line(args: argparse.Namespace, prog: str | None = None) -> str | None:
    """``next: <command>`` for the command ``args`` ran (``None`` for commands without a chain, or without
    ``--out``)."""
    command = getattr(args, "command", "")
    step = NEXT.get(command)
    if step is None or (command not in WITHOUT_OUT and getattr(args, "out", None) is None):
        return None
    if command == "annotate" and getattr(args, "candidates", None) is None:
        return None
    return "next: " + step(args).replace("{prog}", prog or program())
