"""Results on the Hub's terms: ``.eval_results/*.yaml`` files that follow the Community Evals schema
(:data:`concept_grounding.eval_results.SCHEMA`), and ``publish --results DIR --push`` proposing them to
each model repo as a pull request (a mocked ``HfApi``)."""

from __future__ import annotations

import argparse

import jsonschema
import pytest
import yaml

from concept_grounding.commands import publish as publish_command
from concept_grounding.eval_results import (
    SCHEMA,
    WORLD_SUB_DATASET,
    check_eval_results,
    read_eval_results,
    result_entries,
    write_eval_results,
)
from concept_grounding.publish.build import SUB_DATASET, WORLD_DATASET


def test_written_files_validate_against_the_schema(tmp_path):
    entries = result_entries(
        "Jessica-bader/SUB",
        {"s_plus": 0.25, "s_minus": 0.75, "concept_accuracy": float("nan")},
        revision="5503434ddd753f426f4b38109466949a1217c2bb",
        notes="paper protocol",
        source_url="https://github.com/x/y",
        source_name="run",
    )
    path = write_eval_results(tmp_path, "openai/clip-vit-base-patch32", "sub", entries)
    assert path == tmp_path / "eval_results" / "openai--clip-vit-base-patch32" / "sub.yaml"
    data = yaml.safe_load(path.read_text())
    jsonschema.validate(data, SCHEMA)  # the schema itself, by the reference validator
    assert data == [
        {
            "dataset": {
                "id": "Jessica-bader/SUB",
                "task_id": "s_plus",
                "revision": "5503434ddd753f426f4b38109466949a1217c2bb",
            },
            "value": 0.25,
            "source": {"url": "https://github.com/x/y", "name": "run"},
            "notes": "paper protocol",
        },
        {
            "dataset": {
                "id": "Jessica-bader/SUB",
                "task_id": "s_minus",
                "revision": "5503434ddd753f426f4b38109466949a1217c2bb",
            },
            "value": 0.75,
            "source": {"url": "https://github.com/x/y", "name": "run"},
            "notes": "paper protocol",
        },
    ]  # NaN left out: the format holds numbers


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "should be non-empty"),
        ([{"dataset": {"id": "a/b"}, "value": 1.0}], "'task_id' is a required property"),
        ([{"dataset": {"id": "a/b", "task_id": "t"}, "value": "high"}], "'high' is not of type 'number'"),
        ([{"dataset": {"id": "a/b", "task_id": "t"}, "value": 1.0, "source": {"name": "x"}}], "'url' is a required"),
        ([{"dataset": {"id": "a/b", "task_id": "t"}, "value": 1.0, "score": 2}], "Additional properties"),
    ],
)
def test_bad_results_are_refused_in_one_line(data, message):
    with pytest.raises(ValueError, match=message) as caught:
        check_eval_results(data)
    assert "\n" not in str(caught.value)


def test_the_world_dataset_names_are_the_published_ones():
    assert WORLD_SUB_DATASET == SUB_DATASET and WORLD_DATASET == "bird-world"


class FakeApi:
    """``create_repo`` / ``upload_folder`` as a Hub that commits everything, and ``create_commit`` recorded."""

    def __init__(self):
        self.commits = []

    def create_repo(self, **kwargs):
        pass

    def upload_folder(self, *, repo_id, repo_type, folder_path, commit_message):
        return f"https://huggingface.co/{'datasets/' if repo_type == 'dataset' else ''}{repo_id}/commit/{'a' * 40}"

    def create_commit(self, **kwargs):
        self.commits.append(kwargs)
        return type("Info", (), {"pr_url": f"https://huggingface.co/{kwargs['repo_id']}/discussions/1"})()


def _run(argv):
    parser = argparse.ArgumentParser()
    publish_command.add_arguments(parser)
    return publish_command.run(parser.parse_args(argv))


def test_publish_results_opens_one_pull_request_per_model(tmp_path, monkeypatch, capsys):
    import huggingface_hub

    from concept_grounding.publish import build

    runs = tmp_path / "sub-run"
    write_eval_results(runs, "world CBM", "sub", result_entries(WORLD_SUB_DATASET, {"s_plus": 0.5, "s_minus": 0.25}))
    write_eval_results(runs, "world CBM", "bench", result_entries(WORLD_SUB_DATASET, {"class_accuracy": 1.0}))
    write_eval_results(
        runs, "openai/clip-vit-base-patch32", "sub", result_entries("Jessica-bader/SUB", {"s_plus": 0.6})
    )
    api = FakeApi()
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda token=None: api)
    # only the two datasets: the results step does not depend on the other repos
    real = build.plan_repos
    monkeypatch.setattr(
        "concept_grounding.publish.job.plan_repos",
        lambda config: [p for p in real(config) if p.repo.repo_type == "dataset"],
    )
    assert (
        _run(
            [
                "--namespace",
                "me",
                "--out",
                str(tmp_path / "hub"),
                "--push",
                "--token",
                "hf_x",
                "--size",
                "32",
                "--train-per-class",
                "1",
                "--test-per-class",
                "1",
                "--classes",
                "017.Cardinal",
                "--results",
                str(runs),
            ]
        )
        == 0
    )
    assert [c["repo_id"] for c in api.commits] == ["openai/clip-vit-base-patch32", "me/world-cbm"]
    assert all(c["create_pr"] is True and c["repo_type"] == "model" for c in api.commits)
    ours = api.commits[1]
    assert [op.path_in_repo for op in ours["operations"]] == [".eval_results/bench.yaml", ".eval_results/sub.yaml"]
    sub = yaml.safe_load(ours["operations"][1].path_or_fileobj)
    jsonschema.validate(sub, SCHEMA)
    assert sub == [
        {"dataset": {"id": "me/bird-world-sub", "task_id": "s_plus", "revision": "a" * 40}, "value": 0.5},
        {"dataset": {"id": "me/bird-world-sub", "task_id": "s_minus", "revision": "a" * 40}, "value": 0.25},
    ]
    clip = yaml.safe_load(api.commits[0]["operations"][0].path_or_fileobj)
    assert clip == [{"dataset": {"id": "Jessica-bader/SUB", "task_id": "s_plus"}, "value": 0.6}]  # not ours: as written
    assert (
        "opened a pull request on me/world-cbm adding .eval_results/bench.yaml, .eval_results/sub.yaml"
        in capsys.readouterr().out
    )


def test_bad_results_folder_stops_before_any_work(tmp_path):
    bad = tmp_path / "run" / "eval_results" / "m"
    bad.mkdir(parents=True)
    (bad / "sub.yaml").write_text("- dataset: {id: a/b}\n  value: 1\n")
    with pytest.raises(ValueError, match=r"--results: .*sub.yaml: eval results: 0/dataset: 'task_id' is a required"):
        _run(["--namespace", "me", "--out", str(tmp_path / "hub"), "--results", str(tmp_path / "run")])
    assert not (tmp_path / "hub").exists()
    assert read_eval_results  # the reader the job uses
