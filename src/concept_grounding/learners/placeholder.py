"""The placeholder V*: a new token of both tokenizers, its rows, and the hooks that train them.

V* enters through diffusers' ``pipe.load_textual_inversion``; a trained row is a float32 parameter
that forward hooks substitute for V*'s looked-up embedding. :class:`Placeholder` owns the hooks'
handles: :meth:`Placeholder.close` writes the rows into the embedding tables and removes the
hooks (docs/guide/learners.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ENCODERS", "EMBED_KEYS", "Placeholder", "add_placeholder", "init_row"]

#: (text encoder, tokenizer) attribute pairs of a FluxPipeline, in the order of :data:`EMBED_KEYS`.
ENCODERS = (("text_encoder", "tokenizer"), ("text_encoder_2", "tokenizer_2"))
#: keys of each encoder's rows in diffusers' pivotal-tuning file ``{name}_emb.safetensors``.
EMBED_KEYS = ("clip_l", "t5")


def init_row(encoder: Any, tokenizer: Any, init_word: str | None, generator: Any) -> Any:
    """(D,) float32 start of V*'s row: ``init_word``'s mean embedding, or (``None``) a random row
    with the table's per-dimension mean and std, drawn with ``generator``."""
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


@dataclass
class Placeholder:
    """V* on one pipeline: ``rows`` (encoder attribute -> (D,) row) and the hooks' handles.

    A context manager: on exit (or :meth:`close`) trained rows are copied into the embedding
    tables and every hook is removed, so the pipeline then runs with no project code.
    """

    pipe: Any
    token: str
    rows: dict[str, Any]
    handles: list[Any] = field(default_factory=list)

    def token_ids(self) -> dict[str, int]:
        """Encoder attribute -> V*'s id in its tokenizer."""
        return {enc: int(getattr(self.pipe, tok).convert_tokens_to_ids(self.token)) for enc, tok in ENCODERS}

    def hook(self) -> None:
        """Make every row a float32 parameter read in place of V*'s table row."""
        import torch

        ids = self.token_ids()
        for enc_name, _ in ENCODERS:
            encoder = getattr(self.pipe, enc_name)
            row = torch.nn.Parameter(self.rows[enc_name].detach().float().to(encoder.device))
            self.rows[enc_name] = row
            handle = encoder.get_input_embeddings().register_forward_hook(_RowHook(ids[enc_name], row))
            self.handles.append(handle)

    def close(self) -> None:
        """Write the rows into the embedding tables and remove the hooks (idempotent)."""
        import torch

        if not self.handles:
            return
        ids = self.token_ids()
        with torch.no_grad():
            for enc_name, _ in ENCODERS:
                table = getattr(self.pipe, enc_name).get_input_embeddings().weight
                table[ids[enc_name]] = self.rows[enc_name].detach().to(table.dtype)
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    def __enter__(self) -> Placeholder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def add_placeholder(pipe: Any, token: str, init_word: str | None, generator: Any) -> Placeholder:
    """Add ``token`` to both tokenizers / text encoders through ``pipe.load_textual_inversion``.

    Args:
        init_word: the word whose embedding starts the rows; ``None``: random rows drawn with ``generator``.
    """
    import torch

    rows: dict[str, Any] = {}
    for enc_name, tok_name in ENCODERS:
        encoder, tokenizer = getattr(pipe, enc_name), getattr(pipe, tok_name)
        row = init_row(encoder, tokenizer, init_word, generator)
        cuda = [encoder.device.index or 0] if encoder.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):  # resizing the table draws its new row from the global generator
            pipe.load_textual_inversion(
                {token: row.to(encoder.dtype)}, token=token, tokenizer=tokenizer, text_encoder=encoder
            )
        rows[enc_name] = row
    return Placeholder(pipe, token, rows)
