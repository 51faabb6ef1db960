"""The annotation store's Hub sync (CommitScheduler), tested offline against a local folder."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from concept_grounding.curation.annotation_items import study1_item
from concept_grounding.curation.hub_sync import EXPORT_PATH, RATINGS_PATH, AnnotationSync
from concept_grounding.curation.study import rating_record, sub_record
from concept_grounding.curation.study_store import StudyStore
from concept_grounding.loaders.ratings import RatingItem


@dataclass
class _RepoUrl:
    repo_id: str


class LocalHubApi:
    """The three ``HfApi`` calls CommitScheduler makes, committing into a local folder."""

    def __init__(self, remote: Path):
        self.remote, self.commits = remote, 0

    def create_repo(self, repo_id, **kwargs):
        (self.remote / repo_id).mkdir(parents=True, exist_ok=True)
        return _RepoUrl(repo_id)

    def create_commit(self, repo_id, operations, **kwargs):
        for op in operations:
            target = self.remote / repo_id / op.path_in_repo
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(op.path_or_fileobj.read())
        self.commits += 1
        return self.commits

    def run_as_future(self, fn, *args, **kwargs):
        future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def test_sync_pushes_snapshots_of_the_store(tmp_path):
    store = StudyStore(tmp_path / "a.db", k=2)
    store.add_records(
        "sub-1", [sub_record(study1_item(f"1:c{i}", "017.Cardinal", "has_crown_color::pink")) for i in range(3)]
    )
    store.submit("ann", "sub-1", "1:c0", {"q1": "yes", "q2": "no"})
    api = LocalHubApi(tmp_path / "hub")
    sync = AnnotationSync(store, repo_id="me/sub-annotations", folder=tmp_path / "sync", every=60, hf_api=api)
    try:
        for _ in range(500):  # the scheduler's thread pushes once on start: let it finish first
            if getattr(sync, "last_future", None) is not None:
                break
            time.sleep(0.01)
        sync.last_future.result()
        sync.trigger().result()
        commits = api.commits
        assert sync.trigger().result() is None and api.commits == commits  # nothing new: no commit
        remote = tmp_path / "hub" / "me/sub-annotations" / EXPORT_PATH
        assert pd.read_parquet(remote)[["annotator", "study", "record", "q1", "q2"]].values.tolist() == [
            ["ann", "sub-1", "1:c0", "yes", "no"]
        ]  # the study store's export: one row per response
        store.submit("bob", "sub-1", "1:c0", {"q1": "no", "q2": "no"})
        sync.trigger().result()
        assert len(pd.read_parquet(remote)) == 2 and api.commits == commits + 1
        assert not (tmp_path / "hub" / "me/sub-annotations" / RATINGS_PATH).exists()  # no rating study here
    finally:
        sync.stop()
    assert not [p for p in (tmp_path / "sync").rglob("*") if p.name.startswith(".")]  # no temporary left


def test_sync_pushes_the_rating_studys_ratings_too(tmp_path):
    store = StudyStore(tmp_path / "a.db", k=2)
    items = [RatingItem(f"r-{i}", "caption", "LoRA", "composition", "c0", "x.png", (), "V*") for i in range(2)]
    store.add_records("conceptbed-rating", [rating_record(it) for it in items])
    store.submit("ann", "conceptbed-rating", store.next_record("ann", "conceptbed-rating").id, {"rating": 4})
    api = LocalHubApi(tmp_path / "hub")
    sync = AnnotationSync(store, repo_id="me/ratings", folder=tmp_path / "sync", every=60, hf_api=api)
    try:
        for _ in range(500):
            if getattr(sync, "last_future", None) is not None:
                break
            time.sleep(0.01)
        sync.last_future.result()
        remote = tmp_path / "hub" / "me/ratings" / RATINGS_PATH
        assert pd.read_parquet(remote)[["annotator", "rating"]].values.tolist() == [["ann", "4"]]
        store.submit("bob", "conceptbed-rating", store.next_record("bob", "conceptbed-rating").id, {"rating": 2})
        sync.trigger().result()
        assert sorted(pd.read_parquet(remote)["rating"]) == ["2", "4"]
    finally:
        sync.stop()
