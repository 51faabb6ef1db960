"""ConceptBed on concept folders (real concepts): our layout and ConceptBed's published one, with
oracles trained on the folder and validated on its held-out real images."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from PIL import Image

from concept_grounding.cli import main
from concept_grounding.conceptbed import (
    ConceptBedConfig,
    ConceptWorld,
    export_world_concepts,
    run_conceptbed,
    task_species,
)
from concept_grounding.conceptbed.folder import folder_concepts, folder_oracle
from concept_grounding.judge.conceptbed_spec import CONCEPTBED_BAR
from concept_grounding.vocabulary import load_vocabulary

CLASSES = task_species(load_vocabulary(), "object")[:3]
SMALL = dict(concepts=3, m=4, images=5, capacity="medium", oracle_epochs=20, learners=("Original",))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Three held-out species of the world written as a concept folder (4 train, 10 real each)."""
    root = tmp_path_factory.mktemp("concepts")
    cw = ConceptWorld(m=4, real=10, classes=CLASSES)
    export_world_concepts(root, cw.concepts("object", 3))
    return root


def test_a_concept_folder_runs_with_its_own_validated_oracle(folder):
    result = run_conceptbed(ConceptBedConfig(concept_folder=str(folder), tasks=("object",), **SMALL))
    r = result.results
    assert r["oracles"]["object"]["accuracy"] >= 0.95
    assert r["table1"]["Original"]["object"] == pytest.approx(0.0, abs=1e-12)
    assert r["concepts"]["object"] == sorted(r["concepts"]["object"], key=CLASSES.index)


def test_conceptbeds_published_layout(tmp_path):
    """``pacs/<domain>/<class>/*``: two domains drawn as flat colours with noise (an oracle tells them apart)."""
    rng = np.random.default_rng(0)
    for domain, colour in (("cartoon", (220, 40, 40)), ("sketch", (40, 40, 220))):
        folder = tmp_path / "pacs" / domain / "dog"
        folder.mkdir(parents=True)
        for i in range(14):  # 4 to learn from, 10 real (5 train the oracle, 5 held out)
            pixels = np.clip(np.array(colour) + rng.normal(0, 20, (40, 48, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{i:02d}.png")
    result = run_conceptbed(ConceptBedConfig(concept_folder=str(tmp_path), tasks=("domain",), **SMALL))
    assert result.results["oracles"]["domain"]["accuracy"] == 1.0
    assert result.results["table1"]["Original"]["domain"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    ("args", "argument"),
    [
        (["--tasks", "fine_grained_attribute"], "--tasks"),
        (["--tasks", "object", "composition"], "--tasks"),
        (["--learners", "exact"], "--learners"),
    ],
)
def test_what_a_folder_cannot_give_is_one_line(folder, tmp_path, capsys, args, argument):
    out = tmp_path / "o"
    assert main(["conceptbed", "--concept-folder", str(folder), "--out", str(out), "--m", "4", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and argument in err[0] and not out.exists()


# --- ConceptBed's published layout built from world renders: imagenet/<species>/, pacs/<style>/<species>/ ---


def _save(folder, images, start=0):
    folder.mkdir(parents=True, exist_ok=True)
    for i, image in enumerate(images, start):
        Image.fromarray(image).save(folder / f"{i:02d}.png")


def published_folder(root, per_concept, classes=CLASSES):
    """``imagenet/<species>/`` (``per_concept`` renders each) and ``pacs/<style>/<species>/`` (two
    styles, two species, ``per_concept // 2`` stylised renders each): ConceptBed's layout, world images."""
    cw = ConceptWorld(m=per_concept, real=1, classes=classes)
    for concept in cw.concepts("object", len(classes)):
        _save(root / "imagenet" / concept.name, concept.train)
    for style in ("cartoon", "sketch"):
        for label in (0, 1):
            images = cw.styled([label], style, per_concept // 2, "concept_train")
            _save(root / "pacs" / style / classes[label].split(".", 1)[1], images)
    return root


@pytest.fixture(scope="module")
def twelve(tmp_path_factory):
    """Twelve images a concept: with the default --m 8, 4 real (2 train the oracle, 2 held out)."""
    return published_folder(tmp_path_factory.mktemp("twelve"), 12)


def no_training(monkeypatch):
    """Fail the test if any oracle trains."""

    def refuse(*args, **kwargs):
        raise AssertionError("an oracle trained before the checks")

    monkeypatch.setattr("concept_grounding.conceptbed.folder.train_classifier", refuse)


def test_twelve_images_a_concept_run_to_the_report(twelve, tmp_path, capsys):
    """The default --m 8 leaves 2 held-out real images: the rating items show them and a training image.
    With no --tasks the run takes the folder's own tasks (imagenet/: object, pacs/: domain; no cub/)."""
    out = tmp_path / "o"
    args = ["conceptbed", "--concept-folder", str(twelve), "--out", str(out), "--learners", "Original"]
    assert main([*args, "--images", "4"]) == 0, capsys.readouterr().err
    # the default --concepts 4 asks more than either task holds: each scores every concept it holds, said so
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("--concepts 4: ")]
    assert said == [
        "--concepts 4: domain holds 2 concept(s); its cells score those 2",
        "--concepts 4: object holds 3 concept(s); its cells score those 3",
    ]
    items = [json.loads(line) for line in (out / "ratings" / "items.jsonl").read_text().splitlines()]
    assert items and all(len(item["references"]) == 3 for item in items if item["kind"] == "concept")
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["tasks"] == ["domain", "object"]
    assert results["table1"]["Original"] == {"object": 0.0, "domain": 0.0}
    assert results["short_tasks"] == {"domain": 2, "object": 3} and len(results["concepts"]["object"]) == 3
    assert (
        "Fewer concepts than --concepts 4 (every one it holds): domain 2, object 3." in (out / "report.md").read_text()
    )
    # each oracle's schedule (the epochs that met the bar) and accuracy, in results.json and the report
    report = (out / "report.md").read_text()
    for task, oracle in results["oracles"].items():
        assert oracle["epochs"] in (8, 16, 32, 64) and oracle["accuracy"] >= CONCEPTBED_BAR
        assert f"- {task}: {oracle['kind']} oracle (medium, {oracle['epochs']} epochs), " in report


def test_pacs_prompts_name_each_class(twelve):
    found = folder_concepts(twelve, 8, 32, ("domain",))["domain"]
    assert [c.name for c in found] == ["cartoon", "sketch"]
    names = [c.split(".", 1)[1].replace("_", " ") for c in CLASSES[:2]]
    assert found[0].prompts == tuple(f"a photo of a {n} in the style of V*" for n in names)


@pytest.mark.parametrize(
    ("args", "flag", "path"),
    [
        (["--tasks", "object", "--m", "13"], "--m", "imagenet/001.Black_footed_Albatross"),  # 12 images, 13 to train
        (["--tasks", "object", "--m", "11"], "--m", "imagenet/001.Black_footed_Albatross"),  # leaves 1 real image
        (
            ["--tasks", "object", "--m", "1", "--real", "1"],
            "--real",
            "imagenet/001.Black_footed_Albatross",
        ),  # 2 references of 3
        (["--tasks", "fine_grained_object"], "--concept-folder", ""),  # no cub/ folder
    ],
)
def test_counts_are_refused_before_any_training(twelve, tmp_path, capsys, monkeypatch, args, flag, path):
    no_training(monkeypatch)
    out = tmp_path / "o"
    assert main(["conceptbed", "--concept-folder", str(twelve), "--out", str(out), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"error: {flag}: " in err[0] and not out.exists(), err
    named = str(twelve / path).rstrip("/")
    assert f"{named}:" in err[0] and (twelve / path).exists(), err


def test_one_concept_names_the_folder_that_lists_it(tmp_path, capsys, monkeypatch):
    no_training(monkeypatch)
    root = published_folder(tmp_path / "one", 12)
    shutil.rmtree(root / "pacs" / "sketch")
    assert main(["conceptbed", "--concept-folder", str(root), "--out", str(tmp_path / "o"), "--tasks", "domain"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("or choose --tasks among ['object']") and f"--concept-folder: {root / 'pacs'}: 1 domain" in err


def test_our_layout_without_real_images_names_its_concept_folder(tmp_path, capsys, monkeypatch):
    no_training(monkeypatch)
    cw = ConceptWorld(m=4, real=2, classes=CLASSES[:2])
    export_world_concepts(tmp_path / "c", cw.concepts("object", 2))
    concept = tmp_path / "c" / "object" / CLASSES[1]
    shutil.rmtree(concept / "real")
    args = ["--concept-folder", str(tmp_path / "c"), "--tasks", "object", "--m", "4"]
    assert main(["conceptbed", *args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--concept-folder: {concept}: 0 real image(s) in real/" in err


def test_an_unreadable_image_is_refused_before_any_training(tmp_path, capsys, monkeypatch):
    no_training(monkeypatch)
    root = published_folder(tmp_path / "bad", 12)
    bad = root / "imagenet" / CLASSES[2] / "05.png"
    bad.write_bytes(b"not a png")
    assert main(["conceptbed", "--concept-folder", str(root), "--out", str(tmp_path / "o"), "--tasks", "object"]) == 2
    assert f"error: --concept-folder: {bad}: not a readable image" in capsys.readouterr().err


def test_the_oracle_trains_until_it_meets_its_bar(tmp_path):
    """Fourteen renders a concept: 8 epochs reach 77.8 % on the 9 held-out images, 16 reach the bar."""
    root = published_folder(tmp_path / "fourteen", 14)
    found = folder_concepts(root, 8, 32, ("object",))["object"]
    oracle, held = folder_oracle("object", found, "medium", 8, 0)
    assert oracle.spec.epochs == 16 and oracle.accuracy >= CONCEPTBED_BAR
    assert sum(map(len, held.values())) == 9


def test_an_oracle_below_its_bar_says_what_it_reached_before_any_learner(tmp_path, capsys, monkeypatch):
    """Two concepts of the same noise: no schedule tells them apart, and no learner is made."""

    def no_learner(*args, **kwargs):
        raise AssertionError("a learner ran")

    monkeypatch.setattr("concept_grounding.conceptbed.job.make_learner", no_learner)
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        _save(tmp_path / "noise" / "imagenet" / name, rng.integers(0, 256, (12, 16, 16, 3), dtype=np.uint8))
    args = ["--concept-folder", str(tmp_path / "noise"), "--tasks", "object", "--oracle-epochs", "1"]
    assert main(["conceptbed", *args, "--out", str(tmp_path / "o"), "--image-size", "16"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(err) == 1 and "--oracle-epochs: the object oracle (medium) reaches " in err[0]
    assert " at 1, " in err[0] and " at 8 epochs on 4 held-out real images" in err[0]
    assert "(tried up to 8 epochs)" in err[0] and not (tmp_path / "o").exists()


def test_a_flux_learner_accepts_the_runs_m(monkeypatch, tmp_path):
    """The learners' own floor of images is the run's --m, so --m 4 trains (it was refused at 8)."""
    pytest.importorskip("peft")
    from concept_grounding.conceptbed.learners import FluxLearner

    seen = {}

    def learn(config, out):
        seen["min_images"] = config.min_images
        raise StopIteration

    monkeypatch.setattr("concept_grounding.learners.learn", learn)
    concept = ConceptWorld(m=4, real=2, classes=CLASSES[:1]).concepts("object", 1)[0]
    with pytest.raises(StopIteration):
        FluxLearner("LoRA").fit(concept, tmp_path)
    assert seen == {"min_images": 4}


def test_real_caps_the_real_images_a_folder_concept_reads(twelve):
    """--real 1: two real images (one trains the oracle, one is held out) of the four after --m 8."""
    capped = folder_concepts(twelve, 8, 32, ("object",), real=1)["object"]
    every = folder_concepts(twelve, 8, 32, ("object",))["object"]
    assert [len(c.real) for c in capped] == [2, 2, 2] and [len(c.real) for c in every] == [4, 4, 4]
    assert np.array_equal(capped[0].real, every[0].real[:2]) and np.array_equal(capped[0].train, every[0].train)


def test_an_image_size_the_learners_flux_cannot_draw_is_refused_before_any_training(
    twelve, tmp_path, capsys, monkeypatch
):
    pytest.importorskip("peft")
    no_training(monkeypatch)
    args = ["--concept-folder", str(twelve), "--tasks", "object", "--learners", "LoRA", "--image-size", "30"]
    assert main(["conceptbed", *args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--image-size: 30 px: " in err[0] and err[0].endswith("; use 28 or 32"), err


def test_a_concept_of_mixed_image_sizes_is_cropped_and_resized_like_any_other(tmp_path, capsys):
    """Real ImageNet / CUB folders mix sizes within a concept: the run reads each through the one
    centre-crop-and-resize (``folder._square``) and scores them."""
    from concept_grounding.conceptbed.folder import _square

    root = published_folder(tmp_path / "mixed", 12)
    concept = root / "imagenet" / CLASSES[0]
    for name, size in (("01.png", (48, 40)), ("09.png", (64, 64)), ("10.png", (24, 30))):
        with Image.open(concept / name) as image:
            image.resize(size, Image.BICUBIC).save(concept / name)
    found = folder_concepts(root, 8, 32, ("object",))["object"]
    first = next(c for c in found if c.name == CLASSES[0])
    assert first.train.shape == (8, 32, 32, 3) and first.real.shape == (4, 32, 32, 3)
    assert np.array_equal(first.train[1], _square(str(concept / "01.png"), 32))
    out = tmp_path / "o"
    args = ["conceptbed", "--concept-folder", str(root), "--out", str(out), "--learners", "Original"]
    assert main([*args, "--tasks", "object", "--images", "4"]) == 0, capsys.readouterr().err
    assert json.loads((out / "results.json").read_text())["table1"]["Original"] == {"object": 0.0}


def test_an_image_whose_pixels_do_not_decode_is_one_line_naming_it(tmp_path, capsys):
    root = published_folder(tmp_path / "cut", 12)
    bad = root / "imagenet" / CLASSES[1] / "10.png"
    bad.write_bytes(bad.read_bytes()[:120])  # the header opens, the pixels are cut off
    out = tmp_path / "o"
    assert main(["conceptbed", "--concept-folder", str(root), "--out", str(out), "--tasks", "object"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"error: --concept-folder: {bad}: not a readable image" in err[0] and not out.exists()
