"""One job shape for every command: config -> run -> result -> save.

Every ``concept-grounding`` command that computes something runs a :class:`Job`:

1. a **config**: a frozen dataclass whose user-facing fields are declared once with
   :func:`concept_grounding.settings.setting` (flags, help, validators, manifest keys are
   derived from it); options of what gets written (``save_dataset``, ``scores``) are settings
   of the config too, so ``save`` takes nothing but the folder;
2. **run**: ``run(config) -> result``. It validates cheap things first, then computes. A job
   that must not lose work when interrupted (``generate``, ``world``, ``bench``,
   ``train-flux``) writes as it goes under the ``out`` its config carries; every other job
   writes nothing;
3. a **result** that carries its config and everything the report needs;
4. **save**: ``result.save(out) -> Path`` writes the report files (``report.md``, the JSON
   results, figures) under ``out`` and returns the path of the main one. Saving twice writes
   the same bytes.

A command module is then a thin shell: it declares its ``JOB``, adds ``--out`` and the
config's settings to its parser, builds the config from the arguments (resolving named
models first, so a bad name fails within seconds) and calls :meth:`Job.__call__`.

>>> from dataclasses import dataclass
>>> from pathlib import Path
>>> from concept_grounding.settings import setting
>>> @dataclass(frozen=True)
... class CountConfig:
...     n: int = setting(3, "how many")
>>> @dataclass(frozen=True)
... class CountResult:
...     config: CountConfig
...     total: int
...     def save(self, out):
...         path = Path(out) / "total.txt"
...         path.write_text(str(self.total))
...         return path
>>> count = Job("count", CountConfig, lambda c: CountResult(c, sum(range(c.n))))
>>> import tempfile
>>> with tempfile.TemporaryDirectory() as tmp:
...     count(CountConfig(n=4), tmp).read_text()
'6'
>>> is_job_result(CountResult)
True
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

__all__ = ["Job", "JobResult", "is_job_result", "add_job_arguments", "add_out_argument"]

ConfigT = TypeVar("ConfigT")
ResultT = TypeVar("ResultT", bound="JobResult")


@runtime_checkable
class JobResult(Protocol):
    """What a job's ``run`` returns: it writes its report with ``save(out)`` and returns the main file's path."""

    def save(self, out: str | os.PathLike[str]) -> Path:
        """Write the report files under ``out``; returns the main one's path."""
        ...


def is_job_result(cls: type) -> bool:
    """Whether ``cls`` has the job-result shape: a ``save(out)`` method taking nothing else required."""
    import inspect

    save = getattr(cls, "save", None)
    if save is None or not callable(save):
        return False
    params = list(inspect.signature(save).parameters.values())[1:]  # after self
    required = [
        p
        for p in params
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    return len(required) == 1 and required[0].kind != inspect.Parameter.KEYWORD_ONLY


@dataclass(frozen=True)
class Job(Generic[ConfigT, ResultT]):
    """A command's job.

    Attributes:
        name: the command's name (``"explain"``).
        config: the config dataclass; its :func:`~concept_grounding.settings.setting` fields are the flags.
        run: ``config -> result``; the result has ``save(out) -> Path``.
    """

    name: str
    config: type[ConfigT]
    run: Callable[[ConfigT], ResultT]

    def __post_init__(self) -> None:
        if not dataclasses.is_dataclass(self.config):
            raise TypeError(f"{self.name}: a job's config must be a dataclass, not {self.config!r}")

    def __call__(self, config: ConfigT, out: str | os.PathLike[str]) -> Path:
        """Run the job on ``config`` and save its result under ``out``; returns the main report's path."""
        return self.run(config).save(out)


def add_job_arguments(
    parser: argparse.ArgumentParser,
    job: Job,
    *,
    out_help: str = "output folder",
    out_default: str | os.PathLike[str] | None = None,
    exclude: tuple[str, ...] = (),
    defaults: dict[str, Any] | None = None,
) -> None:
    """``--out`` (:func:`add_out_argument`) and the flags ``job.config`` declares (``exclude`` and
    ``defaults`` as :func:`concept_grounding.settings.add_arguments`)."""
    from . import settings

    add_out_argument(parser, help=out_help, default=out_default)
    settings.add_arguments(parser, job.config, exclude=exclude, defaults=defaults)


def add_out_argument(
    parser: argparse.ArgumentParser, *, help: str = "output folder", default: str | os.PathLike[str] | None = None
) -> None:
    """``--out``, a writable folder: required, or ``default`` when the command has one
    (``bench``, ``sub`` and ``analyse`` write under ``reports/<command>`` by default)."""
    from .validators import output_dir

    if default is None:
        parser.add_argument("--out", required=True, type=output_dir, help=help)
    else:
        parser.add_argument("--out", type=output_dir, default=Path(default), help=help)
