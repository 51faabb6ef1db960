"""CCI's reference path: the model's own forward with a set of key tokens cut out.

:class:`ClusterMask` is a context manager that runs the image tower with the keys of
``key_mask`` masked in every layer and head (CVPR 2026 CCI, "cluster-masked attention":
``a_ij = -inf`` for ``j in C_k``), through each library's own extension point
(:meth:`~.backends.VisionBackend.mask_keys`: transformers' ``AttentionInterface``,
open_clip's ``attn_mask`` argument). The CLS key is never masked, so no softmax row is
empty. Whatever the context changed on the model is undone on exit, also when the body
raises; the exception propagates.

:func:`masked_embeddings_reference` stacks the K cluster variants of each image into one
batch and runs them under one :class:`ClusterMask`; the fast path
(:mod:`.fast`) is tested against it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from .attention import check_key_mask
from .backends import VisionBackend, get_backend

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["ClusterMask", "cluster_key_mask"]


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

    def __init__(self, model: Any, key_mask: torch.Tensor) -> None:
        self.backend: VisionBackend = get_backend(model)
        self.key_mask = check_key_mask(key_mask, self.backend.num_tokens)
        self._stack: contextlib.ExitStack | None = None

    @property
    def active(self) -> bool:
        """Whether the mask is in force (inside the ``with`` block)."""
        return self._stack is not None

    def __enter__(self) -> ClusterMask:
        if self._stack is not None:
            raise RuntimeError("ClusterMask is not re-entrant")
        stack = contextlib.ExitStack()
        stack.enter_context(self.backend.mask_keys(self.key_mask))
        self._stack = stack
        return self

    def __exit__(self, *exc: object) -> bool:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.__exit__(*exc)
        return False


def cluster_key_mask(labels: torch.Tensor, num_clusters: int) -> torch.Tensor:
    """``(B, N)`` labels -> ``(B*K, T)`` bool key mask, row ``b*K + k`` masks cluster ``k``.

    >>> import torch
    >>> cluster_key_mask(torch.tensor([[0, 1, 1]]), 2).int().tolist()
    [[0, 1, 0, 0], [0, 0, 1, 1]]
    """
    import torch

    b, n = labels.shape
    cluster = torch.arange(num_clusters, device=labels.device)
    m = labels[:, None, :] == cluster[None, :, None]
    cls = torch.zeros(b, num_clusters, 1, dtype=torch.bool, device=labels.device)
    return torch.cat([cls, m], dim=2).view(b * num_clusters, n + 1)


def masked_embeddings_reference(
    backend: VisionBackend, pixel_values: torch.Tensor, labels: torch.Tensor, num_clusters: int
) -> torch.Tensor:
    """The user's own image forward under :class:`ClusterMask`, K variants per image in one batch.

    Args:
        backend: the adapter.
        pixel_values: ``(B, 3, H, W)``.
        labels: ``(B, N)`` cluster of each patch, in ``[0, K)``.
        num_clusters: ``K``.

    Returns:
        ``(B, K, E)`` masked embeddings.
    """
    b = pixel_values.shape[0]
    rep = pixel_values.repeat_interleave(num_clusters, dim=0)
    with ClusterMask(backend, cluster_key_mask(labels, num_clusters)):
        z = backend.encode_image(rep)
    return z.view(b, num_clusters, -1)
