"""`concept-grounding publish`: the repo folders, their cards' YAML, bad input, and a mocked push."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from concept_grounding import __version__
from concept_grounding.commands import publish as publish_command
from concept_grounding.publish import MARKER, PublishConfig, WorldSpec, build_repos, plan_repos, push_repos
from concept_grounding.publish.sources import METRIC_NAMES, find_sources
from concept_grounding.vocabulary import load_vocabulary
from concept_grounding.world import WorldConfig

CLASSES = ("017.Cardinal", "073.Blue_Jay")
TINY = ["--size", "32", "--train-per-class", "1", "--test-per-class", "1", "--classes", *CLASSES]
CORE_REPOS = {
    ("dataset", "bird-world"),
    ("dataset", "bird-world-sub"),
    ("model", "tied_diffusion"),
    ("space", "concept-grounding"),
    ("model", "tied_flux2"),
    ("model", "tied_flux2_klein"),
    ("model", "tied_diffusion_block"),
    *(("space", m) for m in METRIC_NAMES),
    # The world Flux repo is built whenever its weights ship with the package (they do).
    *((("model", "world-flux"),) if find_sources().world_flux is not None else ()),
}


@pytest.fixture(scope="module", autouse=True)
def one_wheel(tmp_path_factory):
    """The package wheel, built once from this checkout (as ``publish`` builds it) and given to every
    publish below with ``--wheel`` (``WHEEL``)."""
    from concept_grounding.publish.wheel import package_wheel

    wheel = package_wheel(__version__, None, Path(__file__).resolve().parents[2], tmp_path_factory.mktemp("wheel"))
    TINY[len(TINY) :] = ["--wheel", str(wheel.path)]
    WHEEL.append(wheel.path)
    yield wheel
    del TINY[-2:]
    WHEEL.clear()


WHEEL: list[Path] = []


def run_publish(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    publish_command.add_arguments(parser)
    return publish_command.run(parser.parse_args(argv))


def fake_bench(root: Path) -> Path:
    """A bench run folder with one saved model: a real CBM save, its results row and config."""
    from concept_grounding.models import ConceptBottleneckModel

    vocab = load_vocabulary()
    names = list(vocab.attributes[:3])
    model = ConceptBottleneckModel(num_concepts=3, num_classes=2, concept_names=names)
    model.save_pretrained(root / "models" / "cbm-joint")
    (root / "config.json").write_text(
        json.dumps(
            {
                "image_size": 32,
                "epochs": 1,
                "models": ["CBM (joint)"],
                "posthoc": False,
                "seed": 3,
                "classes": list(CLASSES),
            }
        )
    )
    row = {
        "name": "CBM (joint)",
        "s_plus": 0.25,
        "s_minus": 0.75,
        "chance_s_plus": 0.5,
        "chance_s_minus": 0.5,
        "concept_accuracy": 0.9,
        "concept_accuracy_exact": 0.8,
        "class_accuracy": 1.0,
    }
    (root / "results.json").write_text(json.dumps({"table1": [row], "table2": []}))
    return root


def file_hashes(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("publish")
    bench = fake_bench(root / "bench")
    out = root / "hub"
    assert run_publish(["--namespace", "cg-test", "--out", str(out), "--bench", str(bench), *TINY]) == 0
    return out, bench


# --------------------------------------------------------------------------- folders
def test_one_folder_per_repo_and_a_marker(built):
    out, _ = built
    found = {(p.parent.name[:-1], p.name) for p in out.glob("*/*") if p.is_dir()}
    assert found == CORE_REPOS | {("model", "world-cbm-joint")}
    marker = json.loads((out / MARKER).read_text())
    assert marker["namespace"] == "cg-test" and marker["version"] == __version__
    assert {(r["repo_type"], r["name"]) for r in marker["repos"]} == found
    assert all(r["repo_id"] == f"cg-test/{r['name']}" for r in marker["repos"])


def test_world_dataset_card_declares_configs_splits_and_features(built):
    import datasets
    from huggingface_hub import DatasetCard

    folder = built[0] / "datasets" / "bird-world"
    card = DatasetCard.load(folder / "README.md")
    assert card.data.license == "apache-2.0"
    assert card.data.configs == [
        {
            "config_name": "default",
            "data_files": [{"split": "train", "path": "data/train-*"}, {"split": "test", "path": "data/test-*"}],
        }
    ]
    info = card.data.dataset_info
    assert {s["name"]: s["num_examples"] for s in info["splits"]} == {"train": 2, "test": 2}
    declared = datasets.Features._from_yaml_list(info["features"])
    assert declared["label"] == datasets.ClassLabel(names=list(CLASSES))
    loaded = datasets.load_dataset(str(folder))
    assert loaded["train"].features == declared and loaded["test"].num_rows == 2
    row = loaded["train"][0]
    assert np.asarray(row["part_xy"]).shape == (15, 2) and len(row["class_attributes"]) == 312
    assert row["mask"].mode == "L" and row["image"].size == (32, 32)
    assert "--seed 0" in card.text and "concept-grounding publish --namespace cg-test" in card.text


def test_sub_style_set_has_subs_hub_schema_and_loads_like_sub(built):
    """The user's SUB code path, `load_dataset(<repo>, split="test")`, and the project's SUB loader."""
    import datasets
    from huggingface_hub import DatasetCard

    from concept_grounding.loaders import load_sub
    from concept_grounding.loaders.sub import normalise_attribute
    from concept_grounding.publish.world_data import build_world

    folder = built[0] / "datasets" / "bird-world-sub"
    sub = datasets.load_dataset(str(folder), split="test")
    card = DatasetCard.load(folder / "README.md")
    assert sub.features == datasets.Features._from_yaml_list(card.data.dataset_info["features"])
    assert [s["name"] for s in card.data.dataset_info["splits"]] == ["test"]
    assert isinstance(sub.features["image"], datasets.Image)
    assert sub.features["bird_label"].names == list(CLASSES)
    attr_names = sub.features["attr_label"].names
    assert all("--" in n and "::" not in n and n.startswith("has_") for n in attr_names)
    vocab = load_vocabulary()
    assert all(vocab.is_attribute(normalise_attribute(n, vocab)) for n in attr_names)

    ours = load_sub(folder)
    world = build_world(WorldSpec(WorldConfig(image_size=32, class_names=CLASSES), train_per_class=1, test_per_class=1))
    truth = world.sub_dataset(per_pairing=1)
    assert ours.num_rows == truth.num_rows == sub.num_rows
    assert ours["reference_class"] == truth["reference_class"]
    assert ours["target_attribute"] == truth["target_attribute"]
    assert ours["removed_attributes"] == truth["removed_attributes"]
    assert np.array_equal(np.asarray(sub[0]["image"].convert("RGB")), np.asarray(truth[0]["image"].convert("RGB")))


def test_fixture_in_subs_hub_schema_loads_through_the_sub_loader(tmp_path):
    """Three columns only, as SUB's card has them (ClassLabels, '--' spelling), Hub file layout."""
    import datasets
    from PIL import Image

    from concept_grounding.loaders import load_sub

    features = datasets.Features(
        {
            "image": datasets.Image(),
            "bird_label": datasets.ClassLabel(names=["Cardinal", "Blue_Jay"]),
            "attr_label": datasets.ClassLabel(names=["has_bill_shape--needle", "has_crown_color--black"]),
        }
    )
    images = [Image.new("RGB", (8, 8), c) for c in ("red", "blue")]
    ds = datasets.Dataset.from_dict({"image": images, "bird_label": [0, 1], "attr_label": [1, 0]}, features=features)
    (tmp_path / "SUB" / "data").mkdir(parents=True)
    ds.to_parquet(str(tmp_path / "SUB" / "data" / "test-00000-of-00001.parquet"))
    same_path = datasets.load_dataset(str(tmp_path / "SUB"), split="test")
    assert same_path.features == features
    with pytest.warns(UserWarning, match="S- is left empty"):
        ours = load_sub(tmp_path / "SUB")
    assert ours["reference_class"] == ["017.Cardinal", "073.Blue_Jay"]
    assert ours["target_attribute"] == ["has_crown_color::black", "has_bill_shape::needle"]


def test_metric_spaces_carry_module_card_app_and_pinned_requirements(built):
    import evaluate
    from huggingface_hub import SpaceCard

    for name in METRIC_NAMES:
        folder = built[0] / "spaces" / name
        assert {p.name for p in folder.iterdir()} == {"README.md", "app.py", "requirements.txt", f"{name}.py", "wheels"}
        card = SpaceCard.load(folder / "README.md")
        assert card.data.sdk == "gradio" and card.data.app_file == "app.py"
        assert {"evaluate", "metric"} <= set(card.data.tags)
        wheel = WHEEL[0].name
        assert (folder / "wheels" / wheel).read_bytes() == WHEEL[0].read_bytes()
        assert (folder / "requirements.txt").read_text().splitlines()[
            -1
        ] == f"concept-grounding @ https://huggingface.co/spaces/cg-test/{name}/resolve/main/wheels/{wheel}"
        module = (folder / f"{name}.py").read_text()
        assert f'"metrics/{name}"' not in module and f'"metrics/{name}"' not in card.text
    metric = evaluate.load(str(built[0] / "spaces" / "sub_accuracy"))
    names = ["has_bill_shape::dagger", "has_bill_shape::needle"]
    out = metric.compute(
        predictions=[[0.2, 0.9], [0.7, 0.4]],
        reference_classes=["017.Cardinal", "073.Blue_Jay"],
        target_attributes=["has_bill_shape::needle"] * 2,
        removed_attributes=[["has_bill_shape::dagger"]] * 2,
        concept_names=names,
    )
    assert (out["s_plus"], out["s_minus"]) == (0.5, 0.5)


def test_pipeline_repo_is_a_custom_pipeline(built, tmp_path):
    from diffusers import DiffusionPipeline
    from huggingface_hub import ModelCard

    from concept_grounding.testing import tiny_flux_pipeline

    folder = built[0] / "models" / "tied_diffusion"
    card = ModelCard.load(folder / "README.md")
    assert card.data.library_name == "diffusers" and "custom-pipeline" in card.data.tags
    assert 'custom_pipeline="cg-test/tied_diffusion"' in card.text and "pipelines/tied_diffusion" not in card.text
    tiny_flux_pipeline().save_pretrained(tmp_path / "tiny")
    pipe = DiffusionPipeline.from_pretrained(tmp_path / "tiny", custom_pipeline=str(folder), trust_remote_code=True)
    assert type(pipe).__name__ == "TiedDiffusionPipeline"


def test_flux2_pipeline_and_block_repos_load_from_their_folders(built, tmp_path):
    from diffusers import DiffusionPipeline, Flux2KleinPipeline
    from diffusers.modular_pipelines import ModularPipelineBlocks
    from huggingface_hub import ModelCard

    from concept_grounding.testing import tiny_flux2_pipeline

    klein = built[0] / "models" / "tied_flux2_klein"
    card = ModelCard.load(klein / "README.md")
    assert 'custom_pipeline="cg-test/tied_flux2_klein"' in card.text and "pipelines/tied_flux2_klein" not in card.text
    tiny_flux2_pipeline(Flux2KleinPipeline).save_pretrained(tmp_path / "tiny")
    pipe = DiffusionPipeline.from_pretrained(tmp_path / "tiny", custom_pipeline=str(klein), trust_remote_code=True)
    assert type(pipe).__name__ == "TiedFlux2KleinPipeline"
    assert (built[0] / "models" / "tied_flux2" / "pipeline.py").is_file()
    block = built[0] / "models" / "tied_diffusion_block"
    card = ModelCard.load(block / "README.md")
    assert "modular-diffusers" in card.data.tags and '"cg-test/tied_diffusion_block"' in card.text
    assert "pipelines/tied_diffusion_block" not in card.text
    assert (
        type(ModularPipelineBlocks.from_pretrained(str(block), trust_remote_code=True)).__name__
        == "TiedDiffusionLoopStep"
    )


def test_bench_model_repo_has_weights_and_a_card_with_results(built):
    from huggingface_hub import ModelCard

    from concept_grounding.models.loading import load_concept_model

    out, bench = built
    folder = out / "models" / "world-cbm-joint"
    assert file_hashes(folder)["model.safetensors"] == file_hashes(bench / "models" / "cbm-joint")["model.safetensors"]
    card = ModelCard.load(folder / "README.md")
    assert card.data.datasets == ["cg-test/bird-world", "cg-test/bird-world-sub"]
    values = {r.metric_type: r.metric_value for r in card.data.eval_results}
    assert values["s_plus"] == 0.25 and values["s_minus"] == 0.75 and values["class_accuracy"] == 1.0
    assert (
        "concept-grounding bench --out bench --image-size 32 --epochs 1 --models 'CBM (joint)' --no-posthoc "
        "--seed 3" in card.text
    )
    assert "| 25.0 | 75.0 |" in card.text
    assert load_concept_model(folder).concept_names == list(load_vocabulary().attributes[:3])


def test_space_repo_carries_the_release_and_ships_its_screenshots(built):
    from huggingface_hub import SpaceCard

    folder = built[0] / "spaces" / "concept-grounding"
    wheel = WHEEL[0].name
    assert (
        (folder / "requirements.txt").read_text().splitlines()[-1]
        == f"concept-grounding[space] @ https://huggingface.co/spaces/cg-test/concept-grounding/resolve/main/wheels/{wheel}"
    )
    assert (folder / "wheels" / wheel).is_file()
    card = SpaceCard.load(folder / "README.md")
    assert card.data.sdk == "gradio" and card.data.app_file == "app.py"
    assert "cg-test/world-cbm-joint" in card.data.models and "cg-test/bird-world" in card.data.datasets
    assert "../../docs" not in card.text
    for link in ("screenshots/tied_diffusion.png", "screenshots/metrics.png"):
        assert link in card.text and (folder / link).is_file()


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--namespace", "my org"], "--namespace: 'my org' is not a valid"),
        (["--namespace", "a--b"], "--namespace: 'a--b' is not a valid"),
        (["--namespace", "me/you"], "--namespace: 'me/you' is not a valid"),
        (["--namespace", "me", "--classes", "017.Cardinal", "Dodo"], "--classes: unknown"),
        (["--namespace", "me", "--size", "8"], "--size: must be an integer >= 32"),
        (["--namespace", "me", "--deviation-rate", "1.5"], "--deviation-rate: must be in .0, 1., got 1.5"),
        (["--namespace", "me", "--train-per-class", "0"], "--train-per-class: must be an integer >= 1"),
    ],
)
def test_bad_names_and_settings_stop_before_any_work(tmp_path, argv, message):
    out = tmp_path / "hub"
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        run_publish([*argv, "--out", str(out)])
    assert not out.exists()


def test_a_config_built_in_python_is_checked_before_any_work(tmp_path):
    out = tmp_path / "hub"
    spec = WorldSpec(WorldConfig(image_size=32, class_names=("017.Cardinal", "Dodo")), train_per_class=1)
    with pytest.raises(ValueError, match="--classes: unknown"):
        plan_repos(PublishConfig("me", out, spec))
    assert not out.exists()


def test_bench_folder_must_be_a_bench_run(tmp_path):
    (tmp_path / "notbench").mkdir()
    with pytest.raises(ValueError, match="--bench: .* is not a finished `concept-grounding bench` folder"):
        run_publish(["--namespace", "me", "--out", str(tmp_path / "hub"), "--bench", str(tmp_path / "notbench")])
    assert not (tmp_path / "hub").exists()


def test_out_folder_with_unrelated_files_is_refused_and_left_alone(tmp_path):
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "chapter1.tex").write_text("precious")
    with pytest.raises(ValueError, match=f"--out: {out} is not empty and was not made by `concept-grounding publish`"):
        run_publish(["--namespace", "me", "--out", str(out), *TINY])
    assert [p.name for p in out.iterdir()] == ["chapter1.tex"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        run_publish(["--namespace", "me", "--out", str(tmp_path / "file"), *TINY])


def test_push_without_a_token_stops_before_any_work(tmp_path, monkeypatch):
    import huggingface_hub

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    with pytest.raises(ValueError, match="--push: no Hugging Face token"):
        run_publish(["--namespace", "me", "--out", str(tmp_path / "hub"), "--push", *TINY])
    assert not (tmp_path / "hub").exists()


# --------------------------------------------------------------------------- push (mocked)
class FakeHub:
    """Records calls like HfApi, and keeps each repo's files by content hash the way
    ``create_commit`` compares them: a file whose hash the repo already has is not uploaded."""

    def __init__(self, fail_on_upload: int | None = None):
        self.repos: dict[tuple[str, str], dict[str, str]] = {}
        self.created: list[dict] = []
        self.uploaded: list[tuple[str, list[str]]] = []
        self.fail_on_upload = fail_on_upload

    def create_repo(self, **kwargs):
        self.created.append(kwargs)
        assert kwargs["exist_ok"] is True
        self.repos.setdefault((kwargs["repo_type"], kwargs["repo_id"]), {})

    def upload_folder(self, *, repo_id, repo_type, folder_path, commit_message):
        if self.fail_on_upload is not None and len(self.uploaded) == self.fail_on_upload:
            raise ConnectionError("network dropped")
        remote = self.repos[(repo_type, repo_id)]
        local = file_hashes(Path(folder_path))
        changed = sorted(p for p, h in local.items() if remote.get(p) != h)
        remote.update(local)
        self.uploaded.append((repo_id, changed))
        return f"https://huggingface.co/{repo_id}/commit/{len(self.uploaded)}" if changed else None


def test_push_creates_every_repo_and_a_rerun_uploads_nothing(tmp_path, monkeypatch):
    import huggingface_hub

    hub = FakeHub()
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda token: hub)
    argv = ["--namespace", "cg-test", "--out", str(tmp_path / "hub"), "--push", "--token", "hf_x", "--private", *TINY]
    assert run_publish(argv) == 0
    assert {(c["repo_type"], c["repo_id"].split("/")[1]) for c in hub.created} == CORE_REPOS
    assert all(c["private"] is True for c in hub.created)
    assert all(c.get("space_sdk") == "gradio" for c in hub.created if c["repo_type"] == "space")
    assert all(changed for _, changed in hub.uploaded)
    first = len(hub.uploaded)
    assert run_publish(argv) == 0  # rebuilt from scratch: byte-identical files, nothing to upload
    assert [changed for _, changed in hub.uploaded[first:]] == [[]] * first


def test_interrupted_push_finishes_when_rerun(tmp_path, monkeypatch):
    import huggingface_hub

    hub = FakeHub(fail_on_upload=3)
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda token: hub)
    argv = ["--namespace", "cg-test", "--out", str(tmp_path / "hub"), "--push", "--token", "hf_x", *TINY]
    with pytest.raises(ConnectionError):
        run_publish(argv)
    assert len(hub.uploaded) == 3
    hub.fail_on_upload = None
    assert run_publish(argv) == 0
    done = dict(hub.uploaded[3:])
    assert len(done) == len(CORE_REPOS)
    assert [done[r] for r, _ in hub.uploaded[:3]] == [[], [], []]  # already there: nothing re-sent
    assert all(done[r] for r in done if r not in {r for r, _ in hub.uploaded[:3]})


def test_push_repos_passes_folders_exactly_as_built(tmp_path):
    config = PublishConfig(
        "cg-test",
        tmp_path / "hub",
        WorldSpec(WorldConfig(image_size=32, class_names=CLASSES), train_per_class=1, test_per_class=1),
        wheel=WHEEL[0],
    )
    repos = build_repos(config, plan_repos(config))
    hub = FakeHub()
    results = push_repos(repos, "cg-test", config.out, hub, version=__version__)
    assert [r.repo_id for r in results] == [f"cg-test/{r.name}" for r in repos]
    for repo, (_, changed) in zip(repos, hub.uploaded):
        assert changed == sorted(file_hashes(repo.folder(config.out)))


def test_world_flux_is_published_with_its_card_when_shipped(tmp_path):
    """A shipped world Flux (here a tiny one) becomes a model repo that loads as Flux and with TDG."""
    from dataclasses import replace

    from diffusers import DiffusionPipeline, FluxPipeline
    from huggingface_hub import ModelCard

    from concept_grounding.publish.sources import find_sources
    from concept_grounding.testing import tiny_flux_pipeline

    flux = tmp_path / "world_flux"
    tiny_flux_pipeline(FluxPipeline).save_pretrained(flux)
    (flux / "README.md").write_text(
        "---\nlicense: apache-2.0\n---\n# World Flux\n\nTrained with `concept-grounding "
        "train-flux --seed 0`; species agreement 12 %.\n"
    )
    sources = replace(find_sources(), world_flux=flux)
    config = PublishConfig(
        "cg-test",
        tmp_path / "hub",
        WorldSpec(WorldConfig(image_size=32, class_names=CLASSES), train_per_class=1, test_per_class=1),
        wheel=WHEEL[0],
    )
    plan = [
        p for p in plan_repos(config, sources) if p.repo.name in ("world-flux", "tied_diffusion", "concept-grounding")
    ]
    build_repos(config, plan)
    folder = tmp_path / "hub" / "models" / "world-flux"
    shipped = {k: v for k, v in file_hashes(flux).items() if k != "README.md"}
    assert {k: v for k, v in file_hashes(folder).items() if k != "README.md"} == shipped
    card = ModelCard.load(folder / "README.md")
    assert card.data.library_name == "diffusers" and card.data.pipeline_tag == "text-to-image"
    assert "train-flux --seed 0" in card.text and 'custom_pipeline="cg-test/tied_diffusion"' in card.text
    space = (tmp_path / "hub" / "spaces" / "concept-grounding" / "README.md").read_text()
    assert "cg-test/world-flux" in space
    assert type(DiffusionPipeline.from_pretrained(folder)).__name__ == "FluxPipeline"

    tdg = DiffusionPipeline.from_pretrained(
        folder, custom_pipeline=str(tmp_path / "hub" / "models" / "tied_diffusion"), trust_remote_code=True
    )
    assert type(tdg).__name__ == "TiedDiffusionPipeline"
