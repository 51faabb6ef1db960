"""The ``learn`` job: one concept, or every concept folder of a folder sharded over processes.

:class:`LearnJobConfig` holds how the job runs (``concepts``) and one
:class:`~.config.LearnConfig` (the learner's settings, which are the command's flags);
:func:`run_learn` learns into ``out`` (one concept) or ``out/<concept folder name>`` (with
``concepts``), writing as it goes, so an interrupted job resumes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import UsageError, named
from ..settings import setting
from .config import LearnConfig

__all__ = ["LearnJobConfig", "LearnResult", "run_learn"]


@dataclass(frozen=True)
class LearnJobConfig:
    """One ``learn`` run.

    Args:
        concepts: ``learn.images`` holds one sub-folder per concept; each is learnt into
            ``out/<its name>`` (process ``i`` of ``n`` under ``accelerate launch`` / ``torchrun``
            takes every ``n``-th).
        out: the output folder (the command's ``--out``).
        learn: the learner's settings.
    """

    concepts: bool = setting(
        False,
        "--images holds one sub-folder per concept: learn each into OUT/<name>, "
        "sharded over accelerate / torchrun processes",
        action="store_true",
    )
    out: Path | None = None
    learn: LearnConfig | None = field(default=None)

    def jobs(self) -> list[tuple[LearnConfig, Path]]:
        """``(config, out)`` of every concept learnt."""
        if self.out is None or self.learn is None:
            raise ValueError("out: give the output folder and the learner's settings")
        if not self.concepts:
            return [(self.learn, Path(self.out))]
        root = Path(self.learn.images)
        subs = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        if not subs:
            raise UsageError(f"{root} holds no concept sub-folders", argument=named("images"))
        return [(replace(self.learn, images=sub), Path(self.out) / sub.name) for sub in subs]


@dataclass(frozen=True)
class LearnResult:
    """The learnt folders (each loadable by :func:`~concept_grounding.learners.load_learned`)."""

    config: LearnJobConfig
    folders: tuple[Path, ...]

    def save(self, out: str | Path) -> Path:
        """``learned.json`` of a single concept, or ``concepts.json`` listing every folder."""
        out = Path(out)
        if not self.config.concepts:
            return out / "learned.json"
        path = out / "concepts.json"
        path.write_text(
            json.dumps(
                {"method": self.config.learn.method, "concepts": {p.name: str(p) for p in self.folders}}, indent=1
            )
        )
        return path


def run_learn(config: LearnJobConfig) -> LearnResult:
    """Check every concept, then learn them (sharded over processes; resumable)."""
    from .train import learn_many

    jobs = config.jobs()
    folders = learn_many([c for c, _ in jobs], [o for _, o in jobs])
    return LearnResult(config, tuple(folders))
