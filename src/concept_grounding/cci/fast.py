"""Exact fast path for the K cluster-masked forwards of CCI.

Masking the keys of a token set ``C_k`` in every layer is the same computation as deleting those
tokens after the positional embedding, so each variant carries only its own tokens; on top, the
layer-1 projections are shared with the unmasked pass, the last layer computes only the CLS query,
and all variants are packed into one token matrix. Exact: tested against the model's own masked
forward (:func:`~.masking.masked_embeddings_reference`) to 1e-5. The four savings: docs/cci.md,
"How the masking is implemented".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .backends import BlockOps, VisionBackend

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = []


@dataclass
class UnmaskedTrace:
    """What the unmasked pass leaves for the masked variants.

    Attributes:
        x0: ``(B, T, D)`` encoder input (after positional embedding and pre-norm).
        qkv0: layer-1 ``(q, k, v)``, each ``(B, T, D)``.
        tokens: ``(B, T, D)`` final encoder output.
        image_embeds: ``(B, E)`` unmasked image embedding ``z``.
    """

    x0: torch.Tensor
    qkv0: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    tokens: torch.Tensor
    image_embeds: torch.Tensor


def unmasked_trace(backend: VisionBackend, pixel_values: torch.Tensor) -> UnmaskedTrace:
    """The unmasked forward through :meth:`VisionBackend.blocks`, keeping layer-1 ``q, k, v``.

    Args:
        backend: the adapter.
        pixel_values: ``(B, 3, H, W)``.
    """
    ops = backend.blocks()
    x0 = backend.embed(pixel_values)
    qkv0 = tuple(ops[0].qkv(ops[0].norm1(x0)))
    x = ops[0].forward(x0, qkv=qkv0)
    for op in ops[1:]:
        x = op.forward(x)
    return UnmaskedTrace(x0=x0, qkv0=qkv0, tokens=x, image_embeds=backend.pool(x))


def _pack(labels: torch.Tensor, k: int):
    """Index bookkeeping for packing the ``V = B*K`` deletion variants.

    Returns ``(img, tok, var, pos, lengths)``: for each packed token its image, its index
    in the full sequence, its variant and its position within the variant; and ``(V,)``
    variant lengths. CLS (token 0) is kept in every variant at position 0.
    """
    import torch

    b, n = labels.shape
    dev = labels.device
    cluster = torch.arange(k, device=dev)
    keep_patch = labels[:, None, :] != cluster[None, :, None]  # (B, K, N)
    keep = torch.cat([torch.ones(b, k, 1, dtype=torch.bool, device=dev), keep_patch], dim=2).view(b * k, n + 1)
    var, tok = keep.nonzero(as_tuple=True)
    pos = keep.long().cumsum(1)[var, tok] - 1
    img = torch.div(var, k, rounding_mode="floor")
    return img, tok, var, pos, keep.sum(1)


@dataclass
class _Packing:
    """Where each variant's tokens sit in the packed ``(P, D)`` matrix.

    Packed rows are ordered by variant, then by position, so variant ``v`` is the
    contiguous slice ``lengths[:v].sum() : lengths[:v + 1].sum()``.
    """

    var: torch.Tensor  # (P,) variant of each packed token
    pos: torch.Tensor  # (P,) position within its variant
    lengths: list[int]  # (V,) tokens per variant
    cls_rows: torch.Tensor  # (V,) packed row of each variant's CLS
    bias: torch.Tensor  # (V, 1, 1, Lmax) additive key mask of the padded layout
    padded: bool  # attend on the padded layout (one call) instead of slice by slice

    @classmethod
    def build(cls, var: torch.Tensor, pos: torch.Tensor, lengths: torch.Tensor, dtype, padded: bool) -> _Packing:
        import torch

        lmax = int(lengths.max())
        bias = torch.zeros(len(lengths), lmax, dtype=dtype, device=var.device)
        bias.masked_fill_(torch.arange(lmax, device=var.device)[None, :] >= lengths[:, None], float("-inf"))
        cls_rows = (pos == 0).nonzero(as_tuple=True)[0]
        return cls(var, pos, lengths.tolist(), cls_rows, bias[:, None, None, :], padded)

    def pad(self, t: torch.Tensor) -> torch.Tensor:
        """``(P, D)`` packed -> ``(V, Lmax, D)`` padded with zeros."""
        out = t.new_zeros(len(self.lengths), self.bias.shape[-1], t.shape[-1])
        out[self.var, self.pos] = t
        return out

    def attend(self, op: BlockOps, q, k, v) -> torch.Tensor:
        """Each variant's tokens attend to their own variant with ``op.attend``: ``(P, D)`` -> ``(P, D)``."""
        import torch

        if not self.padded:  # one unmasked attention per contiguous variant slice
            parts = zip(q.split(self.lengths), k.split(self.lengths), v.split(self.lengths))
            return torch.cat([op.attend(qi[None], ki[None], vi[None])[0] for qi, ki, vi in parts])
        o = op.attend(self.pad(q), self.pad(k), self.pad(v), self.bias)
        return o[self.var, self.pos]


def _cls_attention(op: BlockOps, h: torch.Tensor, packing: _Packing) -> torch.Tensor:
    """Attention output of each variant's CLS query over its variant, without projecting
    the keys and values of the other tokens (module doc, point 3).

    Args:
        op: the last block.
        h: ``(P, D)`` packed tokens after the block's first norm.
        packing: the layout of ``h``.

    Returns:
        ``(V, D)`` attention outputs (before the output projection).
    """
    return cls_attention(op, h[packing.cls_rows], packing.pad(h), packing.bias[:, 0])


def cls_attention(
    op: BlockOps, h_cls: torch.Tensor, tokens: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """The CLS query's multi-head attention with the key and value maps folded in (module doc,
    point 3): per head ``h``, logits ``(W_k^h^T q_h) . x_j / sqrt(d_h)`` and output
    ``W_v^h (sum_j p_j x_j) + b_v^h``.

    Args:
        op: the block.
        h_cls: ``(V, D)`` CLS rows after the block's first norm.
        tokens: ``(V, L, D)`` every token of each sequence after the first norm (CLS included).
        bias: optional additive key mask ``(V, 1, L)`` (``-inf`` on padding).

    Returns:
        ``(V, D)`` attention outputs (before the output projection).
    """
    import torch

    w_k, _, w_v, b_v = op.key_value  # b_k adds the same logit to every key: it cancels
    heads = op.num_heads
    nv, d = h_cls.shape
    hd = d // heads
    q = op.q_proj(h_cls).view(nv, heads, hd)
    query_in_x = torch.einsum("vhe,hed->vhd", q, w_k.view(heads, hd, d)) * hd**-0.5  # (V, H, D)
    logits = torch.bmm(query_in_x, tokens.transpose(1, 2))
    weights = torch.softmax(logits if bias is None else logits + bias, dim=-1)  # (V, H, L)
    mixed = torch.bmm(weights, tokens)  # (V, H, D): sum_j p_j x_j per head
    o = torch.einsum("vhd,hed->vhe", mixed, w_v.view(heads, hd, d))
    if b_v is not None:
        o = o + b_v.view(heads, hd)
    return o.reshape(nv, d)


def image_embeds(backend: VisionBackend, pixel_values: torch.Tensor, ops: list[BlockOps] | None = None) -> torch.Tensor:
    """The unmasked image embedding ``z = P(norm(x_L[CLS]))``, ``(B, 3, H, W) -> (B, E)``, with
    the last block run for the CLS token only (:func:`cls_attention`; its MLP on one token):
    the same function as the model's own forward (to float rounding, tested), at about
    ``(L - 1) / L`` of its cost. The faithfulness harness scores its perturbed images with it.
    ``ops``: ``backend.blocks()``, when the caller keeps them across calls.
    """
    *body, last = backend.blocks() if ops is None else ops
    x = backend.embed(pixel_values)
    for op in body:
        x = op.forward(x)
    h = last.norm1(x)
    xc = x[:, 0] + last.ls1(last.out(cls_attention(last, h[:, 0], h)))
    xc = xc + last.ls2(last.mlp(last.norm2(xc)))
    return backend.project(backend.final_norm(xc))


#: Packed tokens per group on the CPU. One variant of a ViT-B/16 is ~170 tokens; a group of
#: a few keeps every activation (``tokens x 4D`` floats in the MLP) a few MB, which the
#: allocator reuses, where one pack of all variants needs fresh pages on every layer.
CPU_GROUP_TOKENS = 512


def masked_embeddings_fast(
    backend: VisionBackend,
    trace: UnmaskedTrace,
    labels: torch.Tensor,
    num_clusters: int,
    padded_attention: bool | None = None,
    group_tokens: int | None = None,
) -> torch.Tensor:
    """Image embeddings with each cluster cut out, by exact deletion (see module doc).

    Args:
        backend: the adapter.
        trace: the unmasked pass of the same images (:func:`unmasked_trace`).
        labels: ``(B, N)`` cluster of each patch, in ``[0, K)``.
        num_clusters: ``K``.
        padded_attention: run each layer's attention once on a padded layout (default on
            accelerators, where one large kernel beats many small ones) instead of one
            call per variant (default on the CPU). Both are exact.
        group_tokens: run the variants in consecutive groups of at most this many packed
            tokens (a variant longer than that runs alone); default
            :data:`CPU_GROUP_TOKENS` on the CPU, everything in one group elsewhere.

    Returns:
        ``(B, K, E)`` embeddings ``z_k`` (CCI ``hat z_CLS,k`` after the projection).
    """
    import torch

    ops = backend.blocks()
    if not ops:
        raise ValueError("model: the image encoder has no layers")
    on_cpu = labels.device.type == "cpu"
    padded_attention = not on_cpu if padded_attention is None else padded_attention
    group_tokens = (CPU_GROUP_TOKENS if on_cpu else None) if group_tokens is None else group_tokens
    b = labels.shape[0]
    img, tok, var, pos, lengths = _pack(labels, num_clusters)
    cls_states = []
    for first, stop, row0, row1 in _variant_groups(lengths.tolist(), group_tokens):
        rows = slice(row0, row1)
        packing = _Packing.build(var[rows] - first, pos[rows], lengths[first:stop], trace.x0.dtype, padded_attention)
        cls_states.append(_cls_states(ops, trace, img[rows], tok[rows], packing))
    return backend.pool(torch.cat(cls_states)[:, None, :]).view(b, num_clusters, -1)


def _variant_groups(lengths: list[int], max_tokens: int | None) -> list[tuple[int, int, int, int]]:
    """Consecutive variant groups ``(first, stop, first_row, stop_row)`` of at most
    ``max_tokens`` packed rows each (one group when ``max_tokens`` is None).

    >>> _variant_groups([3, 2, 4], 5)
    [(0, 2, 0, 5), (2, 3, 5, 9)]
    """
    groups, first, row0, rows = [], 0, 0, 0
    for v, n in enumerate(lengths):
        if max_tokens is not None and v > first and rows + n > max_tokens:
            groups.append((first, v, row0, row0 + rows))
            first, row0, rows = v, row0 + rows, 0
        rows += n
    groups.append((first, len(lengths), row0, row0 + rows))
    return groups


def _cls_states(ops: list[BlockOps], trace: UnmaskedTrace, img, tok, packing: _Packing) -> torch.Tensor:
    """Run one packed group of variants through the blocks; ``(V, D)`` final CLS states."""
    x = trace.x0[img, tok]  # (P, D)
    *body, last = ops
    for i, op in enumerate(body):
        q, k, v = (t[img, tok] for t in trace.qkv0) if i == 0 else op.qkv(op.norm1(x))
        x = x + op.ls1(op.out(packing.attend(op, q, k, v)))
        x = x + op.ls2(op.mlp(op.norm2(x)))
    xc = x[packing.cls_rows] + last.ls1(last.out(_cls_attention(last, last.norm1(x), packing)))
    return xc + last.ls2(last.mlp(last.norm2(xc)))
