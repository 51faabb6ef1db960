"""The tiny random Flux built from configs: ``generate --tiny``, the Space's default model and the demo.

A 1+1-block ``FluxTransformer2DModel``, 2-layer CLIP and T5 encoders with character-level tokenizers built in
memory, a one-level VAE (an ``H x W`` image has ``H/2 x W/2`` latent tokens) and the flow-matching Euler scheduler,
laid out as diffusers' ``get_dummy_components()`` for Flux. Untrained (noise-like images): it runs the pipeline's
mechanics offline in well under a second (docs/tdg.md).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

from .sources import FluxModel

__all__ = ["tiny_flux_components", "tiny_flux_pipeline", "TinyFlux", "TINY_MODEL"]

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
        from .pipeline import TiedDiffusionPipeline

        pipeline_cls = TiedDiffusionPipeline
    pipe = pipeline_cls(**tiny_flux_components(seed, **kwargs))
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _tiny_pipeline() -> Any:
    return tiny_flux_pipeline()  # looked up when the model loads: tests may replace it


@dataclass(frozen=True)
class TinyFlux:
    """The ``generate`` job's :class:`~concept_grounding.tdg.sources.FluxSource` of the tiny random
    Flux (``--tiny``: tests, demo): float32, 32 px, 32-token prompts."""

    def resolve(self) -> FluxModel:
        return FluxModel(TINY_MODEL, "float32", 32, 32, _tiny_pipeline)
