"""A tiny, randomly initialised Stable Diffusion inpainting pipeline built from configs.

The layout follows diffusers' own fast tests for ``StableDiffusionInpaintPipeline``: a
two-level ``UNet2DConditionModel`` with ``in_channels=9`` (4 noisy latents + 4 latents of
the masked image + 1 mask), a two-level ``AutoencoderKL`` (``vae_scale_factor = 2``, so an
``H x W`` image has ``H/2 x W/2`` latents), a 2-layer ``CLIPTextModel``, the DDIM
scheduler and a ``CLIPTokenizer`` read from a vocab.json / merges.txt written here: the
special tokens, every lowercase letter, digit and some punctuation (with and without the
``</w>`` end-of-word suffix, so any word of those characters tokenises) plus merges that
make each of :data:`TINY_INPAINT_WORDS` one token. No safety checker.

:func:`save_tiny_inpainting_pipeline` writes it with ``save_pretrained``, so
``AutoPipelineForInpainting.from_pretrained(folder)`` loads it offline; at 32x32 px and 2
inference steps a call takes well under a second on a CPU. Outputs are noise-like images
(the model is untrained): it exists to test the mechanics of
:func:`~.covar.inpaint_backgrounds`.
"""

from __future__ import annotations

import json
import os
import string
from pathlib import Path

__all__ = ["TINY_INPAINT_WORDS", "save_tiny_inpainting_pipeline"]

_CHARS = string.ascii_lowercase + string.digits + ".,'-"
#: words the merges make single tokens (other words tokenise as smaller pieces / single characters)
TINY_INPAINT_WORDS: tuple[str, ...] = (
    "photo",
    "of",
    "the",
    "in",
    "on",
    "with",
    "and",
    "background",
    "forest",
    "beach",
    "sky",
    "city",
    "street",
    "grass",
    "snow",
    "sea",
    "desert",
    "room",
    "field",
    "mountain",
    "water",
    "blue",
    "green",
    "red",
    "white",
    "sunny",
    "night",
    "bird",
)


def _write_clip_tokenizer_files(folder: Path) -> None:
    """``vocab.json`` and ``merges.txt`` of a CLIP BPE: characters, then one left-to-right
    merge chain per word of :data:`TINY_INPAINT_WORDS` (``f o``, ``fo r``, ..., ``fores t</w>``),
    longest words first (a short word's merges, e.g. ``i n</w>``, would otherwise split
    ``mountain``)."""
    vocab: dict[str, int] = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for ch in _CHARS:
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault(ch + "</w>", len(vocab))
    merges: list[str] = []
    for word in sorted(TINY_INPAINT_WORDS, key=len, reverse=True):
        pieces = list(word[:-1]) + [word[-1] + "</w>"]
        left = pieces[0]
        for right in pieces[1:]:
            merge = f"{left} {right}"
            left += right
            if merge not in merges:
                merges.append(merge)
            vocab.setdefault(left, len(vocab))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab, indent=0), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")


def save_tiny_inpainting_pipeline(folder: str | os.PathLike[str], seed: int = 0) -> Path:
    """Build the tiny inpainting pipeline and ``save_pretrained`` it into ``folder``.

    Args:
        folder: created if missing; receives ``model_index.json`` and one sub-folder per
            component (``unet``, ``vae``, ``text_encoder``, ``tokenizer``, ``scheduler``).
        seed: seeds every module's random initialisation (same seed, same weights); the
            global torch RNG state is restored afterwards.

    Returns:
        ``folder`` as a :class:`~pathlib.Path`, ready for
        ``AutoPipelineForInpainting.from_pretrained``.
    """
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionInpaintPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    folder = Path(folder)
    _write_clip_tokenizer_files(folder / "tokenizer")
    tokenizer = CLIPTokenizer.from_pretrained(folder / "tokenizer", model_max_length=77)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        unet = UNet2DConditionModel(
            sample_size=16,
            in_channels=9,
            out_channels=4,
            block_out_channels=(8, 16),
            layers_per_block=1,
            norm_num_groups=4,
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
            cross_attention_dim=16,
            attention_head_dim=4,
        )
        torch.manual_seed(seed + 1)
        vae = AutoencoderKL(
            sample_size=32,
            in_channels=3,
            out_channels=3,
            block_out_channels=(8, 16),
            layers_per_block=1,
            norm_num_groups=4,
            down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
            up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
            latent_channels=4,
        )
        torch.manual_seed(seed + 2)
        text_encoder = CLIPTextModel(
            CLIPTextConfig(
                bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
                hidden_size=16,
                intermediate_size=32,
                num_attention_heads=2,
                num_hidden_layers=2,
                vocab_size=len(tokenizer),
                max_position_embeddings=tokenizer.model_max_length,
            )
        )
    scheduler = DDIMScheduler(  # Stable Diffusion's schedule
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    pipe = StableDiffusionInpaintPipeline(
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        unet=unet.eval(),
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(folder)
    return folder
