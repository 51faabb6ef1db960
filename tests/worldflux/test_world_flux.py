"""The world-trained Flux: held-out data, tokenizers, smoke training, shipped weights."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from concept_grounding.world import BirdWorld, WorldConfig
from concept_grounding.worldflux import WORLD_FLUX_DIR, FluxTrainConfig, load_world_flux, world_flux_call_kwargs
from concept_grounding.worldflux.captions import (
    held_out_matrix,
    is_held_out_free,
    make_caption,
    phrase_attributes,
    word_tokenizers,
)
from concept_grounding.worldflux.components import TRAINING_WORLD
from concept_grounding.worldflux.data import render_training_set
from concept_grounding.worldflux.train import cosine_lr

REPO = Path(__file__).resolve().parents[2]
TWO = ("017.Cardinal", "073.Blue_Jay")


@pytest.fixture(scope="module")
def world2() -> BirdWorld:
    return BirdWorld(WorldConfig(image_size=32, class_names=TWO))


# ----------------------------------------------------------------------------- data
def test_held_out_matrix_is_exactly_the_sub_pairings(world2):
    held = held_out_matrix(world2)
    pairs = {(world2.class_names[c], world2.vocab.attributes[j]) for c, j in zip(*np.nonzero(held))}
    assert pairs == set(world2.default_pairings())


def test_is_held_out_free_known_answer(world2):
    held = held_out_matrix(world2)
    c, j = next((c, j) for c, j in zip(*np.nonzero(held)))
    labels = np.zeros(world2.vocab.num_attributes, np.uint8)
    assert is_held_out_free(labels, int(c), held)
    labels[j] = 1
    assert not is_held_out_free(labels, int(c), held)
    assert is_held_out_free(labels, 1 - int(c), held) == (not held[1 - int(c), j])


def test_training_set_never_shows_a_held_out_combination(world2):
    cfg = FluxTrainConfig(world=replace(TRAINING_WORLD, class_names=TWO), per_class=30)
    data = render_training_set(cfg, progress=False)
    held = held_out_matrix(world2)
    assert data["images"].shape == (60, 32, 32, 3)
    assert np.bincount(data["labels"]).tolist() == [30, 30]
    assert not np.any(held[data["labels"]] & (data["attributes"] > 0))
    # and the filter did skip something: deviations do produce held-out combinations
    all_first = [world2.labels(c + k * 2) for k in range(int(data["indices"].max()) // 2 + 1) for c in range(2)]
    assert len(all_first) > 60


def test_captions_name_only_what_the_image_shows(world2):
    rng = np.random.default_rng(0)
    vocab = world2.vocab
    for i in range(200):
        labels = world2.labels(i)
        cap = make_caption(labels, i % 2, world2, rng)
        assert cap.startswith("a photo of a ")
        shown = set(phrase_attributes(labels, world2))
        for group in ("crown_color", "breast_color", "wing_color"):
            for j in vocab.groups[group]:
                value = vocab.attributes[j].split("::")[1]
                if f"{value} colored {group.split('_')[0]}" in cap and vocab.attributes[j] not in shown:
                    pytest.fail(f"caption {cap!r} names {vocab.attributes[j]} that the image does not show")


def test_word_tokenizers_pad_to_the_trained_length():
    clip, t5 = word_tokenizers(["a", "photo", "of", "bird"], 8)
    assert clip.model_max_length == t5.model_max_length == 8
    ids = t5("A photo of a Dodo", padding="max_length", max_length=8).input_ids
    assert ids == [4, 5, 6, 4, 2, 3, 0, 0]  # "dodo" is <unk> (2), then <eos> (3) and <pad> (0)
    assert clip("a bird").input_ids == [1, 4, 7, 3]


def test_cosine_lr_warms_up_and_decays():
    lrs = [cosine_lr(s, 100, 1.0, 10) for s in range(101)]
    assert lrs[9] == pytest.approx(1.0) and lrs[0] == pytest.approx(0.1)
    assert all(a >= b for a, b in itertools.pairwise(lrs[10:]))
    assert lrs[100] == pytest.approx(0.0, abs=1e-12)


def test_config_rejects_bad_sizes():
    with pytest.raises(ValueError, match="image_size"):
        FluxTrainConfig(world=WorldConfig(image_size=36))
    with pytest.raises(ValueError, match="caption_dropout"):
        FluxTrainConfig(caption_dropout=1.0)


# ----------------------------------------------------------------------------- training
def test_train_flux_command_smoke_and_resume(tmp_path, capsys):
    from concept_grounding.cli import main

    out, work = tmp_path / "out", tmp_path / "work"
    argv = ["train-flux", "--tiny", "--out", str(out), "--work-dir", str(work), "--no-progress"]
    assert main(argv) == 0
    log = json.loads((out / "train_log.json").read_text())
    assert log["flux_steps"] == 2 and (out / "loss_curve.png").stat().st_size > 0
    assert json.loads((out / "tokenizer_2" / "tokenizer_config.json").read_text())["model_max_length"] == 24
    weights = (out / "transformer" / "diffusion_pytorch_model.safetensors").read_bytes()
    # a second run resumes from the finished checkpoints and exports the same weights
    assert main(argv) == 0
    assert (out / "transformer" / "diffusion_pytorch_model.safetensors").read_bytes() == weights
    # a different config in the same work dir is refused before any work
    assert main(argv + ["--seed", "1"]) != 0
    assert "work_dir" in capsys.readouterr().err


# ----------------------------------------------------------------------------- shipped weights
@pytest.fixture(scope="module")
def shipped():
    return load_world_flux()


def test_shipped_weights_are_small_fp16_safetensors():
    files = [p for p in WORLD_FLUX_DIR.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= 40 * 2**20
    assert not [p for p in files if p.suffix in (".bin", ".pt", ".pth")]
    from safetensors import safe_open

    with safe_open(str(WORLD_FLUX_DIR / "transformer" / "diffusion_pytorch_model.safetensors"), "pt") as f:
        assert f.get_tensor(next(iter(f.keys()))).dtype == torch.float16


def test_shipped_pipeline_loads_through_both_entry_points():
    from diffusers import DiffusionPipeline, FluxPipeline

    flux = FluxPipeline.from_pretrained(WORLD_FLUX_DIR, dtype=torch.float32)
    assert type(flux).__name__ == "FluxPipeline"
    tdg = DiffusionPipeline.from_pretrained(
        WORLD_FLUX_DIR,
        custom_pipeline=str(REPO / "pipelines" / "tied_diffusion"),
        trust_remote_code=True,
        dtype=torch.float32,
    )
    assert type(tdg).__name__ == "TiedDiffusionPipeline"
    assert tdg.tokenizer_2.model_max_length == flux.tokenizer_2.model_max_length <= 64


def test_generation_is_deterministic_per_seed(shipped):
    kw = world_flux_call_kwargs(shipped, num_inference_steps=4)

    def pair(seed: int) -> np.ndarray:
        out = shipped(
            "a photo of a Blue Jay",
            "a photo of a bird with a red colored breast",
            negative_prompt="",
            generator=torch.Generator().manual_seed(seed),
            output_type="np",
            **kw,
        )
        return np.concatenate([out.reference_images, out.guide_images])

    a, b, c = pair(0), pair(0), pair(1)
    assert a.shape == (2, 32, 32, 3)
    assert np.array_equal(a, b)
    assert not np.allclose(a, c)


def test_tdg_defaults_to_the_trained_prompt_length(shipped):
    kw = world_flux_call_kwargs(shipped, num_inference_steps=3)
    assert shipped.default_max_sequence_length() == kw["max_sequence_length"] < 512

    def run(**extra) -> np.ndarray:
        out = shipped(
            "a photo of a Cardinal",
            "a photo of a bird",
            negative_prompt="",
            output_type="np",
            generator=torch.Generator().manual_seed(3),
            **extra,
        )
        return np.asarray(out.reference_images)

    explicit = run(**kw)
    kw.pop("max_sequence_length")
    kw.pop("height"), kw.pop("width")  # the loader also makes the trained resolution the default
    assert np.array_equal(run(**kw), explicit)
    assert not np.array_equal(run(**kw, max_sequence_length=64), explicit)


def test_sampling_settings_are_the_measured_ones_everywhere():
    """The Space's default steps, the generate job's world source and the call kwargs all use
    the settings the model card measured (20 steps, true CFG 4, 32 px, 24 tokens)."""
    from concept_grounding.space import tab_tdg
    from concept_grounding.worldflux.loader import WORLD_STEPS, WORLD_TRUE_CFG, world_flux_settings
    from concept_grounding.worldflux.source import WorldFlux

    assert (WORLD_STEPS, WORLD_TRUE_CFG) == (20, 4.0)
    assert tab_tdg.DEFAULT_STEPS == WORLD_STEPS
    settings = world_flux_settings()
    model = WorldFlux().resolve()
    assert model.extra == {"true_cfg_scale": WORLD_TRUE_CFG, "negative_prompt": ""} == settings.extra()
    assert (model.default_size, model.max_sequence_length, model.default_steps) == (32, 24, 20)
    assert not model.uses_guidance  # no guidance embedding: guidance_scale is not recorded
    steps = settings.call_kwargs().pop("num_inference_steps")
    assert steps == model.default_steps
    kw = settings.call_kwargs()
    del kw["num_inference_steps"]
    assert model.call_kwargs(model.default_size) == {**kw, "negative_prompt": ""}  # one declaration, both paths


# ----------------------------------------------------------------------------- attribute-preserving VAE
def test_part_weights_give_every_part_the_same_extra_weight():
    from concept_grounding.worldflux.vae import part_weights

    maps = np.zeros((2, 8, 8), np.uint8)
    maps[0, 0, 0] = 1  # a 1-pixel eye
    maps[0, 4:, :] = 2  # a 32-pixel breast
    w = part_weights(maps, 1.0)
    assert w.shape == maps.shape and w.dtype == np.float32
    assert np.allclose(w.mean(axis=(1, 2)), 1.0)
    base = w[0, 1, 0]  # background pixel: weight 1 before rescaling
    extra_eye, extra_breast = w[0, 0, 0] - base, (w[0][maps[0] == 2] - base).sum()
    assert extra_eye == pytest.approx(extra_breast)  # both 8 * lambda before rescaling
    assert extra_eye / base == pytest.approx(8.0)
    assert np.allclose(w[1], 1.0)  # an image with no parts keeps uniform weights
    assert np.allclose(part_weights(maps, 0.0), 1.0)
    with pytest.raises(ValueError, match="vae_part_weight"):
        part_weights(maps, -1.0)


def test_render_fields_is_the_same_for_any_number_of_workers():
    from concept_grounding.worldflux.training_utils import render_fields

    config = WorldConfig(image_size=32, class_names=TWO, pose="canonical", scene="plain")
    indices = list(range(0, 600, 3))  # three chunks of 256
    one = render_fields(config, indices, ("image", "part_map", "label"), workers=1, progress=False)
    two = render_fields(config, indices, ("image", "part_map", "label"), workers=2, progress=False)
    assert set(one) == set(two) == {"image", "part_map", "label"}
    for field in one:
        assert np.array_equal(one[field], two[field])
    world = BirdWorld(config)
    assert np.array_equal(one["image"][-1], world.sample(indices[-1]).image)
    with pytest.raises(ValueError, match="no indices"):
        render_fields(config, [], ("image",), progress=False)


def test_vae_set_adds_deviant_renders_and_part_weights(world2):
    from concept_grounding.worldflux.data import render_training_set
    from concept_grounding.worldflux.vae import VAE_DEVIANT_START, part_weights, render_vae_set

    cfg = FluxTrainConfig(
        world=replace(TRAINING_WORLD, class_names=TWO), per_class=2, vae_deviant_per_class=3, vae_part_weight=1.0
    )
    data = render_training_set(cfg, progress=False)
    vae_set = render_vae_set(cfg, data, progress=False)
    assert vae_set["images"].shape == (4 + 6, 32, 32, 3)
    assert np.array_equal(vae_set["images"][:4], data["images"])
    deviant = BirdWorld(
        WorldConfig(image_size=32, class_names=TWO, pose="canonical", scene="plain", deviation_rate=1.0)
    )
    assert np.array_equal(vae_set["images"][4], deviant.sample(VAE_DEVIANT_START * 2).image)
    assert np.array_equal(vae_set["part_maps"][4], deviant.sample(VAE_DEVIANT_START * 2).part_map)
    weights = part_weights(vae_set["part_maps"], cfg.vae_part_weight)
    assert np.allclose(weights.mean(axis=(1, 2)), 1.0) and weights.max() > 2.0


def test_train_flux_attribute_preserving_vae_and_init_from(tmp_path, capsys):
    from concept_grounding.cli import main
    from concept_grounding.commands.train_flux import add_arguments, config_from_args
    from concept_grounding.worldflux.vae import _initial_vae

    first = tmp_path / "first"
    argv = [
        "train-flux",
        "--tiny",
        "--out",
        str(first),
        "--work-dir",
        str(tmp_path / "w1"),
        "--no-progress",
        "--vae-deviant-per-class",
        "2",
        "--vae-part-weight",
        "1",
        "--workers",
        "2",
    ]
    assert main(argv) == 0
    with np.load(tmp_path / "w1" / "vae_data.npz") as z:
        assert z["images"].shape[0] == 8 + 4 and z["part_maps"].shape == (12, 32, 32)
    # --init-from starts from the folder's weights: the initial VAE equals the exported one
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cfg = config_from_args(
        parser.parse_args(["--tiny", "--out", "o", "--work-dir", "w", "--init-from", str(first)])
    ).training_config()
    from diffusers import AutoencoderKL

    exported = AutoencoderKL.from_pretrained(first / "vae").state_dict()
    started = _initial_vae(cfg).state_dict()
    assert all(torch.equal(started[k], exported[k].float()) for k in exported)
    assert (
        main(
            [
                "train-flux",
                "--tiny",
                "--out",
                str(tmp_path / "second"),
                "--work-dir",
                str(tmp_path / "w2"),
                "--no-progress",
                "--init-from",
                str(first),
            ]
        )
        == 0
    )
    # a folder of other sizes or no pipeline at all is refused, naming the flag
    assert (
        main(
            [
                "train-flux",
                "--out",
                str(tmp_path / "x"),
                "--work-dir",
                str(tmp_path / "w3"),
                "--init-from",
                str(first),
                "--no-progress",
                "--per-class",
                "1",
                "--vae-steps",
                "1",
                "--steps",
                "1",
            ]
        )
        != 0
    )
    assert "--init-from" in capsys.readouterr().err
    assert (
        main(
            [
                "train-flux",
                "--tiny",
                "--out",
                str(tmp_path / "y"),
                "--work-dir",
                str(tmp_path / "w4"),
                "--init-from",
                str(tmp_path),
            ]
        )
        != 0
    )
    assert "--init-from" in capsys.readouterr().err


def test_decoder_only_vae_keeps_the_latent_space_and_the_transformer(tmp_path, capsys):
    """``--vae-decoder-only --steps 0``: only the decoder is refitted; the encoder, the latent
    shift / scaling factors, the transformer and both text encoders are ``--init-from``'s."""
    from diffusers import AutoencoderKL
    from safetensors.torch import load_file

    from concept_grounding.cli import main

    first, second = tmp_path / "first", tmp_path / "second"
    assert main(["train-flux", "--tiny", "--out", str(first), "--work-dir", str(tmp_path / "w1"), "--no-progress"]) == 0
    assert (
        main(
            [
                "train-flux",
                "--tiny",
                "--out",
                str(second),
                "--work-dir",
                str(tmp_path / "w2"),
                "--no-progress",
                "--init-from",
                str(first),
                "--vae-decoder-only",
                "--vae-part-weight",
                "1",
                "--steps",
                "0",
            ]
        )
        == 0
    )
    a, b = AutoencoderKL.from_pretrained(first / "vae"), AutoencoderKL.from_pretrained(second / "vae")
    sa, sb = a.state_dict(), b.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa if k.startswith("encoder."))
    assert not all(torch.equal(sa[k], sb[k]) for k in sa if k.startswith("decoder."))
    assert (a.config.shift_factor, a.config.scaling_factor) == (b.config.shift_factor, b.config.scaling_factor)
    for sub in ("transformer/diffusion_pytorch_model", "text_encoder/model", "text_encoder_2/model"):
        ta, tb = load_file(first / f"{sub}.safetensors"), load_file(second / f"{sub}.safetensors")
        assert ta.keys() == tb.keys() and all(torch.equal(ta[k], tb[k]) for k in ta)
    assert json.loads((second / "train_log.json").read_text())["flux_steps"] == 0
    assert not (tmp_path / "w2" / "latents.pt").exists()  # no transformer training, no latents
    # both need a starting point, and say so in one line
    for extra in (["--vae-decoder-only"], ["--steps", "0"]):
        assert (
            main(
                [
                    "train-flux",
                    "--tiny",
                    "--out",
                    str(tmp_path / "x"),
                    "--work-dir",
                    str(tmp_path / "w3"),
                    "--no-progress",
                    *extra,
                ]
            )
            != 0
        )
        assert "init_from" in capsys.readouterr().err


def test_saved_config_keeps_its_flat_keys_and_old_files_still_load():
    """``to_dict`` writes the world's settings as the flat keys of the files written before the
    world was nested (same order, so a resumed work dir compares equal); an old file's unread
    ``extra`` is ignored and one without pose / scene was trained on the varied world."""
    cfg = FluxTrainConfig(world=replace(TRAINING_WORLD, class_names=TWO, seed=3), per_class=30)
    saved = cfg.to_dict()
    assert list(saved)[:4] == ["image_size", "per_class", "class_names", "vae_blocks"]
    assert list(saved)[-10:] == [
        "caption_dropout",
        "checkpoint_every",
        "seed",
        "pose",
        "zoom",
        "scene",
        "vae_deviant_per_class",
        "vae_part_weight",
        "init_from",
        "vae_decoder_only",
    ]
    assert saved["class_names"] == list(TWO) and saved["seed"] == 3 and "deviation_rate" not in saved
    assert FluxTrainConfig.from_dict({**saved, "extra": {}}) == cfg
    old = {k: v for k, v in saved.items() if k not in ("pose", "scene")}
    assert FluxTrainConfig.from_dict(old).world == replace(cfg.world, pose="varied", scene="varied")
    noisy = FluxTrainConfig(world=replace(TRAINING_WORLD, deviation_rate=0.2))
    assert FluxTrainConfig.from_dict(noisy.to_dict()) == noisy


def test_guide_caption_rate_keeps_the_default_draws_and_shifts_the_mix(world2):
    from concept_grounding.worldflux.captions import caption_thresholds

    labels = world2.sample(0).attributes
    default = [make_caption(labels, 0, world2, np.random.default_rng([0, i])) for i in range(400)]
    explicit = [make_caption(labels, 0, world2, np.random.default_rng([0, i]), 0.20) for i in range(400)]
    assert default == explicit  # the default rate draws the captions of earlier runs
    heavy = [make_caption(labels, 0, world2, np.random.default_rng([0, i]), 0.6) for i in range(400)]
    share = lambda caps: np.mean([c.startswith("a photo of a bird with") for c in caps])  # noqa: E731
    assert 0.12 < share(default) < 0.28 and 0.52 < share(heavy) < 0.68
    assert caption_thresholds(0.0)[2] == pytest.approx(caption_thresholds(0.0)[1])  # no guide captions at all
    with pytest.raises(ValueError, match="guide_rate"):
        caption_thresholds(1.0)
    with pytest.raises(ValueError, match="guide_captions"):
        FluxTrainConfig(guide_captions=-0.1)


def test_train_flux_transformer_only_run_keeps_the_init_vae(tmp_path):
    """--init-from with --vae-steps 0 and --guide-captions: the VAE (weights and latent
    factors) is the init's byte for byte; the config round-trips through config.json."""
    from safetensors.torch import load_file

    from concept_grounding.cli import main

    first = tmp_path / "first"
    assert main(["train-flux", "--tiny", "--out", str(first), "--work-dir", str(tmp_path / "w1"), "--no-progress"]) == 0
    second = tmp_path / "second"
    assert (
        main(
            [
                "train-flux",
                "--tiny",
                "--out",
                str(second),
                "--work-dir",
                str(tmp_path / "w2"),
                "--no-progress",
                "--init-from",
                str(first),
                "--vae-steps",
                "0",
                "--guide-captions",
                "0.5",
            ]
        )
        == 0
    )
    a = load_file(first / "vae" / "diffusion_pytorch_model.safetensors")
    b = load_file(second / "vae" / "diffusion_pytorch_model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    va, vb = (json.loads((f / "vae" / "config.json").read_text()) for f in (first, second))
    assert (va["shift_factor"], va["scaling_factor"]) == (vb["shift_factor"], vb["scaling_factor"])
    log = json.loads((second / "train_log.json").read_text())
    assert log["config"]["guide_captions"] == 0.5 and log["config"]["vae_steps"] == 0
    assert FluxTrainConfig.from_dict(log["config"]).guide_captions == 0.5
    assert "guide_captions" not in json.loads((first / "train_log.json").read_text())["config"]  # default: as before
    with pytest.raises(ValueError, match="vae_steps"):
        FluxTrainConfig(vae_steps=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_train_flux_device_cuda_without_cuda_is_one_line(tmp_path, capsys):
    from concept_grounding.cli import main

    code = main(
        [
            "train-flux",
            "--tiny",
            "--out",
            str(tmp_path / "o"),
            "--work-dir",
            str(tmp_path / "w"),
            "--no-progress",
            "--device",
            "cuda",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "device" in err[0] and "CUDA" in err[0]
    assert not (tmp_path / "w" / "data.npz").exists()  # refused before any rendering


def test_init_from_grows_the_vocabulary_for_compositions(tmp_path):
    """A folder trained without compositions starts a run with them (v3 -> v4 on the CPU): the
    text encoders' embedding rows of its words move to their new ids, the new words are added,
    and the attribute-preserving decoder fit weighs a composition's birds as one part."""
    from safetensors.torch import load_file
    from transformers import PreTrainedTokenizerFast

    from concept_grounding.cli import main

    first, second = tmp_path / "first", tmp_path / "second"
    assert main(["train-flux", "--tiny", "--out", str(first), "--work-dir", str(tmp_path / "w1"), "--no-progress"]) == 0
    assert (
        main(
            [
                "train-flux",
                "--tiny",
                "--out",
                str(second),
                "--work-dir",
                str(tmp_path / "w2"),
                "--no-progress",
                "--init-from",
                str(first),
                "--vae-decoder-only",
                "--vae-part-weight",
                "1",
                "--vae-steps",
                "1",
                "--steps",
                "1",
                "--compositions",
                "0.5",
            ]
        )
        == 0
    )
    with np.load(tmp_path / "w2" / "data.npz") as d, np.load(tmp_path / "w2" / "vae_data.npz") as v:
        composed, maps = d["composed"], v["part_maps"]
        assert np.array_equal(v["images"], d["images"]) and composed.any() and (~composed).any()
        assert set(np.unique(maps[composed])) == {0, 1} and maps[~composed].max() > 1
    old_tok = PreTrainedTokenizerFast.from_pretrained(first / "tokenizer").get_vocab()
    new_tok = PreTrainedTokenizerFast.from_pretrained(second / "tokenizer").get_vocab()
    assert set(old_tok) < set(new_tok) and {"two", "three", "facing", "sky"} <= set(new_tok) - set(old_tok)
    for sub, key in (("text_encoder", "embeddings.token_embedding.weight"), ("text_encoder_2", "shared.weight")):
        a = load_file(first / sub / "model.safetensors")[key].float()
        b = load_file(second / sub / "model.safetensors")[key].float()
        assert b.shape[0] == len(new_tok) > a.shape[0] == len(old_tok)
        # one step of lr 1e-4 moves a row by ~1e-4: each old word's row is where its word went
        for word in ("bird", "cardinal", "yellow"):
            assert torch.allclose(b[new_tok[word]], a[old_tok[word]], atol=2e-3), (sub, word)
            assert not torch.allclose(b[new_tok[word]], a[old_tok["bird" if word != "bird" else "a"]], atol=2e-3)


def test_grow_vocabulary_refuses_a_run_that_drops_a_word():
    from concept_grounding.worldflux.training_utils import grow_vocabulary

    state = {"emb": torch.ones(3, 2)}
    same = {"<pad>": 0, "a": 1, "bird": 2}
    assert grow_vocabulary(state, {"emb": torch.zeros(3, 2)}, same, dict(same)) is state
    with pytest.raises(ValueError, match=r"--init-from: .* lacks 1 of its words \(e.g. 'bird'\)"):
        grow_vocabulary(state, {"emb": torch.zeros(3, 2)}, same, {"<pad>": 0, "a": 1, "two": 2})
