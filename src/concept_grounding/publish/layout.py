"""Where each Hub repo is built, how its name is checked, and the ``--out`` folder's marker.

``--out DIR`` holds one folder per repo, ``DIR/<type>s/<name>/`` (``datasets/bird-world``,
``spaces/sub_accuracy``, ``models/tied_diffusion``, ...), exactly as uploaded, and a
marker file :data:`MARKER` listing them. A rebuild into the same folder replaces the
listed repo folders and nothing else; a non-empty folder without the marker is refused,
so that a typo in ``--out`` never overwrites unrelated files.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

__all__ = ["MARKER", "HubRepo"]

#: the file that says a folder was made by ``concept-grounding publish``
MARKER = ".concept-grounding-publish.json"

RepoType = Literal["dataset", "model", "space"]


@dataclass(frozen=True)
class HubRepo:
    """One Hub repository, built as a folder.

    Attributes:
        name: repository name without the namespace (``"sub_accuracy"``).
        repo_type: ``"dataset"``, ``"model"`` or ``"space"``.
        role: what it holds, in words (shown in the summary).
        space_sdk: the Space SDK (``"gradio"``) for ``repo_type == "space"``.
    """

    name: str
    repo_type: RepoType
    role: str
    space_sdk: str | None = None

    def repo_id(self, namespace: str) -> str:
        return f"{namespace}/{self.name}"

    def folder(self, out: Path) -> Path:
        """``out/<repo_type>s/<name>``."""
        return Path(out) / f"{self.repo_type}s" / self.name


def check_namespace(namespace: str, names: Iterable[str]) -> None:
    """Raise ``ValueError`` naming ``--namespace`` unless every ``namespace/name`` is a valid repo id.

    Uses ``huggingface_hub``'s own validator (letters, digits, ``-``, ``_``, ``.``; no
    ``--`` or ``..``; at most 96 characters).

    >>> check_namespace("my-org", ["sub_accuracy"])
    >>> check_namespace("my org", ["sub_accuracy"])
    Traceback (most recent call last):
    ...
    ValueError: --namespace: 'my org' is not a valid Hugging Face namespace (...)
    """
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if not namespace or "/" in namespace:
        raise ValueError(
            f"--namespace: {namespace!r} is not a valid Hugging Face namespace (one user or organisation name, no '/')"
        )
    for name in names:
        try:
            validate_repo_id(f"{namespace}/{name}")
        except HFValidationError as err:
            what = (
                f"--namespace: {namespace!r} is not a valid Hugging Face namespace"
                if _bad_alone(namespace)
                else f"repo name {namespace}/{name!r} is not valid on the Hub"
            )
            raise ValueError(f"{what} ({err})") from None


def _bad_alone(namespace: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(f"{namespace}/x")
    except HFValidationError:
        return True
    return False


def read_marker(out: Path) -> dict | None:
    """The marker's content, or ``None`` if ``out`` has none."""
    path = Path(out) / MARKER
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(
            f"--out: {path} is not a readable publish marker ({err}); remove it or choose another folder"
        ) from None


def prepare_out(out: Path) -> None:
    """Make ``out`` ready for a build: new, empty, or made by an earlier publish.

    An earlier publish's repo folders (those its marker lists) are removed; nothing else is.

    Raises:
        ValueError: ``out`` is a file, or a non-empty folder without :data:`MARKER`.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()):
        marker = read_marker(out)
        if marker is None:
            raise ValueError(
                f"--out: {out} is not empty and was not made by `concept-grounding publish` (no {MARKER}); "
                "choose a new or empty folder"
            )
        root = out.resolve()
        for repo in marker.get("repos", []):
            folder = (out / repo["folder"]).resolve()
            if root in folder.parents and folder.is_dir():
                shutil.rmtree(folder)
    out.mkdir(parents=True, exist_ok=True)


def write_marker(out: Path, namespace: str, version: str, command: str, repos: list[HubRepo]) -> Path:
    """Write :data:`MARKER`: who built the folder and which repo folders it holds."""
    out = Path(out)
    data = {
        "tool": "concept-grounding publish",
        "version": version,
        "namespace": namespace,
        "command": command,
        "repos": [dict(asdict(r), repo_id=r.repo_id(namespace), folder=r.folder(Path(".")).as_posix()) for r in repos],
    }
    path = out / MARKER
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path
