"""After ``learn``, diffusers' own calls load each learner's files with no project code, and the
loaded weights change what the pipeline draws for ``a photo of <v*>``."""

from __future__ import annotations

import pytest
import torch

PROMPT, TOKEN = "a photo of <v*>", "<v*>"


def _base():
    from diffusers import FluxPipeline

    from concept_grounding.worldflux.loader import world_flux_path

    pipe = FluxPipeline.from_pretrained(world_flux_path(), torch_dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _learn(method, images, out):
    from concept_grounding.learners import LearnConfig, learn

    config = LearnConfig(
        method=method, images=images, steps=2, batch=2, lr=5e-2, num_prior=2, prior_steps=2, rank=4, progress=False
    )
    return learn(config, out)


def _load_rows(pipe, path):
    """V*'s rows of a pivotal-tuning file, as diffusers' advanced Flux script documents loading them."""
    from safetensors.torch import load_file

    state = load_file(path)
    pipe.load_textual_inversion(
        state["clip_l"], token=[TOKEN], text_encoder=pipe.text_encoder, tokenizer=pipe.tokenizer
    )
    pipe.load_textual_inversion(
        state["t5"], token=[TOKEN], text_encoder=pipe.text_encoder_2, tokenizer=pipe.tokenizer_2
    )


def _bird_rows(pipe):
    """V* added at 'bird''s rows (textual inversion's start)."""
    for enc, tok in (("text_encoder", "tokenizer"), ("text_encoder_2", "tokenizer_2")):
        tokenizer, encoder = getattr(pipe, tok), getattr(pipe, enc)
        ids = tokenizer("bird", add_special_tokens=False).input_ids
        row = encoder.get_input_embeddings().weight[ids].mean(0).detach()
        pipe.load_textual_inversion({TOKEN: row}, token=TOKEN, text_encoder=encoder, tokenizer=tokenizer)


def test_lora_loads_with_load_lora_weights(sample, concept_dir, tmp_path):
    out = _learn("lora", concept_dir, tmp_path / "lora")
    assert (out / "pytorch_lora_weights.safetensors").is_file() and (out / "lora_emb.safetensors").is_file()
    pipe = _base()
    _load_rows(pipe, out / "lora_emb.safetensors")
    before = sample(pipe)
    pipe.load_lora_weights(str(out), weight_name="pytorch_lora_weights.safetensors")
    assert not torch.allclose(sample(pipe), before, atol=1e-5)


@pytest.mark.parametrize("loader", ["pivotal_tuning_file", "learned_embeds"])
def test_textual_inversion_loads_with_load_textual_inversion(loader, sample, concept_dir, tmp_path):
    out = _learn("textual_inversion", concept_dir, tmp_path / "ti")
    start = _base()
    _bird_rows(start)
    pipe = _base()
    if loader == "learned_embeds":  # the CLIP row, read by the loader's default file name
        pipe.load_textual_inversion(str(out))
        start = _base()
        _bird_rows(start)
        pipe.load_textual_inversion(
            {TOKEN: start.text_encoder_2.get_input_embeddings().weight[-1].detach()},
            token=TOKEN,
            text_encoder=pipe.text_encoder_2,
            tokenizer=pipe.tokenizer_2,
        )
    else:
        _load_rows(pipe, out / "ti_emb.safetensors")
    assert pipe.tokenizer.convert_tokens_to_ids(TOKEN) == len(pipe.tokenizer) - 1
    assert not torch.allclose(sample(pipe), sample(start), atol=1e-5)


def test_dreambooth_loads_with_from_pretrained(sample, concept_dir, tmp_path):
    from diffusers import FluxPipeline, FluxTransformer2DModel

    from concept_grounding.worldflux.loader import world_flux_path

    out = _learn("dreambooth", concept_dir, tmp_path / "db")
    transformer = FluxTransformer2DModel.from_pretrained(out, subfolder="transformer")
    pipe = FluxPipeline.from_pretrained(world_flux_path(), transformer=transformer, torch_dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    base = _base()
    for p in (pipe, base):
        _load_rows(p, out / "db_emb.safetensors")
    assert not torch.allclose(sample(pipe), sample(base), atol=1e-5)
