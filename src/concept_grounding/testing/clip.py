"""Tiny CLIP models built from configs (random weights, no download) for tests and demos.

All builders return models in eval mode with a seeded initialisation; the caller's global
torch RNG is left untouched (``torch.random.fork_rng``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..models.clip.tiny import tiny_open_clip

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from torch import nn

__all__ = [
    "tiny_open_clip",  # from concept_grounding.models.clip.tiny
    "tiny_transformers_clip",
    "save_tiny_transformers_clip",
    "vit_b16_open_clip_visual",
    "known_answer_open_clip",
]


def vit_b16_open_clip_visual(seed: int = 0) -> nn.Module:
    """The ViT-B/16 image tower geometry (224 px, 197 tokens, 12 layers, width 768), random."""
    return tiny_open_clip(224, 16, 768, 12, 12, 512, seed=seed, with_text=False)


def tiny_transformers_clip(
    image_size: int = 32,
    patch_size: int = 8,
    width: int = 32,
    layers: int = 2,
    heads: int = 4,
    embed_dim: int = 16,
    seed: int = 0,
    vision_only: bool = False,
) -> nn.Module:
    """A transformers ``CLIPModel`` (or ``CLIPVisionModelWithProjection``), random, eval mode."""
    import torch
    from transformers import CLIPConfig, CLIPModel, CLIPVisionConfig, CLIPVisionModelWithProjection

    vcfg = dict(
        hidden_size=width,
        intermediate_size=4 * width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        image_size=image_size,
        patch_size=patch_size,
        projection_dim=embed_dim,
    )
    tcfg = dict(
        hidden_size=width,
        intermediate_size=4 * width,
        num_hidden_layers=1,
        num_attention_heads=heads,
        vocab_size=1000,
        max_position_embeddings=32,
        projection_dim=embed_dim,
        bos_token_id=998,
        eos_token_id=999,
        pad_token_id=1,
    )
    with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left as it was
        torch.manual_seed(seed)
        if vision_only:
            return CLIPVisionModelWithProjection(CLIPVisionConfig(**vcfg)).eval()
        return CLIPModel(CLIPConfig(text_config=tcfg, vision_config=vcfg, projection_dim=embed_dim)).eval()


def save_clip_bpe_tokenizer(folder: str | Path, model_max_length: int = 32) -> tuple[Any, dict[str, int]]:
    """Write open_clip's bundled BPE (the real CLIP vocabulary, 49408 tokens) to ``folder`` as a
    transformers ``CLIPTokenizer``'s ``vocab.json`` + ``merges.txt``; returns that tokenizer and
    the vocabulary written (offline: the files ship with open_clip)."""
    import json
    from pathlib import Path

    from open_clip.tokenizer import SimpleTokenizer
    from transformers import CLIPTokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    bpe = SimpleTokenizer()
    vocab = {
        {"<start_of_text>": "<|startoftext|>", "<end_of_text>": "<|endoftext|>"}.get(k, k): v
        for k, v in bpe.encoder.items()
    }
    (folder / "vocab.json").write_text(json.dumps(vocab))
    merges = sorted(bpe.bpe_ranks, key=bpe.bpe_ranks.get)
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n")
    tokenizer = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=model_max_length)
    return tokenizer, vocab


def save_tiny_transformers_clip(folder: str | Path, image_size: int = 32, seed: int = 1) -> Path:
    """Save a config-built transformers ``CLIPModel`` with a ``CLIPProcessor`` whose tokenizer
    files are open_clip's bundled BPE (the real CLIP vocabulary, 49408 tokens), like a Hub
    checkpoint: ``CLIPModel.from_pretrained(folder)`` and ``CLIPProcessor.from_pretrained(folder)``
    load it offline. The token embeddings are re-drawn for the full vocabulary from ``seed``."""
    from pathlib import Path

    import torch
    from transformers import CLIPImageProcessor, CLIPProcessor

    folder = Path(folder)
    tokenizer, vocab = save_clip_bpe_tokenizer(folder, model_max_length=32)
    processor = CLIPProcessor(
        image_processor=CLIPImageProcessor(
            size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
        ),
        tokenizer=tokenizer,
    )
    model = tiny_transformers_clip(image_size=image_size)
    text = model.config.text_config
    text.vocab_size = len(vocab)
    model.text_model.embeddings.token_embedding = torch.nn.Embedding(len(vocab), text.hidden_size)
    text.eos_token_id, text.bos_token_id = vocab["<|endoftext|>"], vocab["<|startoftext|>"]
    with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left as it was
        torch.manual_seed(seed)
        torch.nn.init.normal_(model.text_model.embeddings.token_embedding.weight, std=0.02)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def known_answer_open_clip(image_size: int = 16, patch_size: int = 4, gain: float = 10.0) -> nn.Module:
    """A one-layer open_clip ViT whose CLS output depends only on *red* patches.

    Width 4, one head. Red pixels (channel 0) embed to ``r = [1, 1, -1, -1]``, blue pixels
    (channel 2) to ``b = [1, -1, 1, -1]``; the class token is ``c = [1, -1, -1, 1]`` and the
    positional embeddings are 0 (all three are zero-mean, unit-variance, so the LayerNorms
    are near identities). The CLS query meets a key ``gain * c`` on red tokens only (logit
    ``2 * gain``, vs 0 elsewhere), and only red tokens carry a value (``b``); the MLP is
    zero. So the CLS output is ``≈ c + b`` with red patches present and ``c`` with them cut
    out: with the text ``t = z`` the red cluster's drop is ``1 - cos(c, c + b) ≈ 0.29`` and
    the blue cluster's drop is ``O(e^{-2 gain})``; CCI's map must be the red indicator.
    """
    import torch

    model = tiny_open_clip(image_size, patch_size, width=4, layers=1, heads=1, embed_dim=4, with_text=False)
    r = torch.tensor([1.0, 1.0, -1.0, -1.0])
    b = torch.tensor([1.0, -1.0, 1.0, -1.0])
    c = torch.tensor([1.0, -1.0, -1.0, 1.0])
    p2 = float(patch_size * patch_size)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        w = torch.zeros(4, 3, patch_size, patch_size)
        w[:, 0] = r[:, None, None] / p2
        w[:, 2] = b[:, None, None] / p2
        model.conv1.weight.copy_(w)
        model.class_embedding.copy_(c)
        for ln in (model.ln_pre, model.ln_post):
            ln.weight.fill_(1.0)
        blk = model.transformer.resblocks[0]
        blk.ln_1.weight.fill_(1.0)
        blk.ln_2.weight.fill_(1.0)
        wq = torch.outer(c, c) / 4  # q(c) = c, q(r) = q(b) = 0
        wk = gain * torch.outer(c, r) / 4  # k(r) = gain * c, k(b) = k(c) = 0
        wv = torch.outer(b, r) / 4  # v(r) = b, v(b) = v(c) = 0
        blk.attn.in_proj_weight.copy_(torch.cat([wq, wk, wv]))
        blk.attn.out_proj.weight.copy_(torch.eye(4))
        model.proj.copy_(torch.eye(4))
    return model.eval()
