"""A tiny, randomly initialised LLaVA saved to a folder (no downloads).

:func:`save_tiny_vlm` builds a LLaVA from configs (a 2-layer CLIP vision tower on
16 x 16 images with 8 x 8 patches, a 2-layer Llama), a word-level tokenizer made with
the ``tokenizers`` library (the letters ``A``-``Z``, every word of SUB's VQA questions,
``<image>`` and the special tokens), a ``CLIPImageProcessor`` and a ``LlavaProcessor``
with a one-turn ``USER: ... ASSISTANT:`` chat template, and writes them with
``save_pretrained``, so that ``AutoProcessor.from_pretrained(folder)`` and
``AutoModelForImageTextToText.from_pretrained(folder)`` load it offline, the way the
``filter --scorer vlm`` command does.

:func:`save_tiny_internvl` builds SUB's own scorer's architecture the same way: InternVL 2.5
(an InternViT vision tower, pixel-shuffle projector, an InternLM2 language model) in the
form transformers' ``convert_internvl_weights_to_hf.py`` converts it to
(``InternVLForConditionalGeneration`` with a Llama text model, ``InternVLProcessor`` with
``<img>`` / ``<IMG_CONTEXT>`` / ``</img>`` image tokens), so ``filter --scorer vlm
--vlm-model <converted InternVL2.5-8B>`` takes the path the tests take.

An image becomes ``(16 / 8) ** 2 = 4`` vision tokens (the CLS token is dropped,
``vision_feature_select_strategy="default"``), so the processor expands one ``<image>``
into 4. The answers are meaningless; the model exists to test the VQA filter's plumbing.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

__all__ = ["save_tiny_vlm", "save_tiny_internvl", "TINY_VLM_CHAT_TEMPLATE", "tiny_vlm_words"]

IMAGE_TOKEN = "<image>"
SPECIAL_TOKENS = ["<pad>", "<unk>", "<s>", "</s>", IMAGE_TOKEN]
IMAGE_SIZE, PATCH_SIZE = 16, 8

#: one user turn (an image and a text), then ``ASSISTANT:`` when a generation prompt is asked for
TINY_VLM_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ message['role'] | upper }}: "
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def tiny_vlm_words() -> list[str]:
    """The word-level vocabulary (without special tokens): letters, then the words of every SUB question.

    Words are the ``Whitespace`` pre-tokenizer's pieces of each group's :func:`vqa_question`, of the
    scorer's answer suffix and of the chat template's role names.
    """
    from tokenizers.pre_tokenizers import Whitespace

    from ..tdg.filter import group_options, vqa_question
    from ..vocabulary import load_vocabulary

    vocab = load_vocabulary()
    texts = [vqa_question(g, group_options(g, vocab)) for g in vocab.groups]
    texts += [" Answer with the option's letter.", "USER: ASSISTANT: SYSTEM:"]
    words = list(string.ascii_uppercase)
    pre = Whitespace()
    for text in texts:
        for piece, _ in pre.pre_tokenize_str(text):
            if piece not in words:
                words.append(piece)
    return words


def _tokenizer(model_max_length: int = 512) -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + tiny_vlm_words())}
    tok = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    tok.add_special_tokens(SPECIAL_TOKENS)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=model_max_length,
    )


def save_tiny_vlm(folder: str | Path, seed: int = 0, chat_template: bool = True) -> Path:
    """Build the tiny LLaVA and its processor, deterministic in ``seed``, and save both to ``folder``.

    Args:
        folder: created if missing; receives ``config.json``, the weights, the tokenizer,
            the image processor and the processor config.
        seed: seeds the model's random initialisation.
        chat_template: give the processor :data:`TINY_VLM_CHAT_TEMPLATE` (else it has none).
    Returns:
        ``folder`` as a :class:`~pathlib.Path`.
    """
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    folder = Path(folder)
    tokenizer = _tokenizer()
    image_token_id = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=IMAGE_SIZE,
        patch_size=PATCH_SIZE,
        projection_dim=32,
    )
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=image_token_id,
        projector_hidden_act="gelu",
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left as it was
        torch.manual_seed(seed)
        model = LlavaForConditionalGeneration(config).eval()
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": IMAGE_SIZE},
        crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        image_token=IMAGE_TOKEN,
        chat_template=TINY_VLM_CHAT_TEMPLATE if chat_template else None,
    )
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


#: InternVL's image tokens (transformers' converted checkpoints), then a video token the processor requires
INTERNVL_TOKENS = {
    "start_image_token": "<img>",
    "end_image_token": "</img>",
    "context_image_token": "<IMG_CONTEXT>",
    "video_token": "<video>",
}


def save_tiny_internvl(folder: str | Path, seed: int = 0) -> Path:
    """Build a tiny InternVL 2.5-architecture VLM and its processor (converted HF form; see the
    module docstring), deterministic in ``seed``, and save both to ``folder``.

    16 x 16 images in 4 x 4 patches -> 16 vision tokens -> 4 after InternVL's pixel shuffle
    (``downsample_ratio=0.5``), so the processor expands ``<IMG_CONTEXT>`` into 4; a 2-layer
    InternViT and a 2-layer Llama (InternLM2 as converted). Its answers are meaningless.
    """
    import torch
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import (
        GotOcr2ImageProcessor,
        InternVLConfig,
        InternVLForConditionalGeneration,
        InternVLProcessor,
        InternVLVideoProcessor,
        InternVLVisionConfig,
        LlamaConfig,
        PreTrainedTokenizerFast,
    )

    specials = SPECIAL_TOKENS[:4] + list(INTERNVL_TOKENS.values())
    vocab = {tok: i for i, tok in enumerate(specials + tiny_vlm_words())}
    raw = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = Whitespace()
    raw.add_special_tokens(specials)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        extra_special_tokens=dict(INTERNVL_TOKENS),
    )
    vision = InternVLVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=[IMAGE_SIZE, IMAGE_SIZE],
        patch_size=[4, 4],
    )
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    config = InternVLConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=tokenizer.context_image_token_id,
        image_seq_length=4,
        downsample_ratio=0.5,
    )
    with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left as it was
        torch.manual_seed(seed)
        model = InternVLForConditionalGeneration(config).eval()
    size = {"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    processor = InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(size=size, crop_to_patches=False),
        tokenizer=tokenizer,
        video_processor=InternVLVideoProcessor(size=size),
        image_seq_length=4,
        chat_template=TINY_VLM_CHAT_TEMPLATE.replace(IMAGE_TOKEN, INTERNVL_TOKENS["context_image_token"]),
    )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
