"""Tiny, randomly initialised FLUX.2 pipelines built from configs (no downloads).

The layout follows diffusers' own FLUX.2 test components: a 1+1-block
``Flux2Transformer2DModel`` (``in_channels=4``, text width 16), a one-level
``AutoencoderKLFlux2`` (``vae_scale_factor = 1``: an ``H x W`` image has ``H/2 x W/2``
latent tokens) and the flow-matching Euler scheduler. The text encoder is a Mistral 3
(``Flux2Pipeline``) or a Qwen 3 (``Flux2KleinPipeline``, FLUX.2 [klein]), 16 wide and just deep
enough (30 / 27 layers) for the pipelines' default ``text_encoder_out_layers`` ((10, 20, 30) /
(9, 18, 27)), so the transformer reads 3 x 16 = 48-wide text and calls need no extra argument
(pass a short ``max_sequence_length``, :data:`TINY_FLUX2_CALL`); the tokenizer is character-level with a chat
template, built in memory, and truncates on the left so that a short ``max_sequence_length`` keeps the prompt
after FLUX.2's system message.
Outputs are noise-like: the models exist to test pipeline mechanics.
"""

from __future__ import annotations

import string
from typing import Any

__all__ = ["tiny_flux2_components", "tiny_flux2_pipeline", "TINY_FLUX2_CALL"]

#: Call arguments that keep a tiny FLUX.2 fast: 32 prompt tokens instead of 512.
TINY_FLUX2_CALL: dict[str, Any] = {"max_sequence_length": 32}

_CHARS = string.ascii_letters + string.digits + " .,:;'-_!?<>[]()/\n"
_SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]
_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: "
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def tiny_chat_tokenizer() -> Any:
    """A character-level ``PreTrainedTokenizerFast`` with a chat template, padding ``<pad>`` (id 0)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(_SPECIALS + list(dict.fromkeys(_CHARS)))}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        chat_template=_CHAT_TEMPLATE,
        truncation_side="left",
        model_max_length=512,
    )


def _text_encoder(klein: bool, vocab_size: int) -> Any:
    if klein:
        from transformers import Qwen3Config, Qwen3ForCausalLM

        return Qwen3ForCausalLM(
            Qwen3Config(
                hidden_size=16,
                intermediate_size=16,
                num_hidden_layers=27,
                num_attention_heads=2,
                num_key_value_heads=2,
                head_dim=8,
                vocab_size=vocab_size,
                max_position_embeddings=512,
                pad_token_id=0,
            )
        )
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration

    config = Mistral3Config(
        text_config={
            "model_type": "mistral",
            "vocab_size": vocab_size,
            "hidden_size": 16,
            "intermediate_size": 37,
            "max_position_embeddings": 512,
            "num_attention_heads": 4,
            "num_hidden_layers": 30,
            "num_key_value_heads": 2,
            "head_dim": 4,
            "sliding_window": None,
            "pad_token_id": 0,
        },
        vision_config={
            "model_type": "pixtral",
            "hidden_size": 16,
            "num_hidden_layers": 1,
            "num_attention_heads": 4,
            "intermediate_size": 37,
            "image_size": 30,
            "patch_size": 6,
            "num_channels": 3,
        },
        image_token_index=1,
        image_seq_length=4,
        vision_feature_layer=-1,
    )
    return Mistral3ForConditionalGeneration(config)


def tiny_flux2_components(seed: int = 0, *, klein: bool = False) -> dict[str, Any]:
    """The components dict for ``Flux2Pipeline(**c)`` (``klein=False``) or ``Flux2KleinPipeline(**c)``.

    Deterministic in ``seed``; torch's global random state is left as it was.
    """
    import torch
    from diffusers import AutoencoderKLFlux2, FlowMatchEulerDiscreteScheduler, Flux2Transformer2DModel

    tokenizer = tiny_chat_tokenizer()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        transformer = Flux2Transformer2DModel(
            patch_size=1,
            in_channels=4,
            num_layers=1,
            num_single_layers=1,
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=48,
            timestep_guidance_channels=256,
            axes_dims_rope=[4, 4, 4, 4],
            guidance_embeds=not klein,
        )
        torch.manual_seed(seed + 1)
        text_encoder = _text_encoder(klein, len(tokenizer))
        torch.manual_seed(seed + 2)
        vae = AutoencoderKLFlux2(
            sample_size=32,
            in_channels=3,
            out_channels=3,
            down_block_types=("DownEncoderBlock2D",),
            up_block_types=("UpDecoderBlock2D",),
            block_out_channels=(4,),
            layers_per_block=1,
            latent_channels=1,
            norm_num_groups=1,
            use_quant_conv=False,
            use_post_quant_conv=False,
        )
    for module in (transformer, text_encoder, vae):
        module.eval()
    return {
        "scheduler": FlowMatchEulerDiscreteScheduler(),
        "text_encoder": text_encoder,
        "tokenizer": tokenizer,
        "transformer": transformer,
        "vae": vae,
    }


def tiny_flux2_pipeline(pipeline_cls: type | None = None, seed: int = 0, *, klein: bool | None = None) -> Any:
    """A tiny FLUX.2 pipeline of class ``pipeline_cls`` (default: the TDG pipeline,
    :class:`~concept_grounding.tdg.TiedFlux2Pipeline` or, with ``klein=True``,
    :class:`~concept_grounding.tdg.TiedFlux2KleinPipeline`).

    ``klein`` (default: whether ``pipeline_cls`` is a ``Flux2KleinPipeline``) picks the Qwen 3
    text encoder and a transformer without guidance embedding. Call it with
    ``**TINY_FLUX2_CALL`` and small ``height``/``width`` (multiples of 2).

    >>> pipe = tiny_flux2_pipeline(klein=True)
    >>> out = pipe("a red bird", "a bird", height=16, width=16, num_inference_steps=2, output_type="pt",
    ...            **TINY_FLUX2_CALL)
    >>> tuple(out.images.shape), tuple(out.guide_images.shape)
    ((1, 3, 16, 16), (1, 3, 16, 16))
    """
    if pipeline_cls is None:
        from ..tdg.pipeline_flux2 import TiedFlux2KleinPipeline, TiedFlux2Pipeline

        pipeline_cls = TiedFlux2KleinPipeline if klein else TiedFlux2Pipeline
    if klein is None:
        from diffusers import Flux2KleinPipeline

        klein = issubclass(pipeline_cls, Flux2KleinPipeline)
    pipe = pipeline_cls(**tiny_flux2_components(seed, klein=klein))
    pipe.set_progress_bar_config(disable=True)
    return pipe
