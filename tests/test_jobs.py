"""Every command runs one job shape: config -> run -> result -> save (docs/guide/development.md, ``jobs``)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import typing
from pathlib import Path

import pytest

from concept_grounding import settings
from concept_grounding.cli import COMMANDS, build_parser
from concept_grounding.jobs import Job, is_job_result

#: commands that are not a config -> run -> result -> save job, and why
NOT_JOBS = {
    "space": "serves the Gradio Space",
    "annotate": "serves the annotation app, or writes simulated answers into its SQLite store as they come (no report)",
}
#: every other command runs a job
JOB_COMMANDS = sorted(set(COMMANDS) - set(NOT_JOBS))
#: commands whose --out has always had a default (reports/<command>)
OUT_DEFAULTS = {"diagnose", "sub", "analyse", "bench", "candidates", "demo", "cci-bench"}


def _job(command: str) -> Job:
    return importlib.import_module(COMMANDS[command][0]).JOB


@pytest.mark.parametrize("command", JOB_COMMANDS)
def test_command_declares_its_job(command: str) -> None:
    job = _job(command)
    assert isinstance(job, Job) and job.name == command
    assert dataclasses.is_dataclass(job.config)
    result_type = typing.get_type_hints(job.run)["return"]
    assert is_job_result(result_type), f"{command}: {result_type.__name__}.save(out) is the job-result shape"


def _step_parsers(parser):
    """A command's parser, or each step's of a command with steps (``candidates classes``)."""
    steps = [a for a in parser._actions if a.dest == "step" and getattr(a, "choices", None)]
    return list(steps[0].choices.values()) if steps else [parser]


@pytest.mark.parametrize("command", JOB_COMMANDS)
def test_command_flags_are_its_configs_settings(command: str) -> None:
    """Each declared setting of the job's config is a flag of the command, with the config's
    default (a ``None`` default is the command's or step's to choose); ``--out`` is required
    or has a default."""
    job = _job(command)
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    for parser in _step_parsers(sub):
        by_dest: dict = {}
        for action in parser._actions:
            by_dest.setdefault(action.dest, action)
        for s in settings.settings_of(job.config):
            if s.name in by_dest:
                default = next(f for f in dataclasses.fields(job.config) if f.name == s.name).default
                parsed = by_dest[s.name].default
                if isinstance(default, tuple):
                    default = list(default)  # nargs settings: argparse's default is the list it would parse
                if isinstance(parsed, tuple):
                    parsed = list(parsed)
                if default not in (dataclasses.MISSING, None) and parsed is not None:
                    assert parsed == default or parsed == str(default), s.name
        assert "out" in by_dest and by_dest["out"].required != (command in OUT_DEFAULTS)


def test_the_job_shape_is_checked_by_its_signature() -> None:
    class Saves:
        def save(self, out):
            return out

    class NeedsMore:
        def save(self, out, model):
            return out

    assert is_job_result(Saves) and not is_job_result(NeedsMore) and not is_job_result(int)
    with pytest.raises(TypeError, match="dataclass"):
        Job("x", int, lambda c: c)


def test_a_job_saves_its_result_then_hands_it_to_report(tmp_path: Path) -> None:
    @dataclasses.dataclass(frozen=True)
    class Config:
        n: int = settings.setting(2, "how many")

    @dataclasses.dataclass(frozen=True)
    class Result:
        total: int

        def save(self, out):
            path = Path(out) / "total.txt"
            path.write_text(str(self.total))
            return path

    reported = []
    path = Job("count", Config, lambda c: Result(c.n * 10))(
        Config(n=3), tmp_path, report=lambda r, p: reported.append((r, p.read_text()))
    )
    assert path == tmp_path / "total.txt" and reported == [(Result(30), "30")]


def test_every_command_runs_a_job_or_says_why_not() -> None:
    assert set(NOT_JOBS) <= set(COMMANDS) and len(JOB_COMMANDS) == len(COMMANDS) - len(NOT_JOBS) == 18


#: the smallest command line of each job command that gets as far as its job (``{t}``: a scratch folder holding
#: an empty folder ``dir`` and a file ``f.txt``)
SMALLEST_ARGV = {
    "demo": [],
    "world": [],
    "bench": [],
    "explain": [],
    "cci-bench": [],
    "covar": [],
    "diagnose": ["--images", "{t}/dir"],
    "candidates": ["classes"],
    "generate": ["--tiny"],
    "filter": ["--in", "{t}/dir", "--scorer", "tiny-clip"],
    "curate": ["--candidates", "{t}/dir", "--annotations", "{t}/f.txt"],
    "sub": ["--model", "{t}/dir"],
    "analyse": [],
    "learn": ["--method", "lora", "--images", "{t}/dir"],
    "conceptbed": [],
    "train-flux": ["--work-dir", "{t}/w"],
    "photos": [],
    "publish": ["--namespace", "someone"],
}


class _Reached(Exception):
    """Raised by the recording ``Job.__call__`` so that no job runs."""


def test_every_job_command_has_a_smallest_command_line() -> None:
    assert sorted(SMALLEST_ARGV) == JOB_COMMANDS


@pytest.mark.parametrize("command", JOB_COMMANDS)
def test_command_runs_its_job_through_job_call(command: str, tmp_path: Path, monkeypatch) -> None:
    """The command reaches ``JOB(config, out)`` with a config of its job's type and its ``--out``."""
    calls = []

    def record(self, config, out, *, report=None):
        calls.append((self, config, out, report))
        raise _Reached

    monkeypatch.setattr(Job, "__call__", record)
    (tmp_path / "dir").mkdir()
    (tmp_path / "f.txt").write_text("x\n")
    out = tmp_path / "out"
    argv = [command, *(a.format(t=tmp_path) for a in SMALLEST_ARGV[command]), "--out", str(out)]
    args = build_parser().parse_args(argv)
    with pytest.raises(_Reached):
        args._run(args)
    ((job, config, given_out, _),) = calls
    assert job is _job(command) and isinstance(config, job.config) and Path(given_out) == out


def _calls(tree: ast.AST) -> list[str]:
    """The callee of every call in ``tree``, as written (``JOB``, ``JOB.run``, ``result.save``, ``run_x``)."""
    return [ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)]


@pytest.mark.parametrize("command", JOB_COMMANDS)
def test_command_module_never_runs_or_saves_by_hand(command: str) -> None:
    """No side road: a job command calls neither a ``run_*`` function, ``JOB.run`` nor a ``.save``."""
    module = importlib.import_module(COMMANDS[command][0])
    called = _calls(ast.parse(inspect.getsource(module)))
    by_hand = [c for c in called if c.split(".")[-1] == "save" or c.split(".")[-1].startswith("run_") or c == "JOB.run"]
    assert not by_hand and "JOB" in called, f"{command}: {by_hand}"


def test_the_side_road_check_sees_a_side_road() -> None:
    side_road = ast.parse("def run(args):\n    result = run_x(config)\n    result.save(args.out)\n")
    assert _calls(side_road) == ["run_x", "result.save"]
