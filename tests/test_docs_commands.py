"""Every shell block of the README and of the guide (``docs/guide/*.md``) is tested, so a guide cannot drift.

How each block is tested is declared by an HTML comment on the line before it (docs/guide/development.md,
"How a guide's commands are tested"):

* ``<!-- test: FLAGS -->``: each ``concept-grounding`` line of the block runs for real, in order, in one
  temporary folder, with ``FLAGS`` appended (later flags win, so ``FLAGS`` shrinks the run);
  ``<!-- test: photos: --per-stamp 1; candidates plan: --images-per-pairing 1 -->`` gives each command
  (or command and step) its own;
* ``<!-- no-run: why -->``: not run (it needs a GPU, the network, the reader's own data or minutes).

Every ``concept-grounding`` line of every block, marked either way, is also checked offline: parsed by the
command line's real parser, each path it names standing in as an empty folder or file (a PNG for an image),
then carried through the command's own checks up to the config its job would run (:func:`config_of`: the
settings, their validators and the model resolver; the job itself does not run), so a renamed flag, a removed
choice, a bad value or a model name that does not resolve fails here. Only a model this machine lacks (the
reader's file, a Hub model not in the cache) may stop a line before its config.
"""

from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
PROGRAM = "concept-grounding"
_BLOCK = re.compile(r"(?:<!-- (test|no-run):([^\n]*?)-->\n)?```(?:bash|console|sh|shell)\n(.*?)```", flags=re.S)


@dataclass(frozen=True)
class ShellBlock:
    """One shell block of a page: its command lines and its mark (``"test"``, ``"no-run"`` or ``""``)."""

    page: str
    index: int
    mark: str
    note: str
    lines: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.page} block {self.index}"

    def test_flags(self, argv: list[str]) -> list[str]:
        """The flags the ``test:`` mark appends to the line ``argv`` (after ``concept-grounding``): ``FLAGS`` for
        every line, or ``COMMAND [STEP]: FLAGS; ...``, the longest command that starts ``argv`` winning."""
        flags: dict[tuple[str, ...], str] = {}
        for part in filter(None, (p.strip() for p in self.note.split(";"))):
            name, colon, rest = part.partition(":")
            flags.update({tuple(name.split()): rest} if colon and not name.strip().startswith("-") else {(): part})
        fits = [key for key in flags if tuple(argv[: len(key)]) == key]
        return shlex.split(flags[max(fits, key=len)]) if fits else []


def command_lines(block: str) -> tuple[str, ...]:
    """A block's command lines: continuations joined, comments and a ``$`` prompt stripped."""
    lines = (" ".join(re.sub(r"(^|\s+)#.*$", "", line).split()) for line in block.replace("\\\n", " ").splitlines())
    return tuple(line.removeprefix("$ ") for line in lines if line)


def shell_blocks(page: Path) -> list[ShellBlock]:
    """The shell blocks of ``page`` in order, each with its mark."""
    name = page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else page.name
    return [
        ShellBlock(name, i, mark, note.strip(), command_lines(body))
        for i, (mark, note, body) in enumerate(_BLOCK.findall(page.read_text(encoding="utf-8")))
    ]


BLOCKS = [block for page in PAGES for block in shell_blocks(page)]


def cli_argv(line: str) -> list[str] | None:
    """The arguments after ``concept-grounding`` (or ``-m concept_grounding.cli``) of ``line``; ``None`` if it
    runs something else."""
    argv = shlex.split(line)
    if argv[:1] == [PROGRAM]:
        return argv[1:]
    module = [i for i, word in enumerate(argv[1:], 1) if word == "concept_grounding.cli" and argv[i - 1] == "-m"]
    return argv[module[0] + 1 :] if module else None


def _subparser(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The (sub-)parser that reads the options of ``argv`` (``candidates STEP`` has two levels)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            word = next((a for a in argv if not a.startswith("-")), None)
            if word in action.choices:
                return _subparser(action.choices[word], argv[argv.index(word) + 1 :])
    return parser


def stand_in_paths(argv: list[str], where: Path) -> None:
    """Create under ``where`` each path ``argv`` gives to an option that must name an existing folder or file."""
    from concept_grounding.cli import build_parser
    from concept_grounding.validators import existing_dir, existing_file

    parser = _subparser(build_parser(), argv)
    kinds = {o: a.type for a in parser._actions for o in a.option_strings if a.type in (existing_dir, existing_file)}
    option = None
    for word in argv:
        if word.startswith("-"):
            option = word
            continue
        if option in kinds:
            path = where / word
            if kinds[option] is existing_dir:
                path.mkdir(parents=True, exist_ok=True)
            elif not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("")
                if path.suffix.lower() in (".png", ".jpg", ".jpeg"):
                    from PIL import Image

                    Image.new("RGB", (32, 32)).save(path, format="PNG")


class JobNotRun(Exception):
    """Raised in place of a job's run: the command built its config (``args[0]``)."""


def config_of(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> object:
    """The config the command of ``argv`` builds, its checks and models resolved, with its job replaced by a
    stop (``None`` for ``space`` and ``annotate``, which run no job)."""
    import dataclasses
    import importlib

    from concept_grounding.cli import build_parser

    def stop(config: object, *args: object) -> None:
        raise JobNotRun(config)

    args = build_parser().parse_args(argv)
    module = importlib.import_module(f"concept_grounding.commands.{argv[0].replace('-', '_')}")
    job = getattr(module, "JOB", None)
    if job is None:
        return None
    function = job.run.__name__
    monkeypatch.setattr(module, "JOB", dataclasses.replace(job, run=stop))
    if hasattr(module, function):  # a command that calls its job's function by name
        monkeypatch.setattr(module, function, stop)
    with pytest.raises(JobNotRun) as stopped:
        args._run(args)
    return stopped.value.args[0]


def test_every_shell_block_is_run_or_says_why_not():
    assert len(BLOCKS) >= 20, "the extractor lost the guide's shell blocks"
    unmarked = [b.id for b in BLOCKS if not b.mark]
    assert not unmarked, f"mark each with <!-- test: FLAGS --> or <!-- no-run: why -->: {unmarked}"
    assert all(b.note for b in BLOCKS if b.mark == "no-run"), "a no-run mark needs its reason"
    assert [b for b in BLOCKS if b.mark == "test"], "no block of the guide runs"


def lacks_model(message: str) -> bool:
    """Whether ``message`` says this machine lacks a model the line names (a file or folder of the reader's, an
    ``org/name`` Hub id not cached): the only reason a line may stop before its config."""
    absent = re.search(r"(?:model|dataset) '([^']+)' is not in the local Hugging Face cache", message)
    return bool(absent and "/" in absent.group(1)) or "no such file" in message or "no such folder" in message


@pytest.fixture
def offline(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.id)
def test_every_command_line_reaches_its_config(block, tmp_path, monkeypatch, offline):
    """The floor for every block: each ``concept-grounding`` line parses and passes its command's checks."""
    from concept_grounding.cli import build_parser
    from concept_grounding.errors import ModelUnavailableError

    monkeypatch.chdir(tmp_path)
    for line in block.lines:
        argv = cli_argv(line)
        if argv is None:
            continue
        stand_in_paths(argv, tmp_path)
        try:
            build_parser().parse_args(argv)
        except SystemExit as err:
            raise AssertionError(f"{block.id}: {line!r} does not parse (exit {err.code})") from None
        try:
            config_of(argv, monkeypatch)
        except ModelUnavailableError as err:
            lacking = str(err)
        else:
            lacking = ""
        assert not lacking or lacks_model(lacking), f"{block.id}: {line!r}: {lacking}"


def _stamps_missing() -> str:
    from concept_grounding.photos.stamps import stamps_dir

    return "" if (stamps_dir() / "COMPLETE").is_file() else "Tux Paint's stamps are not in the cache (network needed)"


#: what a command needs that a test machine may lack: command -> () -> the reason to skip ("" when present)
PREREQUISITES = {"photos": _stamps_missing}


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.mark == "test"], ids=lambda b: b.id)
def test_the_runnable_blocks_run_at_a_small_size(block, tmp_path, monkeypatch):
    from concept_grounding.cli import main

    monkeypatch.chdir(tmp_path)
    lines = [argv for argv in map(cli_argv, block.lines) if argv is not None]
    assert lines, f"{block.id} is marked test: but runs no {PROGRAM} line"
    for argv in lines:
        missing = PREREQUISITES.get(argv[0], lambda: "")()
        if missing:
            pytest.skip(f"{block.id}: {missing}")
    for argv in lines:
        flags = block.test_flags(argv)
        assert main([*argv, *flags]) == 0, f"{block.id}: {shlex.join([*argv, *flags])}"


def test_the_extractor_reads_marks_continuations_and_comments(tmp_path):
    import dataclasses

    page = tmp_path / "page.md"
    page.write_text(
        "<!-- test: --steps 1 -->\n```bash\nconcept-grounding world \\\n  --n 2   # two\n```\n\n"
        "```sh\n$ make demo\n```\n"
    )
    first, second = shell_blocks(page)
    assert (first.mark, first.note, first.lines) == ("test", "--steps 1", ("concept-grounding world --n 2",))
    assert (second.mark, second.lines) == ("", ("make demo",))
    assert first.test_flags(["world", "--n", "2"]) == ["--steps", "1"]
    each = dataclasses.replace(first, note="photos: --per-stamp 1; candidates: --per-class 2; candidates plan: --x 1")
    assert each.test_flags(["photos"]) == ["--per-stamp", "1"] and each.test_flags(["covar"]) == []
    assert each.test_flags(["candidates", "classes"]) == ["--per-class", "2"]
    assert each.test_flags(["candidates", "plan", "--out", "o"]) == ["--x", "1"]
    assert cli_argv("accelerate launch -m concept_grounding.cli learn --out x") == ["learn", "--out", "x"]
    assert cli_argv("pip install concept-grounding") is None
    assert cli_argv("make demo") is None
