"""The ``publish`` job: build every Hub repo as a folder under ``out``, and with ``push`` upload them.

The job shape of :mod:`concept_grounding.jobs`: :class:`PublishJobConfig` declares every
setting of ``concept-grounding publish`` once (flag, default, help; the world settings are
checked by :meth:`PublishConfig.from_flags <concept_grounding.publish.build.PublishConfig.from_flags>`);
:func:`run_publish` checks everything (names, ``bench``, ``out``, the token with ``push``)
before it writes the repo folders into the ``out`` its config carries (as it goes, one
folder per repo) and uploads them; the :class:`PublishResult`'s ``save(out)`` has nothing
left to write and returns the folder's marker file (:data:`~.layout.MARKER`), which lists them.

>>> PublishJobConfig(namespace="me", size=64).publish_config(Path("hub")).world.world.image_size
64
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..settings import setting, tuple_or_none
from .build import PublishConfig, build_repos, plan_repos
from .layout import MARKER, HubRepo

__all__ = ["PublishJobConfig", "PublishResult", "run_publish", "WORLD_SETTINGS", "UPLOAD_SETTINGS"]

#: the settings of the bird world datasets (the ``concept-grounding world`` settings), a group of ``--help``
WORLD_SETTINGS = ("size", "train_per_class", "test_per_class", "per_pairing", "seed", "deviation_rate", "classes")
#: the settings of the upload, a group of ``--help``
UPLOAD_SETTINGS = ("push", "token", "private", "results")


@dataclass(frozen=True)
class PublishJobConfig:
    """Every setting of one ``publish`` run.

    Args:
        namespace: Hub user or organisation that owns the repos.
        bench: a ``concept-grounding bench`` run folder whose models are published (``None``: no model repos).
        wheel: the ``concept-grounding`` wheel the Spaces carry (``None``: built from the checkout).
        size, train_per_class, test_per_class, per_pairing, seed, deviation_rate, classes: the
            bird world rendered into the dataset repos (``classes``: ``None`` is SUB's 33).
        push: create the repos and upload the folders; ``token``: the Hub token (``None``:
            ``$HF_TOKEN`` or the saved one); ``private``: new repos are private.
        out: the folder of one sub-folder per repo (the command's ``--out``).
    """

    namespace: str = setting(help="Hub user or organisation that owns the repos")
    bench: Path | None = setting(
        None,
        "a `concept-grounding bench` run folder (e.g. reports/demo/bench) whose models "
        "to publish (default: none, no model repos)",
        parse=Path,
    )
    size: int = setting(128, "image side in pixels (>= 32)", parse=int)
    train_per_class: int = setting(10, "training images per class", parse=int)
    test_per_class: int = setting(5, "test images per class", parse=int)
    per_pairing: int = setting(1, "SUB-style images per (class, attribute) pairing", parse=int)
    seed: int = setting(0, "world seed", parse=int)
    deviation_rate: float = setting(0.1, "per-image, per-group label deviation rate", parse=float)
    classes: Sequence[str] | None = setting(
        None, "CUB class folder names (default: SUB's 33)", nargs="*", convert=tuple_or_none
    )
    wheel: Path | None = setting(
        None,
        "the package wheel every Space carries and installs (default: built from "
        "this checkout, offline, or the installed package packed again)",
        parse=Path,
    )
    push: bool = setting(False, "create the repos and upload the folders", action="store_true")
    token: str | None = setting(None, "Hub token (default: $HF_TOKEN or the `hf auth login` token)")
    private: bool = setting(False, "create new repos as private", action="store_true")
    results: Path | None = setting(
        None,
        "a command's --out (or its eval_results/ folder): with --push, open a pull "
        "request adding each model's .eval_results/*.yaml to its repo",
        parse=Path,
    )
    out: Path | None = None

    def publish_config(self, out: Path | None = None) -> PublishConfig:
        """The :class:`~.build.PublishConfig` built into ``out`` (default: ``self.out``), each world
        setting checked first (a one-line ``ValueError`` naming its flag)."""
        return PublishConfig.from_flags(
            self.namespace,
            out if out is not None else self.out,
            bench=self.bench,
            wheel=self.wheel,
            size=self.size,
            train_per_class=self.train_per_class,
            test_per_class=self.test_per_class,
            per_pairing=self.per_pairing,
            seed=self.seed,
            deviation_rate=self.deviation_rate,
            classes=self.classes,
        )


@dataclass(frozen=True)
class PublishResult:
    """What :func:`run_publish` built (and pushed).

    Attributes:
        config: the job's configuration.
        built: the publish config the folders were built from (``built.out`` is the folder).
        repos: the repos written, one folder each.
        pushed: the upload of each repo (empty without ``push``).
        results: the evaluation results of ``--results`` (model folder -> file -> entries).
        prs: the pull requests opened with them (empty without ``push``).
    """

    config: PublishJobConfig
    built: PublishConfig
    repos: list[HubRepo]
    pushed: list[Any] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    prs: list[Any] = field(default_factory=list)

    def save(self, out: str | Path) -> Path:
        """The marker file that lists the repo folders: they were written as the job ran.

        Raises:
            ValueError: ``out`` is not the folder the job built into.
        """
        if Path(out).resolve() != Path(self.built.out).resolve():
            raise ValueError(f"out: the publish job built into {self.built.out}, its config's out, not {out}")
        return Path(self.built.out) / MARKER

    def lines(self) -> list[str]:
        """What the command prints: one line per repo, then one per upload (or how to upload)."""
        ns, out = self.built.namespace, self.built.out
        lines = [f"{repo.repo_type:8s} {repo.repo_id(ns):45s} {repo.folder(out)}" for repo in self.repos]
        if self.config.push:
            lines += [f"pushed {r.repo_type} {r.repo_id}: {r.commit_url}" for r in self.pushed]
            lines += [
                f"opened a pull request on {pr.repo_id} adding {', '.join(pr.files)}: {pr.pr_url}" for pr in self.prs
            ]
        else:
            lines.append(f"built {len(self.repos)} repos under {out}; upload them with the same command and --push")
        return lines


def run_publish(config: PublishJobConfig) -> PublishResult:
    """Check every setting, build the repo folders into ``config.out``, and with ``push`` upload them.

    Raises:
        ValueError: ``config.out`` is ``None``; a bad setting (one line naming its flag), raised
            before anything is rendered or written.
    """
    from ..eval_results import read_eval_results
    from .push import push_repos, resolve_token

    if config.out is None:
        raise ValueError("out: give the folder to build the repos into")
    built = config.publish_config()
    token = resolve_token(config.token) if config.push else None  # before any work
    results = read_eval_results(config.results) if config.results is not None else {}
    plan = plan_repos(built)
    repos = build_repos(built, plan)
    pushed: list[Any] = []
    prs: list[Any] = []
    if config.push:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
        pushed = push_repos(repos, built.namespace, built.out, api, private=config.private, version=built.version)
        if results:
            from .build import SUB_DATASET, WORLD_DATASET
            from .results import dataset_revisions, push_results

            published = dataset_revisions(pushed, (WORLD_DATASET, SUB_DATASET), built.namespace)
            prs = push_results(results, built.namespace, api, published, built.version)
    return PublishResult(config, built, repos, pushed, results, prs)
