"""The four concept learners on the world Flux: each trains only what it should, its files load
in diffusers' own loaders and reproduce the in-memory model, a resumed run equals an
uninterrupted one, bad input is refused before any work, and Textual Inversion lowers the
loss on a species the world Flux never saw."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from concept_grounding.errors import UsageError
from concept_grounding.learners import METHODS, LearnConfig, learn, load_learned
from concept_grounding.learners.methods import custom_diffusion_parameters
from concept_grounding.learners.train import Latents, fit, flow_loss

PROMPT = "a photo of <v*>"


def _pipe():
    from diffusers import FluxPipeline

    from concept_grounding.worldflux import load_world_flux

    return load_world_flux(pipeline_cls=FluxPipeline)


def _config(method, images, **kw):
    base = dict(
        method=method,
        images=images,
        steps=2,
        batch=2,
        lr=1e-2,
        num_prior=2,
        prior_steps=2,
        checkpoint_every=1,
        progress=False,
        rank=4,
    )
    return LearnConfig(**{**base, **kw})


def _changed(before: dict, after: dict) -> set[str]:
    return {k for k in before if k in after and not torch.equal(before[k], after[k].to(before[k].dtype))}


@pytest.mark.parametrize("method", METHODS)
def test_method_trains_only_its_parameters_and_its_files_load_in_diffusers(method, sample, concept_dir, tmp_path):
    base = _pipe()
    before = {
        name: {k: v.clone() for k, v in getattr(base, name).state_dict().items()}
        for name in ("transformer", "text_encoder", "text_encoder_2")
    }
    tables = {
        enc: getattr(base, enc).get_input_embeddings().weight.detach().clone()
        for enc in ("text_encoder", "text_encoder_2")
    }
    learner = fit(_config(method, concept_dir), tmp_path / method)
    manifest = json.loads((tmp_path / method / "learned.json").read_text())
    assert manifest["method"] == method and manifest["steps"] == 2 and not (tmp_path / method / ".work").exists()

    loaded = load_learned(_pipe(), tmp_path / method)  # diffusers' own loaders
    # V* is a new token in both tokenizers, every old row of both tables untouched
    for enc, tok in (("text_encoder", "tokenizer"), ("text_encoder_2", "tokenizer_2")):
        table = getattr(loaded, enc).get_input_embeddings().weight
        new = getattr(loaded, tok).convert_tokens_to_ids("<v*>")
        old = tables[enc]
        assert new == old.shape[0] and table.shape[0] == old.shape[0] + 1
        assert torch.equal(table[:-1], old)
        row = learner.rows[enc]
        if method in ("textual_inversion", "custom_diffusion"):  # trained from init_word's embedding
            bird = old[getattr(base, tok).convert_tokens_to_ids("bird")]
            assert not torch.allclose(row, bird) and torch.allclose(table[new], row.detach())
        else:
            assert torch.equal(table[new], row)
        assert (
            _changed(
                {k: v for k, v in before[enc].items() if v.shape != old.shape},  # all but the table
                getattr(loaded, enc).state_dict(),
            )
            == set()
        )
    transformer = loaded.transformer.state_dict()
    changed = _changed(before["transformer"], transformer)
    if method == "textual_inversion":
        assert changed == set()
    elif method == "custom_diffusion":
        assert changed and changed <= {n for n, _ in custom_diffusion_parameters(base.transformer)}
        assert any("add_k_proj" in n for n in changed) and any("single_transformer_blocks" in n for n in changed)
    elif method == "dreambooth":
        assert len(changed) > len(before["transformer"]) // 2
    else:  # LoRA: base weights untouched, adapters loaded by load_lora_weights
        base_keys = {k.replace(".base_layer", "") for k in transformer}
        assert changed == set() and base_keys >= set(before["transformer"])
        assert any("lora_A" in k for k in transformer)
    # the saved files reproduce the in-memory model
    with torch.no_grad():
        assert torch.allclose(sample(learner.pipe), sample(loaded), atol=1e-5)


@pytest.mark.parametrize(
    ("method", "loop"),
    [
        ("custom_diffusion", {}),
        (
            "lora",
            {
                "gradient_accumulation": 2,
                "lr_scheduler": "linear",
                "batch": 1,
                "validation_prompt": "a photo of {token}",
                "validation_steps": 3,
                "num_validation_images": 2,
                "validation_inference_steps": 2,
            },
        ),
    ],
)
def test_resume_after_an_interruption_equals_an_uninterrupted_run(method, loop, concept_dir, tmp_path, monkeypatch):
    config = _config(method, concept_dir, steps=4, checkpoint_every=2, **loop)
    learn(config, tmp_path / "straight")

    from concept_grounding.learners import train

    original, calls = train.training_step, []

    def interrupted(learner, step, *args):
        if step == 3:
            raise KeyboardInterrupt
        calls.append(step)
        return original(learner, step, *args)

    monkeypatch.setattr(train, "training_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        learn(config, tmp_path / "resumed")
    saved = tmp_path / "resumed" / ".work" / "checkpoint"  # accelerator.save_state's folder
    assert (saved / "optimizer.bin").is_file() and (saved / "custom_checkpoint_1.pkl").is_file()
    monkeypatch.setattr(train, "training_step", original)
    learn(config, tmp_path / "resumed")
    a, b = (json.loads((tmp_path / d / "learned.json").read_text()) for d in ("straight", "resumed"))
    # the pivotal-tuning file is named after its folder ({name}_emb.safetensors, as diffusers' script names it)
    assert a["losses"] == b["losses"] and [f.replace("straight", "resumed") for f in a["files"]] == b["files"]
    for x, y in zip(a["files"], b["files"]):
        assert (tmp_path / "straight" / x).read_bytes() == (tmp_path / "resumed" / y).read_bytes()
    # validation images (after steps 3 and 4) drawn again after the resume are the same images
    shown = sorted(p.relative_to(tmp_path / "straight") for p in (tmp_path / "straight").rglob("validation/*/*.png"))
    assert shown == sorted(
        p.relative_to(tmp_path / "resumed") for p in (tmp_path / "resumed").rglob("validation/*/*.png")
    )
    assert len(shown) == (4 if config.validation_prompt else 0)
    for rel in shown:
        assert (tmp_path / "straight" / rel).read_bytes() == (tmp_path / "resumed" / rel).read_bytes()


def test_validation_images_follow_the_weights_and_leave_the_training_alone(concept_dir, tmp_path):
    from PIL import Image

    plain = _config("lora", concept_dir, steps=3)
    shown = _config(
        "lora",
        concept_dir,
        steps=3,
        validation_prompt="a photo of {token} on a branch",
        validation_steps=2,
        num_validation_images=3,
        validation_inference_steps=2,
    )
    learn(plain, tmp_path / "plain")
    learn(shown, tmp_path / "shown")
    assert not (tmp_path / "plain" / "validation").exists()
    a, b = (json.loads((tmp_path / d / "learned.json").read_text()) for d in ("plain", "shown"))
    assert a["losses"] == b["losses"]  # validation draws no training noise
    for x, y in zip(a["files"], b["files"]):
        assert (tmp_path / "plain" / x).read_bytes() == (tmp_path / "shown" / y).read_bytes()
    folders = sorted(p.name for p in (tmp_path / "shown" / "validation").iterdir())
    assert folders == ["step-000002", "step-000003"]  # every 2 steps and at the end
    step2, step3 = (
        np.stack([np.asarray(Image.open(f)) for f in sorted((tmp_path / "shown" / "validation" / d).glob("*.png"))])
        for d in folders
    )
    assert step2.shape == (3, 32, 32, 3) and step3.shape == step2.shape
    assert not np.array_equal(step2[0], step2[1])  # one noise seed per image
    assert not np.array_equal(step2, step3)  # drawn with the weights of their step


@pytest.mark.parametrize(
    ("change", "argument"),
    [
        (dict(method="hypernetwork"), "method"),
        (dict(token="bird"), "token"),
        (dict(min_images=9), "images"),
        (dict(model="NOT_A_FLUX"), "model"),
        (dict(images="MIXED"), "images"),
    ],
)
def test_bad_input_is_refused_in_one_line_before_anything_is_written(change, argument, concept_dir, tmp_path):
    import shutil

    from PIL import Image

    if change.get("images") == "MIXED":
        mixed = tmp_path / "mixed"
        shutil.copytree(concept_dir, mixed)
        Image.new("RGB", (64, 64)).save(mixed / "99.png")
        change = {"images": mixed}
    if change.get("model") == "NOT_A_FLUX":
        folder = tmp_path / "sd"
        folder.mkdir()
        (folder / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionPipeline"}))
        change = {"model": folder}
    out = tmp_path / "out"
    with pytest.raises(UsageError) as err:
        learn(_config(change.pop("method", "textual_inversion"), change.pop("images", concept_dir), **change), out)
    assert str(err.value).startswith(f"{argument}: ") and "\n" not in str(err.value)
    assert not out.exists()


def test_textual_inversion_lowers_the_loss_on_a_held_out_species(concept_dir, tmp_path):
    """On fixed draws (16 batches of images x noise x t), V*'s learnt rows give a lower
    rectified-flow loss than its starting rows ('bird''s embedding)."""
    config = _config("textual_inversion", concept_dir, steps=30, batch=4, lr=5e-2)
    learner = fit(config, tmp_path / "ti")

    pipe = learner.pipe
    from concept_grounding.learners.train import load_images
    from concept_grounding.worldflux.vae import encode_latents

    lat = encode_latents(pipe.vae, {"images": load_images(concept_dir)}, tmp_path / "lat", False, mirror=False)
    latents = Latents(lat["mean"], lat["std"])

    def fixed_loss(prompt: str = PROMPT) -> float:
        with torch.no_grad():
            return float(sum(flow_loss(learner, latents, prompt, torch.Generator().manual_seed(s)) for s in range(16)))

    trained = fixed_loss()
    start = {k: v.detach().clone() for k, v in learner.rows.items()}
    bird = {
        enc: getattr(pipe, enc).get_input_embeddings().weight[getattr(pipe, tok).convert_tokens_to_ids("bird")]
        for enc, tok in (("text_encoder", "tokenizer"), ("text_encoder_2", "tokenizer_2"))
    }
    with torch.no_grad():
        for k, row in learner.rows.items():
            row.copy_(bird[k])
    initial = fixed_loss()
    with torch.no_grad():
        for k, row in learner.rows.items():
            row.copy_(start[k])
    unconditional = fixed_loss("")
    # the world Flux's text barely moves this loss ("" vs "a photo of <bird's row>": ~4e-4 over 16
    # draws); the learnt V* lowers it by far more than the word "bird" does over no prompt at all
    assert trained < initial < unconditional, (trained, initial, unconditional)
    assert initial - trained > 10 * (unconditional - initial), (trained, initial, unconditional)


def test_a_shared_prior_cache_draws_the_prior_images_once(concept_dir, tmp_path, monkeypatch):
    """DreamBooth and Custom Diffusion of one run share their prior images (same model, prompt,
    count, steps, seed and size): the second learner reads the first one's file."""
    from concept_grounding.learners import train as train_module

    cache = tmp_path / "priors"
    learn(_config("dreambooth", concept_dir, prior_cache=str(cache)), tmp_path / "db")
    files = list(cache.glob("prior-*.npy"))
    assert len(files) == 1 and not list(cache.glob(".*tmp"))
    drawn = []
    original = train_module.class_images

    def counting(pipe, cfg, side, work):
        drawn.append(cfg.method)
        return original(pipe, cfg, side, work)

    monkeypatch.setattr(train_module, "class_images", counting)
    mtime = files[0].stat().st_mtime_ns
    learn(_config("custom_diffusion", concept_dir, prior_cache=str(cache)), tmp_path / "cd")
    assert drawn == ["custom_diffusion"] and files[0].stat().st_mtime_ns == mtime  # read, not drawn again
    assert list(cache.glob("prior-*.npy")) == files
