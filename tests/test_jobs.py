"""Every command runs one job shape: config -> run -> result -> save."""

from __future__ import annotations

import dataclasses
import importlib
import typing

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


def test_every_command_runs_a_job_or_says_why_not() -> None:
    assert set(NOT_JOBS) <= set(COMMANDS) and len(JOB_COMMANDS) == len(COMMANDS) - len(NOT_JOBS) == 18
