"""A tiny, randomly initialised Flux pipeline built from configs (no downloads).

The layout follows diffusers' own ``get_dummy_components()`` for Flux: a 1+1-block
``FluxTransformer2DModel``, a 2-layer CLIP text encoder, a 2-layer T5 encoder, a
one-level VAE (``vae_scale_factor = 1``, so an ``H x W`` image has ``H/2 x W/2``
latent tokens) and the flow-matching Euler scheduler. The tokenizers are built in
memory with a character-level vocabulary, so the pipeline works offline, in well
under a second, and survives ``save_pretrained`` / ``from_pretrained``.

Outputs are noise-like images: the model is untrained. It exists to test the
pipeline mechanics (batch layout, ties, schedules, resumable writing) and for the
demo.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

from ..tdg.sources import FluxModel

__all__ = ["tiny_flux_components", "tiny_flux_pipeline", "tiny_flux_ip_adapter", "TinyFlux", "TINY_MODEL"]

#: The manifest's ``model`` of :class:`TinyFlux`.
TINY_MODEL = "tiny_flux_pipeline(seed=0)"

_CHARS = string.ascii_lowercase + string.digits + ".,'-"


def _clip_tokenizer() -> Any:
    from transformers import CLIPTokenizer

    specials = ["<|startoftext|>", "<|endoftext|>"]
    vocab = {tok: i for i, tok in enumerate(specials)}
    for ch in _CHARS:
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault(ch + "</w>", len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def _t5_tokenizer() -> Any:
    from transformers import T5TokenizerFast

    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    pieces += [(ch, -3.0) for ch in _CHARS]
    pieces += [("\u2581" + ch, -3.5) for ch in _CHARS]
    return T5TokenizerFast(vocab=pieces, extra_ids=0, model_max_length=512)


def tiny_flux_components(seed: int = 0, *, num_layers: int = 1, num_single_layers: int = 1) -> dict[str, Any]:
    """The components dict for ``FluxPipeline(**components)``, deterministic in ``seed``.

    Args:
        seed: seeds every module's random initialisation.
        num_layers: double-stream (MM-DiT) blocks of the transformer.
        num_single_layers: single-stream blocks of the transformer.
    """
    import torch
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    clip_tok, t5_tok = _clip_tokenizer(), _t5_tokenizer()
    with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left as it was
        torch.manual_seed(seed)
        transformer = FluxTransformer2DModel(
            patch_size=1,
            in_channels=4,
            num_layers=num_layers,
            num_single_layers=num_single_layers,
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=32,
            pooled_projection_dim=32,
            axes_dims_rope=[4, 4, 8],
            guidance_embeds=True,
        )
        torch.manual_seed(seed + 1)
        text_encoder = CLIPTextModel(
            CLIPTextConfig(
                bos_token_id=0,
                eos_token_id=1,
                pad_token_id=1,
                hidden_size=32,
                intermediate_size=37,
                num_attention_heads=4,
                num_hidden_layers=2,
                vocab_size=len(clip_tok),
                projection_dim=32,
                max_position_embeddings=77,
            )
        )
        torch.manual_seed(seed + 2)
        text_encoder_2 = T5EncoderModel(
            T5Config(
                vocab_size=len(t5_tok),
                d_model=32,
                d_kv=8,
                d_ff=37,
                num_layers=2,
                num_heads=4,
                relative_attention_num_buckets=8,
                pad_token_id=0,
                eos_token_id=1,
            )
        )
        torch.manual_seed(seed + 3)
        vae = AutoencoderKL(
            sample_size=32,
            in_channels=3,
            out_channels=3,
            block_out_channels=(4,),
            layers_per_block=1,
            latent_channels=1,
            norm_num_groups=1,
            use_quant_conv=False,
            use_post_quant_conv=False,
            shift_factor=0.0609,
            scaling_factor=1.5035,
        )
    for module in (transformer, text_encoder, text_encoder_2, vae):
        module.eval()  # fresh modules start in training mode (T5 dropout); from_pretrained gives eval
    return {
        "scheduler": FlowMatchEulerDiscreteScheduler(),
        "text_encoder": text_encoder,
        "text_encoder_2": text_encoder_2,
        "tokenizer": clip_tok,
        "tokenizer_2": t5_tok,
        "transformer": transformer,
        "vae": vae,
        "image_encoder": None,
        "feature_extractor": None,
    }


def tiny_flux_pipeline(pipeline_cls: type | None = None, seed: int = 0, **kwargs: int) -> Any:
    """A tiny pipeline of class ``pipeline_cls`` (default :class:`TiedDiffusionPipeline`).

    ``kwargs`` go to :func:`tiny_flux_components`. Use ``max_sequence_length=32`` and
    small ``height``/``width`` (multiples of 2, e.g. 16) when calling it.
    """
    if pipeline_cls is None:
        from ..tdg.pipeline import TiedDiffusionPipeline

        pipeline_cls = TiedDiffusionPipeline
    pipe = pipeline_cls(**tiny_flux_components(seed, **kwargs))
    pipe.set_progress_bar_config(disable=True)
    return pipe


def tiny_flux_ip_adapter(transformer: Any, seed: int = 0, num_tokens: int = 4) -> dict[str, dict[str, Any]]:
    """A random FLUX IP-Adapter for ``transformer``, in the layout ``FluxPipeline.load_ip_adapter`` reads.

    ``image_proj``: image embeddings (``pooled_projection_dim`` wide) -> ``num_tokens`` text-width
    tokens (a linear map and a layer norm); ``ip_adapter``: per double-stream block ``i``, the
    key/value maps ``i.to_k_ip`` / ``i.to_v_ip`` from the text width to the attention width.
    Deterministic in ``seed``; the global RNG is untouched. Load it with
    ``pipe.load_ip_adapter(state, weight_name="", image_encoder_pretrained_model_name_or_path=None)``.
    """
    import torch

    config = transformer.config
    text, width = config.joint_attention_dim, config.num_attention_heads * config.attention_head_dim
    generator = torch.Generator().manual_seed(seed)

    def rand(*shape: int) -> Any:
        return torch.randn(*shape, generator=generator) * 0.1

    image_proj = {"proj.weight": rand(num_tokens * text, config.pooled_projection_dim),
                  "proj.bias": rand(num_tokens * text), "norm.weight": torch.ones(text), "norm.bias": torch.zeros(text)}
    ip_adapter = {}
    for i in range(config.num_layers):
        for name in ("to_k_ip", "to_v_ip"):
            ip_adapter[f"{i}.{name}.weight"], ip_adapter[f"{i}.{name}.bias"] = rand(width, text), rand(width)
    return {"image_proj": image_proj, "ip_adapter": ip_adapter}


def _tiny_pipeline() -> Any:
    from concept_grounding.testing import tiny_flux_pipeline  # the package attribute: tests may replace it

    return tiny_flux_pipeline()


@dataclass(frozen=True)
class TinyFlux:
    """The ``generate`` job's :class:`~concept_grounding.tdg.sources.FluxSource` of the tiny random
    Flux (``--tiny``: tests, demo): float32, 32 px, 32-token prompts."""

    def resolve(self) -> FluxModel:
        return FluxModel(TINY_MODEL, "float32", 32, 32, _tiny_pipeline)
