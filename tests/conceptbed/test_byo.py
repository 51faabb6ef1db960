"""Bring your own learner: exported concepts, a folder of generated images and diffusers' LoRA files scored as a
row of ConceptBed's tables, with known answers, and every bad input refused in one line before any oracle trains."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from concept_grounding.cli import main
from concept_grounding.conceptbed import ConceptBedConfig, ConceptWorld, run_conceptbed, task_species
from concept_grounding.errors import UsageError
from concept_grounding.vocabulary import load_vocabulary

VOCAB = load_vocabulary()
#: a 12-class world (the oracles train in seconds), one task, two concepts, four images each
CLASSES = task_species(VOCAB, "object")[:6] + task_species(VOCAB, "fine_grained_object")[:6]
SMALL = dict(
    concepts=2,
    m=4,
    real=8,
    images=4,
    oracle_per_class=30,
    oracle_epochs=8,
    capacity="small",
    table8=("small",),
    classes=CLASSES,
    tasks=("object",),
)
CW = ConceptWorld(m=4, real=8, classes=CLASSES)
CONCEPTS = CW.concepts("object", 2)


def _write(folder, images):
    folder.mkdir(parents=True, exist_ok=True)
    for i, image in enumerate(images):
        Image.fromarray(image).save(folder / f"{i:04d}.png")


def _renders(root, swap=False):
    """``root/object/<concept>/*.png``: 4 held-out renders of each concept's species (block after its real
    images), or with ``swap`` the other concept's."""
    for c, other in zip(CONCEPTS, CONCEPTS[::-1]):
        label = other.label if swap else c.label
        _write(root / "object" / c.name, CW.renders(label, 4, "concept_real", offset=8))
    return root


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("oracles"))


def _run(cache, **kw):
    return run_conceptbed(ConceptBedConfig(cache=cache, **{**SMALL, **kw}))


@pytest.fixture(scope="module")
def scored(cache, tmp_path_factory):
    """One run: 'another species' beside each concept's own held-out renders brought as the row 'own renders';
    saved under ``out`` (with its generated images)."""
    tmp = tmp_path_factory.mktemp("byo")
    result = _run(cache, learners=("another species",), generated=str(_renders(tmp / "own")), name="own renders")
    result.save(tmp / "out")
    return result, tmp / "out"


def test_own_renders_score_ccd_near_zero_in_every_table(scored):
    r = scored[0].results
    assert set(r["table1"]) == {"another species", "own renders"}
    assert abs(r["table1"]["own renders"]["object"]) < 0.1, r["table1"]
    assert abs(r["table7"]["own renders"]["ccd"]) < 0.1 and r["table7"]["own renders"]["accuracy"] > 0.9
    assert r["table8"]["small"]["own renders"] == r["table1"]["own renders"]["object"]
    assert r["baselines"]["dino"]["own renders"]["object"] > r["baselines"]["dino"]["another species"]["object"]


def test_another_concepts_renders_score_a_large_ccd(cache, tmp_path):
    r = _run(cache, learners=(), generated=str(_renders(tmp_path, swap=True)), name="swapped").results
    assert r["table1"]["swapped"]["object"] > 0.5, r["table1"]
    assert r["table7"]["swapped"]["accuracy"] < 0.1


def test_kept_images_fed_back_reproduce_the_table1_cell_exactly(scored, cache, capsys):
    result, out = scored
    kept = out / "generated" / "another_species" / "object"
    assert sorted(p.name for p in kept.iterdir()) == sorted(c.name for c in CONCEPTS)
    assert len(list((kept / CONCEPTS[0].name).glob("*.png"))) == 4
    again = _run(cache, learners=(), generated=str(out / "generated" / "another_species"), name="again").results
    assert again["table1"]["again"]["object"] == result.results["table1"]["another species"]["object"]
    assert again["table7"]["again"] == result.results["table7"]["another species"]


def test_no_keep_generated_writes_no_images(cache, tmp_path):
    result = _run(cache, learners=("another species",), keep_generated=False)
    result.save(tmp_path)
    assert not (tmp_path / "generated").exists() and (tmp_path / "results.json").is_file()


def test_export_then_generated_round_trip(cache, tmp_path, capsys):
    """The export writes each concept's training images and concept.json; its training images, brought back as
    generated images, score like the concept's own renders (CCD ~ 0)."""
    flags = ["--concepts", "2", "--m", "4", "--real", "8", "--tasks", "object"]
    assert main(["conceptbed", "--out", str(tmp_path / "o"), "--export-concepts", str(tmp_path / "x"), *flags]) == 0
    line = capsys.readouterr().out.strip()
    assert line.count("\n") == 0 and line.startswith("exported 2 concepts of object") and "nothing was trained" in line
    assert not (tmp_path / "o").exists()
    names = sorted(p.name for p in (tmp_path / "x" / "object").iterdir())
    assert names == sorted(c.name for c in ConceptWorld(m=4, real=8).concepts("object", 2))
    record = json.loads((tmp_path / "x" / "object" / names[0] / "concept.json").read_text())
    assert record["placeholder"] == "<v*>" and record["instance_prompt"] == "a photo of <v*>"
    assert record["prompts"] == ["a photo of <v*>"] and record["what"] == "Black footed Albatross"
    assert record["class_prompt"] == "a photo of a bird" and record["train_images"] == 4
    # the same on the 12-class world, scored back as a row
    from concept_grounding.conceptbed.byo_export import export_or_run

    export_or_run(ConceptBedConfig(export_concepts=str(tmp_path / "y"), **SMALL)).save(tmp_path / "unused")
    brought = tmp_path / "b"
    for c in CONCEPTS:
        shutil.copytree(tmp_path / "y" / "object" / c.name / "train", brought / "object" / c.name)
        assert np.array_equal(np.asarray(Image.open(brought / "object" / c.name / "0000.png")), c.train[0])
    r = _run(cache, learners=(), generated=str(brought), name="training images").results
    assert abs(r["table1"]["training images"]["object"]) < 0.1


def _lora_folder(root, names, rank=4):
    """``root/object/<name>/pytorch_lora_weights.safetensors`` of a random LoRA (not a no-op) on the world Flux's
    attention, saved with ``FluxPipeline.save_lora_weights`` (as diffusers' ``train_dreambooth_lora_flux.py`` does)."""
    import torch
    from diffusers import FluxPipeline
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    from concept_grounding.worldflux import load_world_flux

    pipe = load_world_flux(pipeline_cls=FluxPipeline)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        config = LoraConfig(r=rank, init_lora_weights=False, target_modules=["to_q", "to_k", "to_v", "to_out.0"])
        pipe.transformer.add_adapter(config)
    layers = get_peft_model_state_dict(pipe.transformer)
    for name in names:
        FluxPipeline.save_lora_weights(root / "object" / name, transformer_lora_layers=layers)
    return root


def test_diffusers_lora_files_load_generate_and_score_as_a_row(cache, tmp_path):
    """One concept (generation on the world Flux is the slow part); the LoRA is applied: its images differ from
    the base model's for the same prompts and noise."""
    from concept_grounding.conceptbed.learners import FluxLearner

    root = _lora_folder(tmp_path / "lora", [CONCEPTS[0].name])
    result = _run(cache, learners=(), learned=str(root), name="my LoRA", concepts=1, images=2)
    r = result.results
    assert set(r["table1"]) == {"my LoRA"} and np.isfinite(r["table1"]["my LoRA"]["object"])
    assert np.isfinite(r["table7"]["my LoRA"]["ccd"]) and "my LoRA" in r["table8"]["small"]
    images = result.generated["my LoRA", "object"][0]
    base = FluxLearner("base")
    base.pipe = base.base_pipeline()
    assert images.shape == (2, 32, 32, 3)
    assert not np.array_equal(images, base.generate(CONCEPTS[0].prompts, 2, 0))


def test_pivotal_embeddings_and_a_pipeline_folder_load_and_score(cache, tmp_path):
    """Concept 1: a pivotal-tuning ``*_emb.safetensors`` (two vectors per encoder, keys clip_l / t5) through
    ``load_textual_inversion``; concept 2: a whole pipeline folder (the world Flux itself, so its images are the
    base model's exactly)."""
    import torch
    from diffusers import FluxPipeline
    from safetensors.torch import save_file

    from concept_grounding.conceptbed.learners import FluxLearner
    from concept_grounding.worldflux import load_world_flux

    root = tmp_path / "learned" / "object"
    first, second = (root / c.name for c in CONCEPTS)
    first.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    rows = {"clip_l": torch.randn(2, 128, generator=g), "t5": torch.randn(2, 128, generator=g)}
    save_file(rows, first / "concept_emb.safetensors")
    load_world_flux(pipeline_cls=FluxPipeline).save_pretrained(second)
    result = _run(cache, learners=(), learned=str(tmp_path / "learned"), name="brought", images=2)
    assert np.isfinite(result.results["table1"]["brought"]["object"])
    embedded, piped = result.generated["brought", "object"]
    base = FluxLearner("base")
    base.pipe = base.base_pipeline()
    assert np.array_equal(piped, base.generate(CONCEPTS[1].prompts, 2, 0))
    assert not np.array_equal(embedded, base.generate(CONCEPTS[0].prompts, 2, 0))


# ---- bad input: one line naming the path, before any oracle trains, nothing written


def _bad_generated(root, case):
    _renders(root)
    first = root / "object" / CONCEPTS[0].name
    if case == "missing task":
        shutil.rmtree(root / "object")
        return root / "object"
    if case == "missing concept":
        shutil.rmtree(first)
        return first
    if case == "too few images":
        (first / "0003.png").unlink()
        return first
    if case == "mixed sizes":
        Image.new("RGB", (40, 40)).save(first / "0003.png")
        return first / "0003.png"
    if case == "unreadable image":
        (first / "0002.png").write_bytes(b"not a png")
        return first / "0002.png"
    if case == "non-image file":
        (first / "notes.txt").write_text("x")
        return first / "notes.txt"
    if case == "unknown concept":
        shutil.copytree(first, root / "object" / "999.Never_Exported")
        return root / "object" / "999.Never_Exported"
    raise AssertionError(case)


GENERATED_CASES = {
    "missing task": "missing: the run scores task 'object'",
    "missing concept": "missing: the run scores concept",
    "too few images": "holds 3 images; N = --images 4",
    "mixed sizes": "mixed sizes: 40x40",
    "unreadable image": "unreadable image",
    "non-image file": "not an image file",
    "unknown concept": "the export never wrote it",
}


def _bad_learned(root, case):
    _lora_folder(root, [c.name for c in CONCEPTS])
    first = root / "object" / CONCEPTS[0].name
    lora = first / "pytorch_lora_weights.safetensors"
    if case == "unreadable weights":
        lora.write_bytes(b"\x00" * 10)
        return lora
    if case == "another base model's LoRA":
        import torch
        from safetensors.torch import save_file

        key = "transformer.transformer_blocks.0.attn.to_q"
        save_file({f"{key}.lora_A.weight": torch.zeros(4, 3072), f"{key}.lora_B.weight": torch.zeros(3072, 4)}, lora)
        return lora
    if case == "a deeper model's LoRA":
        import torch
        from safetensors.torch import save_file

        key = "transformer.transformer_blocks.7.attn.to_q"
        save_file({f"{key}.lora_A.weight": torch.zeros(4, 256), f"{key}.lora_B.weight": torch.zeros(256, 4)}, lora)
        return lora
    if case == "a Stable Diffusion LoRA":
        import torch
        from safetensors.torch import save_file

        save_file({"unet.down_blocks.0.attentions.0.proj_in.lora_A.weight": torch.zeros(4, 320)}, lora)
        return lora
    if case == "no weights":
        lora.unlink()
        return first
    if case == "foreign embeddings":
        import torch
        from safetensors.torch import save_file

        save_file({"clip_l": torch.zeros(2, 768), "t5": torch.zeros(2, 4096)}, first / "concept_emb.safetensors")
        return first / "concept_emb.safetensors"
    raise AssertionError(case)


LEARNED_CASES = {
    "unreadable weights": "unreadable safetensors file",
    "another base model's LoRA": "does not fit transformer_blocks.0.attn.to_q",
    "a deeper model's LoRA": "the transformer has no linear module 'transformer_blocks.7.attn.to_q'",
    "a Stable Diffusion LoRA": "not diffusers' Flux LoRA format",
    "no weights": "holds none of pytorch_lora_weights.safetensors",
    "foreign embeddings": "clip_l [2, 768]: the base model's clip_l embeddings are 128 wide",
}


BAD_INPUTS = [("generated", case, message) for case, message in GENERATED_CASES.items()] + [
    ("learned", case, message) for case, message in LEARNED_CASES.items()
]


@pytest.mark.parametrize(("flag", "case", "expected"), BAD_INPUTS, ids=[f"{f}: {c}" for f, c, _ in BAD_INPUTS])
def test_a_bad_brought_row_is_one_line_naming_the_path(flag, case, expected, tmp_path):
    """A bad ``--generated`` folder or ``--learned`` weights: one line naming the path, before any oracle trains."""
    path = (_bad_generated if flag == "generated" else _bad_learned)(tmp_path / "in", case)
    with pytest.raises(UsageError) as err:
        _run(str(tmp_path / "cache"), learners=(), name="x", **{flag: str(tmp_path / "in")})
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"--{flag}: {path}: "), message
    assert expected in message, message
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--generated", "G"], "--name: the row of G needs a name in the tables"),
        (["--generated", "G", "--name", "LoRA"], "--name: 'LoRA' is already a learner's row"),
        (["--name", "mine"], "--name: names the row of --generated DIR or --learned DIR"),
        (["--generated", "G", "--learned", "G", "--name", "mine"], "--learned: give one of --generated and --learned"),
        (["--export-concepts", "X", "--generated", "G", "--name", "mine"], "--export-concepts: exports the concepts"),
        (["--learners"], "--learners: no learner to score"),
    ],
)
def test_bad_flags_are_one_line_and_write_nothing(flags, expected, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "G").mkdir()
    assert main(["conceptbed", "--out", "o", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and expected in err, err
    assert not (tmp_path / "o").exists() and not (tmp_path / "X").exists()


def test_a_bad_generated_folder_on_the_command_line_writes_nothing(tmp_path, capsys):
    gen = _renders(tmp_path / "gen")
    (gen / "object").rename(gen / "objects")
    flags = ["--concepts", "2", "--m", "4", "--real", "8", "--images", "4", "--tasks", "object", "--learners"]
    assert main(["conceptbed", "--out", str(tmp_path / "o"), *flags, "--generated", str(gen), "--name", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"--generated: {gen / 'objects'}: not a task (did you mean 'object'?)" in err
    assert not (tmp_path / "o").exists()


def test_a_concept_folder_exports_scores_back_and_is_checked_before_its_oracle_trains(tmp_path, monkeypatch):
    """``--concept-folder``: the export writes the folder's concepts; their training images, brought back as
    generated images, score CCD ~ 0; a missing concept is refused before the folder's oracle trains."""
    from concept_grounding.conceptbed import export_world_concepts
    from concept_grounding.conceptbed.byo_export import export_or_run

    species = task_species(VOCAB, "object")[:3]
    export_world_concepts(tmp_path / "folder", ConceptWorld(m=4, real=10, classes=species).concepts("object", 3))
    sizes = dict(concepts=3, m=4, images=4, capacity="medium", oracle_epochs=20, tasks=("object",))
    config = ConceptBedConfig(concept_folder=str(tmp_path / "folder"), learners=(), **sizes)
    export_or_run(replace(config, export_concepts=str(tmp_path / "x"))).save(tmp_path / "unused")
    assert sorted(p.name for p in (tmp_path / "x" / "object").iterdir()) == sorted(species)
    for name in species:
        shutil.copytree(tmp_path / "x" / "object" / name / "train", tmp_path / "gen" / "object" / name)
    r = run_conceptbed(replace(config, generated=str(tmp_path / "gen"), name="mine")).results
    assert abs(r["table1"]["mine"]["object"]) < 0.1, r["table1"]

    import concept_grounding.conceptbed.folder as folder_module

    def trained(*args, **kwargs):
        raise AssertionError("the oracle trained before the check")

    monkeypatch.setattr(folder_module, "folder_oracle", trained)
    shutil.rmtree(tmp_path / "gen" / "object" / species[1])
    with pytest.raises(UsageError, match=f"missing: the run scores concept '{species[1]}'"):
        run_conceptbed(replace(config, generated=str(tmp_path / "gen"), name="mine"))
