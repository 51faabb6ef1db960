"""The CCI attention hook: cut a set of key tokens out of every layer and head.

``ClusterMask`` is a context manager that registers one forward pre-hook on the image
encoder (transformers ``CLIPEncoder`` or open_clip ``visual.transformer``) and adds an
additive attention bias ``-inf`` on the masked keys (CVPR 2026 CCI, "cluster-masked
attention": ``a_ij = -inf`` for ``j in C_k``, every layer and head). The CLS key is never
masked, so no softmax row is empty and no NaN can appear. The hook handle is owned by the
context and removed on exit, also when the body raises; the exception propagates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backends import VisionBackend, get_backend

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["ClusterMask", "key_bias"]


def key_bias(key_mask: "torch.Tensor", dtype: "torch.dtype") -> "torch.Tensor":
    """Additive attention bias from a key mask.

    Args:
        key_mask: ``(V, T)`` bool, True where the key is cut out.
        dtype: the attention dtype.

    Returns:
        ``(V, 1, T, T)`` tensor, ``-inf`` on masked key columns and 0 elsewhere (a view that
        broadcasts over heads and queries).
    """
    import torch

    bias = torch.zeros(key_mask.shape, dtype=dtype, device=key_mask.device)
    bias.masked_fill_(key_mask, float("-inf"))
    v, t = key_mask.shape
    return bias[:, None, None, :].expand(v, 1, t, t)


class ClusterMask:
    """Context manager: run the image encoder with the given keys masked everywhere.

    Args:
        model: a transformers CLIP, an open_clip CLIP/VisionTransformer, or a backend.
        key_mask: ``(V, T)`` bool, True for keys to cut; ``V`` must equal the batch size of
            every encoder call made inside the context; column 0 (CLS) must be False.

    Example::

        with ClusterMask(model, key_mask):
            z = model.encode_image(pixels)  # pixels.shape[0] == key_mask.shape[0]
    """

    def __init__(self, model: Any, key_mask: "torch.Tensor") -> None:
        self.backend: VisionBackend = get_backend(model)
        if key_mask.ndim != 2 or key_mask.shape[1] != self.backend.num_tokens:
            raise ValueError(
                f"key_mask: expected shape (V, {self.backend.num_tokens}), got {tuple(key_mask.shape)}"
            )
        if bool(key_mask[:, 0].any()):
            raise ValueError("key_mask: the CLS key (column 0) must never be masked")
        self.key_mask = key_mask.bool()
        self._handle = None

    @property
    def active(self) -> bool:
        return self._handle is not None

    def _hook(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        x = self.backend.encoder_input(args, kwargs)
        if x.shape[0] != self.key_mask.shape[0] or x.shape[1] != self.key_mask.shape[1]:
            raise ValueError(
                f"key_mask: shape {tuple(self.key_mask.shape)} does not match encoder input "
                f"{tuple(x.shape[:2])} (batch, tokens)"
            )
        bias = key_bias(self.key_mask.to(x.device), x.dtype)
        return self.backend.inject_mask(args, kwargs, bias)

    def __enter__(self) -> "ClusterMask":
        if self._handle is not None:
            raise RuntimeError("ClusterMask is not re-entrant")
        self._handle = self.backend.encoder.register_forward_pre_hook(self._hook, with_kwargs=True)
        return self

    def __exit__(self, *exc: object) -> bool:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        return False
