"""Attention for CCI: the key mask, one multi-head SDPA, and the transformers entry point.

CCI cuts a token set ``C_k`` out of every layer's and head's attention (CVPR 2026 CCI, "cluster-masked
attention": ``a_ij = -inf`` for ``j in C_k``); the CLS key is never cut, so no softmax row is empty.
transformers dispatches through ``AttentionInterface``, where :data:`CLUSTER_MASK_ATTENTION` is
registered (:func:`transformers_key_mask` switches the vision tower to it for a ``with`` block; the
mask travels in a ``ContextVar``); open_clip takes an additive ``attn_mask``
(:meth:`~.backends.OpenCLIPBackend.mask_keys`). :func:`multihead_attention` is the plain SDPA where a
library offers none, :func:`library_attention` a transformers module's own on the fast path. Manual:
docs/cci.md, "How the masking is implemented".
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn

__all__ = []

#: Name of the CCI attention function in transformers' ``AttentionInterface``.
CLUSTER_MASK_ATTENTION = "cci_cluster_mask"
#: Implementations that take an additive float mask, and so can carry the key bias.
MASKABLE_IMPLEMENTATIONS = ("sdpa", "eager")

# id(attention config) -> (V, T) bool key mask, for the masks active in this context
_ACTIVE_MASKS: ContextVar[Mapping[int, Any]] = ContextVar("cci_active_key_masks", default=MappingProxyType({}))
# id(attention config) -> [number of open masks, implementation before the switch]
_SWITCHED: dict[int, list] = {}
_SWITCH_LOCK = threading.Lock()


# ----------------------------------------------------------------------------- shared
def key_bias(key_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive attention bias from a key mask.

    Args:
        key_mask: ``(V, T)`` bool, True where the key is cut out.
        dtype: the attention dtype.

    Returns:
        ``(V, 1, 1, T)``: ``-inf`` on masked keys, 0 elsewhere (broadcasts over heads and queries).

    >>> import torch
    >>> key_bias(torch.tensor([[False, True]]), torch.float32).tolist()
    [[[[0.0, -inf]]]]
    """
    import torch

    bias = torch.zeros(key_mask.shape, dtype=dtype, device=key_mask.device)
    bias.masked_fill_(key_mask, float("-inf"))
    return bias[:, None, None, :]


def check_key_mask(key_mask: torch.Tensor, num_tokens: int) -> torch.Tensor:
    """Validate a ``(V, T)`` key mask for a tower with ``T = num_tokens``; return it as bool.

    Raises:
        ValueError: wrong shape, or the CLS key (column 0) is masked.
    """
    if key_mask.ndim != 2 or key_mask.shape[1] != num_tokens:
        raise ValueError(f"key_mask: expected shape (V, {num_tokens}), got {tuple(key_mask.shape)}")
    if bool(key_mask[:, 0].any()):
        raise ValueError("key_mask: the CLS key (column 0) must never be masked")
    return key_mask.bool()


def check_batch(key_mask: torch.Tensor, batch: int, tokens: int) -> None:
    """Raise ``ValueError`` when a ``(V, T)`` key mask does not fit a ``(batch, tokens)`` input."""
    if key_mask.shape[0] != batch or key_mask.shape[1] != tokens:
        raise ValueError(
            f"key_mask: shape {tuple(key_mask.shape)} does not match encoder input ({batch}, {tokens}) (batch, tokens)"
        )


def multihead_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Multi-head scaled dot-product attention on token-major tensors.

    ``softmax(q_h k_h^T / sqrt(d_h) + bias) v_h`` per head ``h``, heads concatenated.

    Args:
        q: ``(V, Lq, D)``; k, v: ``(V, Lk, D)``; ``D`` divisible by ``heads``.
        heads: number of heads.
        bias: optional additive mask broadcastable to ``(V, heads, Lq, Lk)``.

    Returns:
        ``(V, Lq, D)`` (before the output projection).
    """
    import torch.nn.functional as F

    vb, lq, d = q.shape
    lk = k.shape[1]
    hd = d // heads
    qh = q.view(vb, lq, heads, hd).transpose(1, 2)
    kh = k.view(vb, lk, heads, hd).transpose(1, 2)
    vh = v.view(vb, lk, heads, hd).transpose(1, 2)
    o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=bias)
    return o.transpose(1, 2).reshape(vb, lq, d)


# ----------------------------------------------------------------------------- transformers
def _attention_interface() -> Any:
    """A view of transformers' global attention registry, or None on releases without one."""
    import transformers

    interface = getattr(transformers, "AttentionInterface", None)
    return None if interface is None else interface()


def _implementation_function(module: nn.Module, implementation: str) -> Callable:
    """The attention function transformers would call for ``module`` under ``implementation``."""
    if implementation == "eager":  # each modeling file defines its own eager function
        fn = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
        if fn is None:
            raise ValueError(f"model: {type(module).__name__} has no eager attention function to delegate to")
        return fn
    return _attention_interface()[implementation]


def cluster_mask_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, Any]:
    """The ``"cci_cluster_mask"`` attention function (transformers ``AttentionInterface`` signature).

    Adds the key bias of the mask active for ``module.config`` in this context (none: no
    change) to ``attention_mask`` and calls the implementation the tower used before it
    was switched (``sdpa`` when unknown).

    Args:
        module: the calling attention module (its ``config`` identifies the tower).
        query: ``(V, heads, T, d)``; key, value: ``(V, heads, T, d)``.
        attention_mask: additive mask broadcastable to ``(V, heads, T, T)``, or None.
        **kwargs: passed on (``scaling``, ``dropout``, ...).

    Returns:
        What the delegate returns: ``((V, T, heads, d) output, weights or None)``.
    """
    config_id = id(module.config)
    switched = _SWITCHED.get(config_id)
    delegate = _implementation_function(module, switched[1] if switched else "sdpa")
    key_mask = _ACTIVE_MASKS.get().get(config_id)
    if key_mask is not None:
        check_batch(key_mask, query.shape[0], key.shape[2])
        bias = key_bias(key_mask.to(query.device), query.dtype)
        attention_mask = bias if attention_mask is None else attention_mask + bias
    return delegate(module, query, key, value, attention_mask, **kwargs)


def register_cluster_mask_attention() -> str:
    """Register :func:`cluster_mask_attention` as ``"cci_cluster_mask"`` (idempotent); return the name.

    Raises:
        ValueError: the installed transformers has no ``AttentionInterface``.
    """
    import transformers

    interface = getattr(transformers, "AttentionInterface", None)
    if interface is None or not hasattr(transformers.PreTrainedModel, "set_attn_implementation"):
        raise ValueError(
            f"model: masking a transformers CLIP needs transformers.AttentionInterface and "
            f"PreTrainedModel.set_attn_implementation, which transformers {transformers.__version__} lacks; "
            "upgrade transformers, or use method='fast' (no mask needed)"
        )
    if interface().get(CLUSTER_MASK_ATTENTION) is not cluster_mask_attention:
        interface.register(CLUSTER_MASK_ATTENTION, cluster_mask_attention)
    return CLUSTER_MASK_ATTENTION


def _implementation_request(model: nn.Module, attention_config: Any, name: str) -> str | dict:
    """The ``set_attn_implementation`` argument that sets ``name`` on ``attention_config`` only."""
    if model.config is attention_config:
        return name
    for key in getattr(model.config, "sub_configs", {}):
        if getattr(model.config, key, None) is attention_config:
            return {key: name}
    raise ValueError(
        f"model: cannot find the vision attention config in {type(model).__name__}.config; "
        "pass the CLIPModel or CLIPVisionModel itself"
    )


def _switch_in(model: nn.Module, attention_config: Any) -> None:
    with _SWITCH_LOCK:
        entry = _SWITCHED.get(id(attention_config))
        if entry is not None:
            entry[0] += 1
            return
        before = attention_config._attn_implementation
        if before not in MASKABLE_IMPLEMENTATIONS:
            raise ValueError(
                f"model: the vision tower uses attention implementation {before!r}; CCI masking needs one of "
                f"{MASKABLE_IMPLEMENTATIONS} (load with attn_implementation='sdpa')"
            )
        model.set_attn_implementation(_implementation_request(model, attention_config, CLUSTER_MASK_ATTENTION))
        _SWITCHED[id(attention_config)] = [1, before]


def _switch_out(model: nn.Module, attention_config: Any) -> None:
    with _SWITCH_LOCK:
        entry = _SWITCHED[id(attention_config)]
        entry[0] -= 1
        if entry[0] == 0:
            model.set_attn_implementation(_implementation_request(model, attention_config, entry[1]))
            del _SWITCHED[id(attention_config)]


@contextlib.contextmanager
def transformers_key_mask(model: nn.Module, attention_config: Any, key_mask: torch.Tensor) -> Iterator[None]:
    """Run a transformers CLIP vision tower with ``key_mask``'s keys cut out of every attention.

    Args:
        model: the ``PreTrainedModel`` (``CLIPModel``, ``CLIPVisionModel[WithProjection]``).
        attention_config: the config object the vision attention modules hold.
        key_mask: ``(V, T)`` bool, validated by :func:`check_key_mask`; every vision forward
            inside the block must have batch ``V``.

    The tower's implementation is switched to ``"cci_cluster_mask"`` on entry and back on
    exit (also when the body raises); nested or concurrent blocks on one model share the
    switch, and the last to leave restores it.
    """
    masks = _ACTIVE_MASKS.get()
    if id(attention_config) in masks:
        raise RuntimeError("ClusterMask is not re-entrant: this model's keys are already masked here")
    register_cluster_mask_attention()
    _switch_in(model, attention_config)
    token = _ACTIVE_MASKS.set(MappingProxyType({**masks, id(attention_config): key_mask}))
    try:
        yield
    finally:
        _ACTIVE_MASKS.reset(token)
        _switch_out(model, attention_config)


def library_attention(
    module: nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """A transformers attention module's own implementation on token-major tensors.

    Args:
        module: the attention module (``num_heads``, ``scale`` and ``config`` are read).
        q: ``(V, Lq, D)``; k, v: ``(V, Lk, D)``.
        bias: optional additive mask broadcastable to ``(V, heads, Lq, Lk)``.

    Returns:
        ``(V, Lq, D)`` (before the output projection). Falls back to
        :func:`multihead_attention` (the same formula) on transformers releases without
        ``AttentionInterface`` and for implementations that take no additive mask (flash).
    """
    heads = int(module.num_heads)
    implementation = getattr(module.config, "_attn_implementation", None) or "sdpa"
    if _attention_interface() is None or implementation not in MASKABLE_IMPLEMENTATIONS + (CLUSTER_MASK_ATTENTION,):
        return multihead_attention(q, k, v, heads, bias)
    vb, lq, d = q.shape
    lk = k.shape[1]
    hd = d // heads
    o, _ = _implementation_function(module, implementation)(
        module,
        q.view(vb, lq, heads, hd).transpose(1, 2),
        k.view(vb, lk, heads, hd).transpose(1, 2),
        v.view(vb, lk, heads, hd).transpose(1, 2),
        bias,
        scaling=float(module.scale),
        dropout=0.0,
    )
    return o.reshape(vb, lq, d)
