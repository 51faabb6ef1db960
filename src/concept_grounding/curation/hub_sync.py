"""Optional sync of the annotation store to a Hub dataset repo (docs/human_validation.md), with
``huggingface_hub``'s :class:`~huggingface_hub.CommitScheduler`.

:class:`AnnotationSync` snapshots the study store's export (:mod:`.study_export`) of SUB's studies to
``<folder>/data/annotations.parquet`` and, for a store with ConceptBed's rating study, that study's
to ``<folder>/data/ratings.parquet`` under the scheduler's lock, then
lets the scheduler commit the changed files, every ``every`` minutes and once more at exit.
The SQLite file stays the source of truth; the repo holds its latest export, which ``curate
--annotations`` reads after a download. Pass ``hf_api`` to commit elsewhere (the tests use an
offline stand-in that writes to a local folder).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from huggingface_hub import CommitScheduler

from .study_store import StudyStore

__all__ = ["EXPORT_PATH", "RATINGS_PATH", "AnnotationSync"]

#: where the snapshot goes, inside the synced folder and the repo.
EXPORT_PATH = "data/annotations.parquet"
#: where the rating study's snapshot goes.
RATINGS_PATH = "data/ratings.parquet"
#: the studies of each snapshot.
SNAPSHOTS: dict[str, tuple[str, ...]] = {EXPORT_PATH: ("sub-1", "sub-2"), RATINGS_PATH: ("conceptbed-rating",)}


class AnnotationSync(CommitScheduler):
    """Push ``store``'s answers to the dataset repo ``repo_id`` every ``every`` minutes.

    Args:
        store: the annotation store.
        repo_id: the Hub dataset repo (created, private by default, when missing).
        folder: the local folder the scheduler uploads (the snapshot is written there).
        every: minutes between pushes.
        hf_api: the ``HfApi`` to commit with (default: a new one with ``token``).
        kwargs: further :class:`~huggingface_hub.CommitScheduler` arguments (``token``, ``revision``).
    """

    def __init__(
        self,
        store: StudyStore,
        *,
        repo_id: str,
        folder: str | Path,
        every: float = 5,
        private: bool = True,
        hf_api: Any = None,
        **kwargs: Any,
    ):
        self.store = store
        self._snapshot_of: dict[str, int] = {}  # responses per snapshot at its last writing (append-only)
        super().__init__(
            repo_id=repo_id,
            folder_path=folder,
            every=every,
            repo_type="dataset",
            private=private,
            hf_api=hf_api,
            allow_patterns=[EXPORT_PATH, RATINGS_PATH],
            **kwargs,
        )

    def push_to_hub(self):  # type: ignore[override]
        """Snapshot the store when it has new answers (under the lock: never a half-written
        file), then commit what changed (nothing when nothing did)."""
        with self.lock:
            for path, studies in SNAPSHOTS.items():
                if not any(self.store.complete(s)[1] for s in studies):
                    continue  # a study this store does not hold
                count = sum(self.store.response_count(s) for s in studies)
                if count != self._snapshot_of.get(path):
                    self.store.to_parquet(studies, self.folder_path / path)
                    self._snapshot_of[path] = count
        return super().push_to_hub()
