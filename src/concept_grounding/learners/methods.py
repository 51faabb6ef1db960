"""What each learner trains on a ``FluxPipeline``, how it is saved, and how diffusers loads it back.

V* is a new token of both tokenizers (diffusers' ``pipe.load_textual_inversion``); everything but a
method's trained parameters is frozen, and each result is saved in the format diffusers' own loaders
read (``learned.json`` names the files). Which parameters each method trains, and the files:
docs/guide/conceptbed.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "ENCODERS",
    "LORA_TARGETS",
    "EMBED_FILES",
    "add_placeholder",
    "trainable_parameters",
    "custom_diffusion_parameters",
    "save_learned",
    "load_learned",
]

#: (text encoder, tokenizer) attribute pairs of a FluxPipeline, in the order of :data:`EMBED_FILES`.
ENCODERS = (("text_encoder", "tokenizer"), ("text_encoder_2", "tokenizer_2"))
EMBED_FILES = ("learned_embeds.safetensors", "learned_embeds_2.safetensors")
#: attention projections LoRA adapts (diffusers' train_dreambooth_lora_flux default).
LORA_TARGETS = ("to_k", "to_q", "to_v", "to_out.0", "add_k_proj", "add_q_proj", "add_v_proj", "to_add_out")
LORA_FILE = "pytorch_lora_weights.safetensors"
CUSTOM_FILE = "custom_diffusion.safetensors"
TRANSFORMER_DIR = "transformer"


def _init_row(encoder: Any, tokenizer: Any, init_word: str | None, generator: Any) -> Any:
    """(D,) float32 start of V*'s row: ``init_word``'s mean embedding, or (``None``) a random row
    with the table's per-dimension mean and std."""
    import torch

    table = encoder.get_input_embeddings().weight.detach().float().cpu()
    if init_word is None:
        noise = torch.randn(table.shape[1], generator=generator)
        return table.mean(0) + table.std(0) * noise
    ids = [i for i in tokenizer(init_word, add_special_tokens=False).input_ids if i != tokenizer.unk_token_id]
    return table[ids].mean(0)


class _RowHook:
    """Forward hook of an input embedding: positions holding ``token_id`` read ``row`` instead."""

    def __init__(self, token_id: int, row: Any) -> None:
        self.token_id, self.row = token_id, row

    def __call__(self, module: Any, args: tuple, output: Any) -> Any:
        import torch

        mask = (args[0] == self.token_id).unsqueeze(-1)
        return torch.where(mask, self.row.to(output.dtype), output)


def add_placeholder(pipe: Any, token: str, init_word: str | None, trainable: bool, seed: int) -> dict[str, Any]:
    """Add ``token`` to both tokenizers / text encoders through ``pipe.load_textual_inversion``.

    Args:
        init_word: the word whose embedding starts the row; ``None``: a seeded random row.
        trainable: hook a float32 parameter in as the row (see module doc).
    Returns:
        encoder attribute name -> its (D,) row parameter (trainable) or tensor (fixed).
    """
    import torch

    g = torch.Generator().manual_seed(seed * 7919 + 11)
    rows: dict[str, Any] = {}
    for enc_name, tok_name in ENCODERS:
        encoder, tokenizer = getattr(pipe, enc_name), getattr(pipe, tok_name)
        row = _init_row(encoder, tokenizer, init_word, g)
        pipe.load_textual_inversion(
            {token: row.to(encoder.dtype)}, token=token, tokenizer=tokenizer, text_encoder=encoder
        )
        if trainable:
            row = torch.nn.Parameter(row.to(encoder.device))
            hook = _RowHook(tokenizer.convert_tokens_to_ids(token), row)
            encoder.get_input_embeddings().register_forward_hook(hook)
        rows[enc_name] = row
    return rows


def custom_diffusion_parameters(transformer: Any) -> Iterator[tuple[str, Any]]:
    """``(name, parameter)`` of the key/value projections that read text (module doc)."""
    for name, param in transformer.named_parameters():
        parts = name.split(".")
        if (parts[0] == "transformer_blocks" and ("add_k_proj" in parts or "add_v_proj" in parts)) or (
            parts[0] == "single_transformer_blocks" and ("to_k" in parts or "to_v" in parts)
        ):
            yield name, param


def trainable_parameters(pipe: Any, method: str, rows: dict[str, Any], rank: int, seed: int) -> dict[str, Any]:
    """Freeze ``pipe`` and unfreeze (or add) what ``method`` trains; name -> parameter.

    Names: ``row.<encoder>`` for V*'s rows, the transformer's parameter names otherwise.
    """
    import torch

    for enc_name, _ in ENCODERS:
        getattr(pipe, enc_name).requires_grad_(False)
    transformer = pipe.transformer
    transformer.requires_grad_(False)
    out: dict[str, Any] = {}
    if method in ("textual_inversion", "custom_diffusion"):
        out.update({f"row.{k}": v for k, v in rows.items()})
    if method == "dreambooth":
        transformer.requires_grad_(True)
        out.update(dict(transformer.named_parameters()))
    elif method == "lora":
        from diffusers.training_utils import cast_training_params
        from peft import LoraConfig

        torch.manual_seed(seed)  # peft draws the A matrices from torch's global generator
        transformer.add_adapter(
            LoraConfig(r=rank, lora_alpha=rank, init_lora_weights="gaussian", target_modules=list(LORA_TARGETS))
        )
        cast_training_params(transformer, dtype=torch.float32)
        out.update({n: p for n, p in transformer.named_parameters() if p.requires_grad})
    elif method == "custom_diffusion":
        for name, param in custom_diffusion_parameters(transformer):
            param.requires_grad_(True)
            out[name] = param
    return out


def save_learned(
    pipe: Any, method: str, token: str, rows: dict[str, Any], params: dict[str, Any], folder: Path
) -> list[str]:
    """Write ``method``'s files (module doc) into ``folder``; return their names."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for (enc_name, _), name in zip(ENCODERS, EMBED_FILES):
        save_file({token: rows[enc_name].detach().float().cpu().contiguous()}, folder / name)
        written.append(name)
    transformer = pipe.transformer
    if method == "lora":
        from diffusers import FluxPipeline
        from peft.utils import get_peft_model_state_dict

        FluxPipeline.save_lora_weights(
            folder, transformer_lora_layers=get_peft_model_state_dict(transformer), safe_serialization=True
        )
        written.append(LORA_FILE)
    elif method == "dreambooth":
        transformer.save_pretrained(folder / TRANSFORMER_DIR, safe_serialization=True)
        written.append(TRANSFORMER_DIR)
    elif method == "custom_diffusion":
        tensors = {k: v.detach().cpu().contiguous() for k, v in params.items() if not k.startswith("row.")}
        save_file(tensors, folder / CUSTOM_FILE)
        written.append(CUSTOM_FILE)
    return written


def load_learned(pipe: Any, folder: str | Path) -> Any:
    """Apply a learner's folder (written by :func:`~concept_grounding.learners.learn`) to ``pipe``.

    V* goes in through ``pipe.load_textual_inversion`` (both encoders), LoRA through
    ``pipe.load_lora_weights``, DreamBooth's transformer through
    ``FluxTransformer2DModel.from_pretrained``, Custom Diffusion's tensors through
    ``transformer.load_state_dict(strict=False)`` (every name checked). Returns ``pipe``.

    Raises:
        UsageError: ``folder`` has no ``learned.json``, or its tensors do not fit ``pipe``.
    """
    import json

    import torch

    from ..errors import UsageError

    folder = Path(folder)
    manifest_path = folder / "learned.json"
    if not manifest_path.is_file():
        raise UsageError("not a learner's folder (no learned.json)", file=folder)
    manifest = json.loads(manifest_path.read_text())
    method = manifest["method"]
    for (enc_name, tok_name), name in zip(ENCODERS, EMBED_FILES):
        pipe.load_textual_inversion(
            str(folder), weight_name=name, tokenizer=getattr(pipe, tok_name), text_encoder=getattr(pipe, enc_name)
        )
    transformer = pipe.transformer
    if method == "lora":
        pipe.load_lora_weights(str(folder), weight_name=LORA_FILE)
    elif method == "dreambooth":
        from diffusers import FluxTransformer2DModel

        trained = FluxTransformer2DModel.from_pretrained(folder / TRANSFORMER_DIR, torch_dtype=transformer.dtype)
        pipe.register_modules(transformer=trained.to(transformer.device))
    elif method == "custom_diffusion":
        from safetensors.torch import load_file

        tensors = load_file(folder / CUSTOM_FILE, device=str(transformer.device))
        missing = sorted(set(tensors) - set(transformer.state_dict()))
        if missing:
            raise UsageError(
                f"{len(missing)} tensors do not fit this transformer, e.g. {missing[0]}", file=folder / CUSTOM_FILE
            )
        with torch.no_grad():
            transformer.load_state_dict({k: v.to(transformer.dtype) for k, v in tensors.items()}, strict=False)
    return pipe
