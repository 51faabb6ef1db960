"""Every command runs one job shape: config -> run -> result -> save (issue 32, item 2)."""

from __future__ import annotations

import dataclasses
import importlib
import typing

import pytest

from concept_grounding import settings
from concept_grounding.cli import COMMANDS, build_parser
from concept_grounding.jobs import Job, is_job_result

#: commands that serve an app rather than run a job
SERVERS = {"space"}
#: commands converted to the job shape (grows until it is every command but the servers)
JOB_COMMANDS = ["explain", "cci-bench"]


def _job(command: str) -> Job:
    return importlib.import_module(COMMANDS[command][0]).JOB


@pytest.mark.parametrize("command", JOB_COMMANDS)
def test_command_declares_its_job(command: str) -> None:
    job = _job(command)
    assert isinstance(job, Job) and job.name == command
    assert dataclasses.is_dataclass(job.config)
    result_type = typing.get_type_hints(job.run)["return"]
    assert is_job_result(result_type), f"{command}: {result_type.__name__}.save(out) is the job-result shape"


@pytest.mark.parametrize("command", JOB_COMMANDS)
def test_command_flags_are_its_configs_settings(command: str) -> None:
    """Each declared setting of the job's config is a flag of the command, with the config's default."""
    job = _job(command)
    sub = build_parser()._subparsers._group_actions[0].choices[command]  # noqa: SLF001 (argparse has no public way)
    by_dest = {a.dest: a for a in sub._actions}
    for s in settings.settings_of(job.config):
        if s.name in by_dest:
            default = next(f for f in dataclasses.fields(job.config) if f.name == s.name).default
            if default is not dataclasses.MISSING and by_dest[s.name].default is not None:
                expected = list(default) if isinstance(default, tuple) else default  # nargs: argparse keeps a list
                assert by_dest[s.name].default == expected or by_dest[s.name].default == str(default), s.name
    assert "out" in by_dest and by_dest["out"].required


def test_the_job_shape_is_checked_by_its_signature() -> None:
    class Saves:
        def save(self, out):  # noqa: ANN001
            return out

    class NeedsMore:
        def save(self, out, model):  # noqa: ANN001
            return out

    assert is_job_result(Saves) and not is_job_result(NeedsMore) and not is_job_result(int)
    with pytest.raises(TypeError, match="dataclass"):
        Job("x", int, lambda c: c)


def test_no_server_is_left_out_silently() -> None:
    assert SERVERS <= set(COMMANDS) and set(JOB_COMMANDS) <= set(COMMANDS) - SERVERS
