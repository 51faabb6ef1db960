"""Upload the built folders with ``huggingface_hub``: ``create_repo(exist_ok=True)`` + ``upload_folder``.

Re-running is safe and cheap. ``create_repo(exist_ok=True)`` keeps a repo that exists;
``upload_folder`` makes one commit per repo, and ``HfApi.create_commit`` drops every
file whose content hash equals the one already on the Hub (SHA-256 for LFS files, the
git SHA-1 for small ones: "Skipping upload for ... as the file has not changed"; no
commit at all when nothing changed; checked in ``huggingface_hub`` 2.4's
``create_commit``; LFS blobs already on the Hub are not sent again). A rebuild with the
same settings writes byte-identical files (rendering, Parquet and cards are
deterministic), so a second push uploads only what changed, and a push interrupted
part-way is finished by running the same command again: the repos already done
upload nothing, the rest are uploaded.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from .layout import HubRepo

__all__ = ["resolve_token", "push_repos", "PushResult"]

logger = logging.getLogger(__name__)


def resolve_token(token: str | None) -> str:
    """``token``, else ``$HF_TOKEN``, else the token saved by ``hf auth login``.

    Raises:
        ValueError: none of them gives a token.
    """
    if token:
        return token
    from huggingface_hub import get_token

    found = os.environ.get("HF_TOKEN") or get_token()
    if not found:
        raise ValueError("--push: no Hugging Face token; pass --token, set HF_TOKEN, or log in with `hf auth login`")
    return found


@dataclass(frozen=True)
class PushResult:
    """One pushed repo: its id, type and the commit URL (``None`` if nothing changed)."""

    repo_id: str
    repo_type: str
    commit_url: str | None


def push_repos(
    repos: list[HubRepo], namespace: str, out: Path, api: Any, *, private: bool = False, version: str = ""
) -> list[PushResult]:
    """Create (if needed) and upload every repo folder of ``out``.

    Args:
        repos: the repos :func:`~concept_grounding.publish.build.build_repos` wrote.
        namespace: their owner.
        out: the ``--out`` folder.
        api: an ``huggingface_hub.HfApi`` (with its token), or anything with the same
            ``create_repo`` / ``upload_folder`` methods (tests pass a recorder).
        private: create new repos as private (existing repos keep their visibility).
    """
    results = []
    for repo in tqdm(repos, desc="publish: push", unit="repo"):
        repo_id = repo.repo_id(namespace)
        extra = {"space_sdk": repo.space_sdk} if repo.repo_type == "space" else {}
        api.create_repo(repo_id=repo_id, repo_type=repo.repo_type, private=private, exist_ok=True, **extra)
        info = api.upload_folder(
            repo_id=repo_id,
            repo_type=repo.repo_type,
            folder_path=str(repo.folder(out)),
            commit_message=f"concept-grounding {version} publish".replace("  ", " "),
        )
        url = getattr(info, "commit_url", None) or (str(info) if info else None)
        logger.info("pushed %s %s: %s", repo.repo_type, repo_id, url)
        results.append(PushResult(repo_id, repo.repo_type, url))
    return results
