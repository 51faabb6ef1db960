"""Exact fast path for the K cluster-masked forwards of CCI.

Masking the keys of a token set ``C_k`` in every layer is the same computation as deleting
those tokens from the sequence after the positional embedding: nobody attends to them, so
their own states never reach any other token, and the CLS output is unchanged (the
exactness test checks this against the model's own masked forward to 1e-5). This module
exploits that and three further exact savings:

1. **Deletion.** Variant ``k`` carries ``T - |C_k|`` tokens; the K variants together carry
   ``K*T - N`` tokens instead of ``K*T``.
2. **Shared first projection.** Every variant's layer-1 input is the unmasked input, so the
   layer-1 ``q, k, v`` are taken from the unmasked pass (which CCI runs anyway to get the
   tokens it clusters); variants diverge only inside the first attention.
3. **CLS-only last layer.** In the last layer only the CLS query, its attention output and
   its MLP are computed; the other tokens are only needed as keys and values.
4. **Packing.** All variants of all images in a chunk are packed into one ``(P, D)`` token
   matrix for the token-wise maps (norms, projections, MLPs), so each layer is a few large
   matrix products; only the attention itself is run on a padded ``(V, heads, L, d)``
   layout with the padding keys at ``-inf``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .backends import BlockOps, VisionBackend

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["UnmaskedTrace", "unmasked_trace", "masked_embeddings_fast", "masked_embeddings_hook"]


@dataclass
class UnmaskedTrace:
    """What the unmasked pass leaves for the masked variants.

    Attributes:
        x0: ``(B, T, D)`` encoder input (after positional embedding and pre-norm).
        qkv0: layer-1 ``(q, k, v)``, each ``(B, T, D)``.
        tokens: ``(B, T, D)`` final encoder output.
        image_embeds: ``(B, E)`` unmasked image embedding ``z``.
    """

    x0: "torch.Tensor"
    qkv0: tuple["torch.Tensor", "torch.Tensor", "torch.Tensor"]
    tokens: "torch.Tensor"
    image_embeds: "torch.Tensor"


def _attention(q, k, v, heads: int, bias=None):
    """Multi-head SDPA on ``(V, Lq, D)``/``(V, Lk, D)`` inputs with optional ``(V,1,1,Lk)`` bias."""
    import torch.nn.functional as F

    vb, lq, d = q.shape
    lk = k.shape[1]
    hd = d // heads
    qh = q.view(vb, lq, heads, hd).transpose(1, 2)
    kh = k.view(vb, lk, heads, hd).transpose(1, 2)
    vh = v.view(vb, lk, heads, hd).transpose(1, 2)
    o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=bias)
    return o.transpose(1, 2).reshape(vb, lq, d)


def _block(op: BlockOps, x, qkv=None, bias=None):
    """One full block on ``(V, L, D)`` tokens (``qkv`` precomputed if given)."""
    q, k, v = qkv if qkv is not None else op.qkv(op.norm1(x))
    x = x + op.ls1(op.out(_attention(q, k, v, op.num_heads, bias)))
    return x + op.ls2(op.mlp(op.norm2(x)))


def unmasked_trace(backend: VisionBackend, pixel_values: "torch.Tensor") -> UnmaskedTrace:
    """The unmasked forward through :meth:`VisionBackend.blocks`, keeping layer-1 ``q, k, v``.

    Args:
        backend: the adapter.
        pixel_values: ``(B, 3, H, W)``.
    """
    ops = backend.blocks()
    x0 = backend.embed(pixel_values)
    qkv0 = tuple(ops[0].qkv(ops[0].norm1(x0)))
    x = _block(ops[0], x0, qkv=qkv0)
    for op in ops[1:]:
        x = _block(op, x)
    return UnmaskedTrace(x0=x0, qkv0=qkv0, tokens=x, image_embeds=backend.pool(x))


def _pack(labels: "torch.Tensor", k: int):
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


def masked_embeddings_fast(
    backend: VisionBackend, trace: UnmaskedTrace, labels: "torch.Tensor", num_clusters: int
) -> "torch.Tensor":
    """Image embeddings with each cluster cut out, by exact deletion (see module doc).

    Args:
        backend: the adapter.
        trace: the unmasked pass of the same images (:func:`unmasked_trace`).
        labels: ``(B, N)`` cluster of each patch, in ``[0, K)``.
        num_clusters: ``K``.

    Returns:
        ``(B, K, E)`` embeddings ``z_k`` (CCI ``hat z_CLS,k`` after the projection).
    """
    import torch

    ops = backend.blocks()
    b = labels.shape[0]
    k = num_clusters
    v = b * k
    img, tok, var, pos, lengths = _pack(labels, k)
    lmax = int(lengths.max())
    dtype, dev = trace.x0.dtype, trace.x0.device
    bias = torch.zeros(v, lmax, dtype=dtype, device=dev)
    bias.masked_fill_(torch.arange(lmax, device=dev)[None, :] >= lengths[:, None], float("-inf"))
    bias = bias[:, None, None, :]
    cls_rows = (pos == 0).nonzero(as_tuple=True)[0]  # packed index of each variant's CLS, in variant order

    def pad(t):
        out = t.new_zeros(v, lmax, t.shape[-1])
        out[var, pos] = t
        return out

    def attend_all(q, kk, vv, op):
        o = _attention(pad(q), pad(kk), pad(vv), op.num_heads, bias)
        return o[var, pos]

    x = trace.x0[img, tok]  # (P, D)
    last = len(ops) - 1
    for i, op in enumerate(ops):
        if i == 0:
            q, kk, vv = (t[img, tok] for t in trace.qkv0)
        else:
            h = op.norm1(x)
            if i == last:
                kk, vv = op.kv_proj(h)
                q = op.q_proj(h[cls_rows])
            else:
                q, kk, vv = op.qkv(h)
        if i == last:
            q = q[cls_rows] if i == 0 else q
            o = _attention(q[:, None, :], pad(kk), pad(vv), op.num_heads, bias)[:, 0]
            xc = x[cls_rows] + op.ls1(op.out(o))
            xc = xc + op.ls2(op.mlp(op.norm2(xc)))
            return backend.pool(xc[:, None, :]).view(b, k, -1)
        x = x + op.ls1(op.out(attend_all(q, kk, vv, op)))
        x = x + op.ls2(op.mlp(op.norm2(x)))
    raise ValueError("model: the image encoder has no layers")  # pragma: no cover


def cluster_key_mask(labels: "torch.Tensor", num_clusters: int) -> "torch.Tensor":
    """``(B, N)`` labels -> ``(B*K, T)`` bool key mask, row ``b*K + k`` masks cluster ``k``."""
    import torch

    b, n = labels.shape
    cluster = torch.arange(num_clusters, device=labels.device)
    m = labels[:, None, :] == cluster[None, :, None]
    cls = torch.zeros(b, num_clusters, 1, dtype=torch.bool, device=labels.device)
    return torch.cat([cls, m], dim=2).view(b * num_clusters, n + 1)


def masked_embeddings_hook(
    backend: VisionBackend, pixel_values: "torch.Tensor", labels: "torch.Tensor", num_clusters: int
) -> "torch.Tensor":
    """Reference path: the user's own image forward under :class:`~.hook.ClusterMask`.

    The K variants of each image are stacked into one batch of ``B*K`` images.

    Returns:
        ``(B, K, E)`` masked embeddings.
    """
    from .hook import ClusterMask

    b = pixel_values.shape[0]
    rep = pixel_values.repeat_interleave(num_clusters, dim=0)
    with ClusterMask(backend, cluster_key_mask(labels, num_clusters)):
        z = backend.encode_image(rep)
    return z.view(b, num_clusters, -1)
