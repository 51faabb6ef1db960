"""Pairing planner, per-image seeds, and resumable writing of the TDG generation job."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from concept_grounding import load_vocabulary
from concept_grounding.tdg.generate import finalize, generate_images
from concept_grounding.tdg.generate_config import GenerateConfig
from concept_grounding.tdg.plan import Pairing, chunk_jobs, image_seed, plan_jobs, plan_pairings, read_pairings
from concept_grounding.tdg.resume import check_manifest, generation_manifest
from concept_grounding.tdg.sources import FluxModel

VOCAB = load_vocabulary()


def test_plan_excludes_attributes_the_class_has():
    names = ["073.Blue_Jay", "017.Cardinal"]
    matrix = np.zeros((2, 312), dtype=np.uint8)
    crown = VOCAB.attribute_index("has_crown_color::black")
    blue_crown = VOCAB.attribute_index("has_crown_color::blue")
    matrix[0, crown] = 1  # Blue Jay already has a black crown
    matrix[0, blue_crown] = 1
    pairings = plan_pairings(names, matrix)
    assert len(pairings) == 2 * 32 - 1
    assert Pairing("073.Blue_Jay", "has_crown_color::black") not in pairings
    pink = next(
        p for p in pairings if p.reference_class == "073.Blue_Jay" and p.target_attribute == "has_crown_color::pink"
    )
    assert pink.removed_attributes == ("has_crown_color::blue", "has_crown_color::black")
    with pytest.raises(ValueError, match="shape"):
        plan_pairings(names, matrix[:, :10])
    with pytest.raises(KeyError):
        plan_pairings(["999.Dodo", "017.Cardinal"], matrix)


def test_world_default_plan():
    from concept_grounding.world import BirdWorld

    world = BirdWorld()
    pairings = plan_pairings(world.class_names, world.class_attributes)
    assert len(world.class_names) == 33
    for p in pairings:
        c = world.class_names.index(p.reference_class)
        assert world.class_attributes[c, VOCAB.attribute_index(p.target_attribute)] == 0
    assert 0 < len(pairings) <= 33 * 32


def test_read_pairings_file(tmp_path):
    f = tmp_path / "pairs.txt"
    f.write_text(
        "# comment\nBlue Jay,has_crown_color::yellow\n"
        '{"reference_class": "017.Cardinal", "target_attribute": "has_bill_shape::needle"}\n'
    )
    assert [(p.reference_class, p.target_attribute) for p in read_pairings(f)] == [
        ("073.Blue_Jay", "has_crown_color::yellow"),
        ("017.Cardinal", "has_bill_shape::needle"),
    ]
    f.write_text("Blue Jay,has_crown_color::plaid\n")
    with pytest.raises(ValueError, match="plaid"):
        read_pairings(f)


def test_seeds_are_per_image_and_deterministic():
    a = image_seed(0, "073.Blue_Jay", "has_crown_color::yellow", 3)
    assert a == image_seed(0, "073.Blue_Jay", "has_crown_color::yellow", 3)
    assert len({image_seed(s, "073.Blue_Jay", "has_crown_color::yellow", i) for s in (0, 1) for i in range(50)}) == 100
    assert 0 <= a < 2**63
    jobs = plan_jobs([Pairing("073.Blue_Jay", "has_crown_color::yellow")], 3, base_seed=0)
    assert [j.seed for j in jobs] == [image_seed(0, "073.Blue_Jay", "has_crown_color::yellow", i) for i in range(3)]


def test_chunks_never_mix_pairings():
    jobs = plan_jobs(
        [Pairing("073.Blue_Jay", "has_crown_color::yellow"), Pairing("017.Cardinal", "has_tail_pattern::solid")], 3
    )
    assert [len(c) for c in chunk_jobs(jobs, 2)] == [2, 1, 2, 1]


JOBS = plan_jobs(
    [
        Pairing("073.Blue_Jay", "has_crown_color::yellow"),
        Pairing("017.Cardinal", "has_tail_pattern::solid", ("has_tail_pattern::striped",)),
    ],
    3,
    base_seed=7,
)
SETTINGS = GenerateConfig(out=Path("unused"), seed=7, num_inference_steps=2, size=16)  # JOBS' base seed
#: the session's tiny Flux as the writer sees it: 32-token prompts, no extra call arguments
FLUX = FluxModel("tiny", "float32", 16, 32, load=lambda: None)


def _generate(pipe, jobs, out, settings=SETTINGS, batch_size=4, process_index=0, num_processes=1, **changes):
    """``generate_images`` of ``settings`` into ``out`` (batch size and other settings replaced)."""
    config = dataclasses.replace(settings, out=out, batch_size=batch_size, **changes)
    return generate_images(
        pipe, jobs, config, FLUX, process_index=process_index, num_processes=num_processes, progress=False
    )


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def pipe(tiny_flux):
    """The session's tiny TiedDiffusionPipeline (conftest ``tiny_flux``, seed 0)."""
    return tiny_flux


@pytest.fixture(scope="module")
def uninterrupted(pipe, tmp_path_factory):
    root = tmp_path_factory.mktemp("full")
    assert _generate(pipe, JOBS, root, SETTINGS, batch_size=2) == 6
    finalize(root, JOBS)
    return root


def test_max_images_writes_that_many_and_the_same_images(pipe, uninterrupted, tmp_path):
    """``generate --max-images 1`` wrote a whole batch (4 images); it writes one,
    the image the full run writes for that job (per-job seeds)."""
    assert _generate(pipe, JOBS, tmp_path, SETTINGS, batch_size=4, max_images=1) == 1
    images = [p.relative_to(tmp_path) for p in tmp_path.rglob("*.png")]
    assert len(images) == 1 and (tmp_path / images[0]).read_bytes() == (uninterrupted / images[0]).read_bytes()


def test_the_progress_bar_does_not_read_as_0_of_1_done(pipe, tmp_path, capsys):
    """The bar was labelled ``TDG images [0/1]`` (process 0 of 1), read as
    "0 of 1 done"; one process shows no process number, several show "process i of n"."""
    config = dataclasses.replace(SETTINGS, out=tmp_path, batch_size=4, max_images=1)
    generate_images(pipe, JOBS, config, FLUX, progress=True)
    err = capsys.readouterr().err
    assert "TDG images:" in err and "[0/1]" not in err, err


def test_resume_after_kill_gives_identical_files(pipe, uninterrupted, tmp_path):
    assert _generate(pipe, JOBS, tmp_path, SETTINGS, batch_size=2, max_images=2) == 2
    # a crash between an image and its sidecar: the sidecar is missing, the image half-written
    part = next((tmp_path / ".tdg_parts").iterdir())
    image = tmp_path / json.loads(part.read_text())["file_name"]
    part.unlink()
    image.write_bytes(b"truncated")
    with pytest.warns(UserWarning, match="not generated yet"):
        finalize(tmp_path, JOBS)
    # the broken chunk (2 images) is redone whole, plus the 4 never started
    assert _generate(pipe, JOBS, tmp_path, SETTINGS, batch_size=2) == 2 + 4
    finalize(tmp_path, JOBS)
    assert _files(tmp_path) == _files(uninterrupted)
    assert _generate(pipe, JOBS, tmp_path, SETTINGS, batch_size=2) == 0


def test_shards_cover_the_plan_once(pipe, uninterrupted, tmp_path):
    written = [
        _generate(pipe, JOBS, tmp_path, SETTINGS, batch_size=2, process_index=i, num_processes=2) for i in range(2)
    ]
    assert sum(written) == 6 and min(written) > 0
    finalize(tmp_path, JOBS)
    assert _files(tmp_path) == _files(uninterrupted)


def test_metadata_and_imagefolder(uninterrupted):
    import datasets

    rows = [json.loads(line) for line in (uninterrupted / "metadata.jsonl").read_text().splitlines()]
    assert [r["file_name"] for r in rows] == [j.file_name for j in JOBS]
    r = rows[3]
    assert r["reference_prompt"] == "A photo of a Cardinal with a solid tail like a Gray Catbird"
    assert r["schedule"] == {"t_min": 0.2, "t_max": 0.6, "k": 10.0}
    assert r["removed_attributes"] == ["has_tail_pattern::striped"] and r["seed"] == JOBS[3].seed
    ds = datasets.load_dataset("imagefolder", data_dir=str(uninterrupted), split="train")
    assert len(ds) == 6 and ds[0]["image"].size == (16, 16)
    assert set(ds.column_names) >= {"image", "reference_class", "target_attribute", "seed"}


def test_prompting_baseline_matches_plain_flux(pipe, tmp_path):
    import torch
    from diffusers import FluxPipeline

    settings = GenerateConfig(out=Path("unused"), method="prompting", num_inference_steps=2, size=16)
    _generate(pipe, JOBS[:1], tmp_path, settings)
    row = json.loads(next((tmp_path / ".tdg_parts").iterdir()).read_text())
    assert row["guide_prompt"] is None and row["method"] == "prompting"
    out = FluxPipeline.__call__(
        pipe,
        prompt=row["reference_prompt"],
        num_inference_steps=2,
        height=16,
        width=16,
        max_sequence_length=32,
        generator=torch.Generator().manual_seed(JOBS[0].seed),
    ).images[0]
    from PIL import Image

    assert np.array_equal(np.asarray(Image.open(tmp_path / JOBS[0].file_name)), np.asarray(out))


def test_saved_guides_stay_out_of_the_imagefolder(pipe, uninterrupted, tmp_path):
    import dataclasses

    import datasets

    settings = dataclasses.replace(SETTINGS, save_guides=True)
    _generate(pipe, JOBS, tmp_path, settings, batch_size=2)
    finalize(tmp_path, JOBS)
    rows = [json.loads(line) for line in (tmp_path / "metadata.jsonl").read_text().splitlines()]
    assert all((tmp_path / r["guide_file_name"]).is_file() for r in rows)
    # the references are the very images an ordinary run makes
    for job in JOBS:
        assert (tmp_path / job.file_name).read_bytes() == (uninterrupted / job.file_name).read_bytes()
    assert len(datasets.load_dataset("imagefolder", data_dir=str(tmp_path), split="train")) == len(JOBS)


# ------------------------------------------------------------------ resume manifest
def test_resume_with_other_settings_stops_and_names_each_difference(pipe, uninterrupted, tmp_path):
    import dataclasses
    import shutil

    from concept_grounding.tdg.resume import MANIFEST_FILE, ManifestMismatchError

    folder = tmp_path / "run"
    shutil.copytree(uninterrupted, folder)
    before = _files(folder)
    assert json.loads((folder / MANIFEST_FILE).read_text())["num_inference_steps"] == 2
    other = dataclasses.replace(SETTINGS, num_inference_steps=3, guidance_scale=5.0)
    with pytest.raises(ManifestMismatchError) as err:
        _generate(pipe, JOBS, folder, other, batch_size=2)
    message = str(err.value)
    assert "num_inference_steps: 2 in the folder, 3 now" in message
    assert "guidance_scale: 3.5 in the folder, 5.0 now" in message
    assert {k for k, _, _ in err.value.differences} == {"num_inference_steps", "guidance_scale"}
    # other seeds, another batch size, another pairing list: each named
    with pytest.raises(ManifestMismatchError, match="seed: 7 in the folder, 8 now") as err:
        _generate(
            pipe, plan_jobs([j.pairing for j in JOBS[::3]], 3, base_seed=8), folder, SETTINGS, batch_size=2, seed=8
        )
    with pytest.raises(ManifestMismatchError, match="batch_size: 2 in the folder, 3 now"):
        _generate(pipe, JOBS, folder, SETTINGS, batch_size=3)
    with pytest.raises(ManifestMismatchError, match=r"pairings: 2 in the folder, 1 now, 1 gone"):
        _generate(pipe, JOBS[:3], folder, SETTINGS, batch_size=2)
    with pytest.raises(ManifestMismatchError, match=r'model: "tiny" in the folder, "b" now'):
        check_manifest(
            folder,
            generation_manifest(JOBS, dataclasses.replace(SETTINGS, batch_size=2), dataclasses.replace(FLUX, name="b")),
        )  # the model is compared too
    assert _files(folder) == before  # nothing was written


def test_a_folder_without_manifest_cannot_be_resumed(pipe, uninterrupted, tmp_path):
    import shutil

    from concept_grounding.errors import UsageError
    from concept_grounding.tdg.resume import MANIFEST_FILE

    shutil.copytree(uninterrupted, tmp_path / "old")
    (tmp_path / "old" / MANIFEST_FILE).unlink()  # as written by the code before the manifest
    with pytest.raises(UsageError, match="holds generated images but no manifest"):
        _generate(pipe, JOBS, tmp_path / "old", SETTINGS, batch_size=2)


def test_cli_resume_checks_the_manifest_before_loading_the_model(tmp_path, capsys, monkeypatch):
    """Through the command: the manifest holds the resolved model and dtype; a changed
    --seed / --steps / --size stops with both values, same settings add nothing."""
    from concept_grounding.cli import main
    from concept_grounding.tdg.resume import MANIFEST_FILE

    out = tmp_path / "gen"
    argv = [
        "generate",
        "--out",
        str(out),
        "--tiny",
        "--classes",
        "Cardinal",
        "--attributes",
        "has_crown_color::black",
        "--images-per-pairing",
        "2",
        "--steps",
        "2",
        "--size",
        "32",
    ]
    assert main(argv) == 0
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["model"] == "tiny_flux_pipeline(seed=0)" and manifest["dtype"] == "float32"
    assert manifest["seed"] == 0 and manifest["pairings"][0]["images"] == 2
    capsys.readouterr()
    import concept_grounding.tdg.tiny as tiny

    monkeypatch.setattr(tiny, "tiny_flux_pipeline", lambda: pytest.fail("the model must not load"))
    assert main(argv[:-4] + ["--steps", "3", "--size", "48", "--seed", "4"]) == 2
    err = capsys.readouterr().err
    assert "seed (--seed): 0 in the folder, 4 now" in err
    assert "num_inference_steps (--steps): 2 in the folder, 3 now" in err
    assert "size (--size): 32 in the folder, 48 now" in err and "height" not in err  # one name, flag to manifest
    monkeypatch.undo()
    assert main(argv) == 0
    assert "wrote 0 new images" in capsys.readouterr().out


# ------------------------------------------------------------ one name per setting, recorded when used
def test_the_manifest_records_the_image_side_as_size(pipe, uninterrupted):
    """The image side is ``--size`` / ``size`` from flag to manifest (was ``height`` + ``width``)."""
    from concept_grounding.tdg.resume import MANIFEST_FILE

    manifest = json.loads((uninterrupted / MANIFEST_FILE).read_text())
    assert manifest["size"] == 16 and "height" not in manifest and "width" not in manifest


def test_guidance_scale_is_recorded_only_for_a_model_that_reads_it():
    """The world Flux has no guidance embedding (true CFG), so the manifest no longer
    records a ``guidance_scale`` it ignores; a model with one (the tiny Flux, FLUX.1 [dev]) keeps it."""
    from concept_grounding.worldflux.source import WorldFlux

    world = WorldFlux().resolve()
    assert not world.uses_guidance and FLUX.uses_guidance
    assert "guidance_scale" not in generation_manifest(JOBS, SETTINGS, world)
    assert generation_manifest(JOBS, SETTINGS, FLUX)["guidance_scale"] == 3.5
    assert generation_manifest(JOBS, SETTINGS, world)["num_inference_steps"] == 2  # given: the config's
    unset = dataclasses.replace(SETTINGS, num_inference_steps=None)
    assert generation_manifest(JOBS, unset, world)["num_inference_steps"] == 20  # not given: the card's


def test_a_folder_written_before_resumes(pipe, uninterrupted, tmp_path):
    """Folders written before the image side had one name (``height`` + ``width``) and before the
    manifest knew which models ignore ``guidance_scale`` still resume, adding nothing."""
    import shutil

    from concept_grounding.tdg.resume import MANIFEST_FILE

    folder = tmp_path / "old"
    shutil.copytree(uninterrupted, folder)
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    size = manifest.pop("size")
    (folder / MANIFEST_FILE).write_text(json.dumps({**manifest, "height": size, "width": size}))
    assert _generate(pipe, JOBS, folder, SETTINGS, batch_size=2) == 0
    # a world-Flux manifest of before: guidance_scale recorded though the model ignores it
    world = dataclasses.replace(FLUX, uses_guidance=False)
    old = {**generation_manifest(JOBS, SETTINGS, FLUX), "height": 16, "width": 16}
    del old["size"]
    (folder / MANIFEST_FILE).write_text(json.dumps(old))
    assert check_manifest(folder, generation_manifest(JOBS, SETTINGS, world))
