"""Deterministic batched k-means on patch tokens (CCI step 1, "concept clustering").

Plain Lloyd iterations with k-means++ seeding, run for all images of a batch in lockstep.
The seed fixes a CPU ``torch.Generator`` per image, so the same tokens and seed always give
the same labels, on any device and in any batch. Empty clusters are re-seeded at the point farthest from its centre.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["kmeans"]


def _sq_dists(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distances ``(B, N, D) x (B, K, D) -> (B, N, K)``, clamped at 0."""
    d = (x * x).sum(-1, keepdim=True) - 2 * x @ c.transpose(1, 2) + (c * c).sum(-1)[:, None, :]
    return d.clamp_min_(0)


def kmeans_plusplus(x: torch.Tensor, k: int, seed: int) -> torch.Tensor:
    """k-means++ seeding (Arthur & Vassilvitskii 2007), each image with its own generator.

    Every image draws from a fresh CPU generator seeded with ``seed``, so an image gets the
    same centres whatever else is in its batch.

    Args:
        x: ``(B, N, D)`` float points.
        k: number of centres.
        seed: seed of every image's draw.

    Returns:
        ``(B, k, D)`` initial centres, chosen among the points.
    """
    import torch

    b, n, _ = x.shape
    out = []
    for i in range(b):
        gen = torch.Generator().manual_seed(int(seed))
        pts = x[i]
        idx = [int(torch.randint(n, (1,), generator=gen))]
        d2 = _sq_dists(pts[None], pts[idx][None])[0, :, 0]
        for _ in range(1, k):
            total = float(d2.sum())
            # all points coincide with a centre: draw uniformly instead of by D^2
            probs = (d2 / total if total > 0 else torch.full_like(d2, 1.0 / n)).double().cpu()
            idx.append(int(torch.multinomial(probs, 1, generator=gen)))
            d2 = torch.minimum(d2, _sq_dists(pts[None], pts[idx[-1]][None, None])[0, :, 0])
        out.append(pts[idx])
    return torch.stack(out)


def kmeans(
    x: torch.Tensor, k: int, seed: int = 0, max_iter: int = 50, tol: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched k-means.

    Args:
        x: ``(B, N, D)`` points (patch tokens of ``B`` images).
        k: number of clusters, ``1 <= k <= N``.
        seed: seed of the k-means++ draw.
        max_iter: Lloyd iterations at most; stops early when no label changes.
        tol: also stop when no centre moves more than ``tol`` (Euclidean).

    Returns:
        ``(labels, centres)``: ``(B, N)`` long in ``[0, k)`` and ``(B, k, D)`` float.

    Raises:
        ValueError: ``k`` is not in ``[1, N]`` or ``x`` is not 3-D.

    >>> import torch
    >>> pts = torch.tensor([[[0.0], [0.1], [5.0], [5.1]]])
    >>> labels, _ = kmeans(pts, 2, seed=0)
    >>> bool(labels[0, 0] == labels[0, 1]) and bool(labels[0, 2] == labels[0, 3]) and bool(labels[0, 0] != labels[0, 2])
    True
    """
    import torch

    if x.ndim != 3:
        raise ValueError(f"x: expected (B, N, D) points, got shape {tuple(x.shape)}")
    b, n, _ = x.shape
    if not 1 <= k <= n:
        raise ValueError(f"num_clusters: K={k} must be between 1 and the number of patches N={n}")
    x = x.float()
    centres = kmeans_plusplus(x, k, seed)
    labels = torch.full((b, n), -1, dtype=torch.long, device=x.device)
    rows = torch.arange(b, device=x.device)
    for _ in range(max_iter):
        d = _sq_dists(x, centres)
        new = d.argmin(-1)
        one_hot = torch.nn.functional.one_hot(new, k).to(x.dtype)  # (B, N, k)
        counts = one_hot.sum(1)  # (B, k)
        sums = one_hot.transpose(1, 2) @ x  # (B, k, D)
        updated = torch.where(counts[..., None] > 0, sums / counts.clamp_min(1)[..., None], centres)
        empty = counts == 0
        if bool(empty.any()):
            far = d.gather(-1, new[..., None]).squeeze(-1).argmax(-1)  # farthest point per image
            updated = torch.where(empty[..., None] & (d.max() > 0), x[rows, far][:, None, :], updated)
        shift = (updated - centres).norm(dim=-1).max()
        centres = updated
        converged = bool((new == labels).all()) or float(shift) <= tol
        labels = new
        if converged:
            break
    labels = _sq_dists(x, centres).argmin(-1)
    return labels, centres
