"""``concept-grounding bench`` end to end on a tiny world, and its real-data path on the
world's CUB_200_2011 / SUB exports."""

import json

import pytest

from concept_grounding.bench import BenchConfig, run_bench
from concept_grounding.world import BirdWorld, WorldConfig

TINY = dict(world=WorldConfig(image_size=32), train_per_class=2, test_per_class=1, epochs=1, clip_epochs=1)
CLASSES = ("017.Cardinal", "073.Blue_Jay", "019.Gray_Catbird", "129.Song_Sparrow", "186.Cedar_Waxwing")


@pytest.fixture(scope="module")
def world_run(bench_run):
    """The session's small bench run (tests/conftest.py): its folder and results."""
    return bench_run.files.root, bench_run.results


def test_report_folder(world_run):
    out, results = world_run
    for name in (
        "report.md",
        "results.json",
        "config.json",
        "coam_gallery.png",
        "cgim_histograms.png",
        "sub_cbm-ind.png",
        "sub_cbm-ind_per_group.png",
        "sub_cbm-ind_per_class.png",
    ):
        assert (out / name).is_file(), name
    assert json.loads((out / "config.json").read_text())["train_per_class"] == 2
    report = (out / "report.md").read_text()
    assert "Table 1" in report and "Table 2" in report and "Concept location" in report
    assert (out / "models" / "cbm-ind" / "model.safetensors").is_file()
    from concept_grounding.eval_results import model_folder_name, read_eval_results

    hub = read_eval_results(out)  # every Table 1 / 2 model, in the Hub's .eval_results format
    rows = {r["name"]: r for r in results["table1"] + results["table2"]}
    assert set(hub) == {model_folder_name(n) for n in rows}
    for name, row in rows.items():
        values = {e["dataset"]["task_id"]: e["value"] for e in hub[model_folder_name(name)]["bench"]}
        assert values["s_plus"] == row["s_plus"] and values["s_minus"] == row["s_minus"]
        assert {e["dataset"]["id"] for e in hub[model_folder_name(name)]["bench"]} == {"bird-world-sub"}


def test_known_answers_on_the_world(world_run):
    """An oracle that reads the true concepts gets s+ = s- = 1; a model that recites the
    class-level vector gets s+ = 0 (SUB pairs each class only with attributes it lacks)."""
    _, results = world_run
    rows = {r["name"]: r for r in results["table1"]}
    oracle = rows["oracle: true concepts"]
    assert oracle["s_plus"] == 1.0 and oracle["s_minus"] == 1.0 and oracle["concept_accuracy_exact"] == 1.0
    assert rows["class prior: recites class-level labels"]["s_plus"] == 0.0
    for name in ("CBM (ind.)", "CBM (joint)", "CEM", "post-hoc CBM"):
        assert 0.0 <= rows[name]["s_plus"] <= 1.0 and 0.0 <= rows[name]["s_minus"] <= 1.0
    (clip_row,) = results["table2"]
    assert 0.0 < clip_row["chance_s_plus"] < 0.2
    assert results["ccd"]["oracle"] == "CBM (joint)"
    assert -1.0 <= results["ccd"]["per_concept"]["ccd"] <= 1.0


def test_real_data_path_on_the_world_exports(tmp_path):
    """--cub-root / --sub run through load_cub / load_sub, exactly as on real CUB + SUB."""
    from concept_grounding.loaders import write_cub, write_sub

    world = BirdWorld(WorldConfig(image_size=32, class_names=("017.Cardinal", "073.Blue_Jay", "019.Gray_Catbird")))
    write_cub(world.to_dataset_dict(3, 1), tmp_path / "CUB_200_2011")
    write_sub(world.sub_dataset(per_pairing=1), tmp_path / "SUB")
    config = BenchConfig(
        models=("CBM (ind.)",),
        posthoc=False,
        clip=False,
        concepts="all",
        cub_root=str(tmp_path / "CUB_200_2011"),
        sub=str(tmp_path / "SUB"),
        min_class_count=None,
        **TINY,
    )
    results = run_bench(config, tmp_path / "out")
    assert results["source"] == "cub"
    (row,) = results["table1"][1:]  # after the class-prior reference row
    assert row["name"] == "CBM (ind.)" and row["n_s_plus"] > 0 and row["n_s_minus"] > 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(models=("CBM (magic)",)), "unknown variant"),
        (dict(concepts="some"), "concepts must be"),
        (dict(epochs=0), "epochs must be >= 1"),
        (
            dict(world=WorldConfig(class_names=("017.Cardinal",))),
            "world.class_names: a bench run needs at least 2 different classes",
        ),
    ],
)
def test_bad_config(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BenchConfig(**kwargs)


def test_finding_without_a_measured_s_plus_warns_nothing(recwarn):
    """A run where no CBM could measure s+ says so in the report without a NumPy warning
    (that printed a source path)."""
    from concept_grounding.bench.report import finding

    rows = [{"name": "CBM (ind.)", "s_plus": float("nan"), "chance_s_plus": 0.5}]
    assert "mean s+ is" in finding(rows) and not recwarn.list


def test_cub_without_sub_is_a_clear_error(tmp_path):
    from concept_grounding.loaders import write_cub

    world = BirdWorld(WorldConfig(image_size=32, class_names=("017.Cardinal", "073.Blue_Jay")))
    write_cub(world.to_dataset_dict(1, 1), tmp_path / "CUB_200_2011")
    with pytest.raises(ValueError, match="needs --sub"):
        run_bench(BenchConfig(cub_root=str(tmp_path / "CUB_200_2011"), **TINY), tmp_path / "out")


def test_unknown_clip_model_is_a_clear_error(tmp_path):
    config = BenchConfig(models=(), posthoc=False, clip_model="no-such-model-anywhere", **TINY)
    with pytest.raises((ValueError, OSError), match="no-such-model"):
        run_bench(config, tmp_path / "out")


def _run_with_ambient_threads(threads: int, config: BenchConfig, out):
    """``run_bench`` from a process whose torch uses ``threads`` threads (as a fresh process
    on a machine with that many cores would); returns the thread count it left behind."""
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        run_bench(config, out)
        return torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_same_seed_writes_identical_results(tmp_path):
    """Two runs with one seed write the same results.json and the same model weights, byte for
    byte, although the callers' thread counts differ (1 vs 3); the caller's count is restored."""
    config = BenchConfig(
        models=("CBM (ind.)", "CEM"),
        **{**TINY, "world": WorldConfig(image_size=32, class_names=CLASSES[:3]), "epochs": 2},
    )
    assert _run_with_ambient_threads(1, config, tmp_path / "a") == 1
    assert _run_with_ambient_threads(3, config, tmp_path / "b") == 3
    first, second = (tmp_path / "a" / "results.json").read_bytes(), (tmp_path / "b" / "results.json").read_bytes()
    assert first == second
    for weights in sorted((tmp_path / "a" / "models").glob("*/model.safetensors")):
        assert weights.read_bytes() == (tmp_path / "b" / weights.relative_to(tmp_path / "a")).read_bytes(), weights
    timings = json.loads((tmp_path / "a" / "timings.json").read_text())
    assert timings["environment"]["torch_threads"] == config.threads
    assert set(timings["model_seconds"]) == set(config.models)


def test_threads_must_be_positive():
    with pytest.raises(ValueError, match="threads must be >= 1"):
        BenchConfig(threads=0)


def test_artifacts_contract_reads_back_the_run(world_run):
    """BenchArtifacts names every output of the run and loads it back: the config equals
    the one that ran, results.json the returned results, each saved model its predictions."""
    from concept_grounding.bench.artifacts import POSTHOC_MODEL, BenchArtifacts
    from concept_grounding.models import predict

    out, results = world_run
    files = BenchArtifacts(out)
    assert files.exists() and files.report_md.is_file() and files.timings_json.is_file()
    assert files.load_config() == BenchConfig(
        models=("CBM (ind.)", "CBM (joint)", "CEM"),
        **{**TINY, "world": WorldConfig(image_size=32, class_names=CLASSES)},
    )
    saved = files.load_results()
    assert [(r["name"], r["s_plus"], r["s_minus"]) for r in saved["table1"]] == [
        (r["name"], r["s_plus"], r["s_minus"]) for r in results["table1"]
    ]
    assert saved["concepts"] == results["concepts"]
    assert files.saved_models() == ["cbm-ind", "cbm-joint", "cem", POSTHOC_MODEL, "world-clip"]
    assert files.breakdown_plot("CBM (ind.)", "group").is_file() and files.plot("coam_gallery.png").is_file()
    assert files.first_model("CBM (seq.)", "CBM (joint)") == "CBM (joint)"
    model = files.load_model("CBM (joint)")
    assert type(model).__name__ == "ConceptBottleneckModel" and not model.training
    import torch

    images = torch.rand(2, 3, files.image_size(), files.image_size())
    assert predict(model, images).concept_probs.shape == (2, len(results["concepts"]))
    with pytest.raises(FileNotFoundError, match="no saved model 'CBM \\(seq.\\)'"):
        files.load_model("CBM (seq.)")
    with pytest.raises(FileNotFoundError, match="not a `concept-grounding bench` output folder|not found"):
        BenchArtifacts(out / "nowhere").load_results()


def test_model_variants_are_frozen_dataclasses():
    from dataclasses import FrozenInstanceError

    from concept_grounding.bench.config import MODEL_VARIANTS

    spec = MODEL_VARIANTS["CBM (per c.)"]
    assert (spec.family, spec.mode, spec.labels, spec.bottleneck, spec.per_concept) == (
        "cbm",
        "independent",
        "class",
        "hard",
        True,
    )
    assert MODEL_VARIANTS["CEM"].mode is None
    with pytest.raises(FrozenInstanceError):
        spec.mode = "joint"
    with pytest.raises(TypeError):
        MODEL_VARIANTS["new"] = spec


def test_the_space_loads_the_saved_run_at_its_own_image_size(bench_run):
    """A real ``concept-grounding bench`` folder: the Space finds its models through
    BenchArtifacts and feeds them the run's image size (config.json), not the store's."""
    from concept_grounding.space import tab_concepts, tab_sub
    from concept_grounding.space.builds import SpaceBuild
    from concept_grounding.space.resources import ResourceStore

    files = bench_run.files
    assert files.image_size() == 32
    other = ResourceStore(artifacts=files.root, image_size=64, build=SpaceBuild.tiny())
    model, size = other.get("concept_model", tab_sub.build_concept_model)
    assert size == 32 and other.status()["concept_model"][0] == f"loaded from {files.model_dir('CBM (joint)')}"
    assert list(model.concept_names) == list(files.load_model("CBM (joint)").concept_names)
    posthoc, posthoc_size = other.get("posthoc_cbm", tab_concepts.build_posthoc)
    assert posthoc_size == 32 and posthoc.theta.shape[1] == 5  # the bench's five classes


def test_a_config_saved_with_the_removed_extra_key_still_loads():
    """config.json files written before ``BenchConfig.extra`` went carry ``"extra": {}``."""
    config = BenchConfig(WorldConfig(image_size=64, class_names=CLASSES))
    old = {**config.to_dict(), "extra": {}}
    assert BenchConfig.from_dict(old) == config
    with pytest.raises(ValueError, match="unknown key"):
        BenchConfig.from_dict({**old, "extras": {}})


def test_config_json_keeps_the_flat_keys_and_round_trips(world_run):
    """The world's settings are saved as the flat ``image_size`` / ``seed`` / ``deviation_rate`` /
    ``classes`` keys in their places before the world was nested; a changed drawing setting
    follows them, and every config reads back equal."""
    from concept_grounding.bench.config import SAVED_KEYS

    out, _ = world_run
    saved = json.loads((out / "config.json").read_text())
    assert list(saved) == list(SAVED_KEYS)
    assert (saved["image_size"], saved["seed"], saved["classes"]) == (32, 0, list(CLASSES))
    config = BenchConfig(WorldConfig(image_size=48, seed=5, deviation_rate=0.0, pose="canonical"), models=("CEM",))
    d = config.to_dict()
    assert list(d) == [*SAVED_KEYS, "pose"] and d["deviation_rate"] == 0.0 and d["classes"] is None
    assert BenchConfig.from_dict(json.loads(json.dumps(d))) == config
    assert config.train.seed == 5


def test_table2_scores_several_named_models_in_one_run_with_chance_for_every_column(tmp_path):
    """``clip_model`` takes several models (two saved world CLIPs here), each a
    Table 2 row; the chance row has every column (SUB App. F applied to the CUB labels)."""
    import numpy as np
    import torch

    from concept_grounding.bench.tables import group_mode_chance
    from concept_grounding.models.clip import WorldCLIP
    from concept_grounding.vocabulary import load_vocabulary

    folders = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        model = WorldCLIP(
            words=["a", "photo", "of", "bird", "with"],
            image_size=32,
            embed_dim=16,
            vision_width=16,
            text_width=16,
            head_width=8,
            vision_layers=1,
            text_layers=1,
        )
        model.save_pretrained(tmp_path / f"clip{seed}")
        folders.append(str(tmp_path / f"clip{seed}"))
    world = WorldConfig(image_size=32, class_names=CLASSES)
    config = BenchConfig(
        models=(),
        posthoc=False,
        clip_model=tuple(folders),
        world=world,
        **{k: v for k, v in TINY.items() if k != "world"},
    )
    results = run_bench(config, tmp_path / "out")
    rows = results["table2"]
    assert [r["name"] for r in rows] == ["world CLIP (trained here)", *folders]
    vocab = load_vocabulary()
    columns = [vocab.attribute_index(a) for a in results["concepts"]]
    test = BirdWorld(world).to_dataset_dict(TINY["train_per_class"], TINY["test_per_class"], progress=False)["test"]
    sizes = [len(vocab.groups[vocab.group_of(i)]) for i in columns]
    for key, labels in (
        ("class_attributes", "chance_concept_accuracy"),
        ("attributes", "chance_concept_accuracy_exact"),
    ):
        expected = group_mode_chance(np.asarray(test[key])[:, columns], sizes)
        assert all(r[labels] == pytest.approx(expected) for r in rows)
    table2 = (tmp_path / "out" / "report.md").read_text().split("## Table 2")[1]
    chance_line = next(line for line in table2.splitlines() if line.startswith("| random chance"))
    assert "nan" not in chance_line and f"{100 * rows[0]['chance_concept_accuracy']:.1f}" in chance_line


def test_soft_label_rows(tmp_path):
    """Table 1's annotator-certainty weighted rows. On the world every annotation is
    certain (certainty 4), so the soft per-image labels are the hard ones and the soft model is
    the hard one, number for number; the soft per-class labels are the class means."""
    import numpy as np

    from concept_grounding.bench.context import Split as _Split
    from concept_grounding.bench.data import class_soft_labels

    models = ("CBM (ind., per-img.)", "CBM (ind., soft per-img.)", "CBM (joint, soft per-class)")
    world = WorldConfig(image_size=32, class_names=CLASSES)
    config = BenchConfig(
        models=models, posthoc=False, clip=False, world=world, **{k: v for k, v in TINY.items() if k != "world"}
    )
    rows = {r["name"]: r for r in run_bench(config, tmp_path / "out")["table1"]}
    keys = ("s_plus", "s_minus", "concept_accuracy", "concept_accuracy_sub")
    assert [rows[models[0]][k] for k in keys] == [rows[models[1]][k] for k in keys]
    assert models[2] in rows and all(np.isfinite(rows[models[2]][k]) for k in ("s_plus", "s_minus"))
    train = BirdWorld(world).to_dataset_dict(2, 1, progress=False)["train"]
    split = _Split(train, (0, 1, 2), 32)
    assert np.array_equal(split.concepts("image_soft"), split.concepts("image"))
    labels = np.asarray(train["label"])
    expected = np.stack([split.image_concepts[labels == c].mean(0) for c in labels]).astype(np.float32)
    assert np.allclose(split.concepts("class_soft"), expected)
    assert np.allclose(class_soft_labels(split.image_concepts, labels, len(CLASSES)), expected)


def test_table1_chance_row_has_every_column(world_run):
    """Chance beside every Table 1 column (a coin per binary concept; 1 / C classes)."""
    out, _ = world_run
    table1 = (out / "report.md").read_text().split("## Table 1")[1].split("## ")[0]
    header = next(line for line in table1.splitlines() if line.startswith("| model"))
    chance = next(line for line in table1.splitlines() if line.startswith("| random chance"))
    cells = [c.strip() for c in chance.strip("|").split("|")]
    assert len(cells) == header.count("|") - 1 and all(cells)
    assert cells[1:] == ["50.0"] * (len(cells) - 2) + [f"{100 / len(CLASSES):.1f}"]


def test_the_job_writes_the_same_report_when_saved_again(bench_run, tmp_path):
    """The bench job: ``run_bench_job`` wrote the models as it went, ``save`` the
    report; saving the result again elsewhere writes the same results.json and report.md."""
    again = bench_run.result.save(tmp_path)
    assert again == tmp_path / "report.md"
    for name in ("results.json", "report.md", "timings.json", "sub_cbm-ind.png"):
        assert (tmp_path / name).read_bytes() == (bench_run.files.root / name).read_bytes(), name
    assert not (tmp_path / "models").exists()  # the models belong to the run, not to the report


def test_the_job_needs_its_run_folder():
    from concept_grounding.bench import run_bench_job

    with pytest.raises(ValueError, match="out: a bench run writes its models as it goes"):
        run_bench_job(BenchConfig(**TINY))
