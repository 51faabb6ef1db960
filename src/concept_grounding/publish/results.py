"""``publish --results DIR``: evaluation results go to their model repos as pull requests.

``DIR`` is a command's ``--out`` (or its ``eval_results/`` folder) holding
``eval_results/<model>/<name>.yaml`` (:mod:`concept_grounding.eval_results`). Each model folder
names its repo: ``owner--name`` is ``owner/name``, a plain name is ``<namespace>/<name>``. With
``--push`` every repo gets one pull request (``create_commit(..., create_pr=True)``) adding its
files as ``.eval_results/<name>.yaml``: results on someone else's model are proposed, never
pushed; on your own, merge the PR. A dataset id without a namespace that ``publish`` publishes
(``bird-world``, ``bird-world-sub``) becomes ``<namespace>/<id>``, with the revision this push
committed when it pushed that dataset.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..eval_results import check_eval_results

__all__ = ["ResultsPR", "results_repo_id", "qualify_results", "push_results"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResultsPR:
    """One pull request opened: the model repo, the files it adds and its URL."""

    repo_id: str
    files: tuple[str, ...]
    pr_url: str | None


def results_repo_id(folder: str, namespace: str) -> str:
    """The model repo of a results folder.

    >>> results_repo_id("openai--clip-vit-base-patch32", "me"), results_repo_id("world-cbm-joint", "me")
    ('openai/clip-vit-base-patch32', 'me/world-cbm-joint')
    """
    return folder.replace("--", "/", 1) if "--" in folder else f"{namespace}/{folder}"


def qualify_results(entries: list[dict[str, Any]], namespace: str, published: dict[str, str | None]) -> list[dict]:
    """``entries`` with each dataset id ``publish`` publishes (``published``: name -> pushed revision or
    ``None``) as ``<namespace>/<name>`` and its revision; checked against the schema."""
    out = copy.deepcopy(entries)
    for entry in out:
        dataset = entry["dataset"]
        if dataset["id"] in published:
            revision = published[dataset["id"]]
            dataset["id"] = f"{namespace}/{dataset['id']}"
            if revision:
                dataset["revision"] = revision
    check_eval_results(out)
    return out


def _revision(commit_url: str | None) -> str | None:
    """The commit id at the end of an ``.../commit/<id>`` URL."""
    if commit_url and "/commit/" in commit_url:
        return commit_url.rstrip("/").rsplit("/", 1)[-1]
    return None


def dataset_revisions(pushed: Iterable[Any], names: Iterable[str], namespace: str) -> dict[str, str | None]:
    """``name -> revision`` of each published dataset name (``None`` where this run did not commit it)."""
    urls = {p.repo_id: p.commit_url for p in pushed if p.repo_type == "dataset"}
    return {name: _revision(urls.get(f"{namespace}/{name}")) for name in names}


def push_results(
    found: dict[str, dict[str, list[dict]]],
    namespace: str,
    api: Any,
    published: dict[str, str | None],
    version: str = "",
) -> list[ResultsPR]:
    """One pull request per model repo adding its ``.eval_results/<name>.yaml`` files."""
    import yaml
    from huggingface_hub import CommitOperationAdd

    prs = []
    for folder, files in sorted(found.items()):
        repo_id = results_repo_id(folder, namespace)
        operations = [
            CommitOperationAdd(
                path_in_repo=f".eval_results/{name}.yaml",
                path_or_fileobj=yaml.safe_dump(qualify_results(entries, namespace, published), sort_keys=False).encode(
                    "utf-8"
                ),
            )
            for name, entries in sorted(files.items())
        ]
        info = api.create_commit(
            repo_id=repo_id,
            repo_type="model",
            operations=operations,
            create_pr=True,
            commit_message=f"Add evaluation results (concept-grounding {version})".replace(" )", ")"),
            commit_description="Results in the Hub's `.eval_results` format, written by "
            "`concept-grounding publish --results`.",
        )
        url = getattr(info, "pr_url", None)
        logger.info("opened %s on %s", url, repo_id)
        prs.append(ResultsPR(repo_id, tuple(op.path_in_repo for op in operations), url))
    return prs
