"""The tie of Tied Diffusion Guidance: SUB (Bader et al.), Sec. 3, Eqs. 3, 5 and 6.

Where ``d = |e1 - e2|`` of one pair's guided predictions is at or below its ``eta``-th percentile
``q`` (per pair, over all latent elements), both images get the mean prediction; elsewhere each keeps
its own (Eq. 3); both ways at once (Eqs. 5-6) is :func:`tie_pair`. ``q`` is the ``ceil(eta * N)``-th
smallest ``d`` (numpy's ``method="inverted_cdf"``), so ``eta = 0`` ties nothing and ``eta = 1`` ties
every element: the convention and its *decisions* are in docs/tdg.md.

>>> import torch
>>> e1 = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
>>> e2 = torch.tensor([[0.0, 0.0, 0.0, 0.0]])
>>> tie(e1, e2, 0.5)      # d = [0, 1, 2, 3]; k = 2, q = 1: the two smallest are averaged
tensor([[0.0000, 0.5000, 2.0000, 3.0000]])
>>> tie(e1, e2, 0.0)
tensor([[0., 1., 2., 3.]])
>>> r, g = tie_pair(e1, e2, 1.0)
>>> bool(torch.equal(r, g))
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

__all__ = ["Granularity", "percentile_threshold", "tie_mask", "tie", "tie_pair", "tie_batch"]

Granularity = Literal["element", "token"]
_GRANULARITIES = ("element", "token")


def _check_eta(eta: float) -> float:
    eta = float(eta)
    if not 0.0 <= eta <= 1.0 or math.isnan(eta):
        raise ValueError(f"eta must lie in [0, 1], got {eta!r}")
    return eta


#: Relative slack of :func:`percentile_rank`: far above the float error of ``eta * n``
#: (a few ulps, ~1e-16 relative), far below any intended difference between two etas.
RANK_RELATIVE_SLACK = 1e-12


def percentile_rank(eta: float, n: int) -> int:
    """1-based rank ``k = ceil(eta * n)`` of the ``eta``-th percentile of ``n`` values.

    0 means "below every value" (nothing tied), which happens only for ``eta = 0`` or
    ``n = 0``: any ``eta > 0`` ties at least one element. The product is shrunk by the
    *relative* slack :data:`RANK_RELATIVE_SLACK` before the ceiling, which absorbs float
    error in ``eta * n`` (``0.3 * 10`` is ``3.0000000000000004``) at every scale: an
    absolute slack would round ``eta * n <= slack`` down to 0 and, on large latents,
    swallow real fractions of an element.

    >>> percentile_rank(0.3, 10), percentile_rank(0.0, 10), percentile_rank(1.0, 10), percentile_rank(0.01, 10)
    (3, 0, 10, 1)
    >>> percentile_rank(1e-9, 10)   # eta * n = 1e-8 > 0: one element is tied
    1
    """
    eta = _check_eta(eta)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if eta == 0.0 or n == 0:
        return 0
    product = eta * n
    return min(n, max(1, math.ceil(product - product * RANK_RELATIVE_SLACK)))


def _differences(e1: torch.Tensor, e2: torch.Tensor, granularity: Granularity) -> torch.Tensor:
    """``|e1 - e2|`` per comparison unit: (P, N) elements or (P, T) token means."""
    if granularity not in _GRANULARITIES:
        raise ValueError(f"granularity must be one of {_GRANULARITIES}, got {granularity!r}")
    if e1.shape != e2.shape:
        raise ValueError(f"e1 and e2 must have the same shape, got {tuple(e1.shape)} and {tuple(e2.shape)}")
    if e1.ndim < 2:
        raise ValueError(f"expected a pair axis first, shape (P, ...), got shape {tuple(e1.shape)}")
    d = (e1 - e2).abs()
    if granularity == "token":
        if e1.ndim != 3:
            raise ValueError(f"granularity='token' needs packed latents (P, T, C), got shape {tuple(e1.shape)}")
        return d.mean(dim=-1)
    return d.reshape(d.shape[0], -1)


def percentile_threshold(d: torch.Tensor, eta: float) -> torch.Tensor | None:
    """Per-row ``eta``-th percentile of ``d`` (P, N) -> (P,), or ``None`` when ``eta = 0`` (or N = 0).

    Same dtype as ``d`` (bf16 works). See the module docstring for the rank convention.
    """
    import torch

    k = percentile_rank(eta, d.shape[-1])
    if k == 0:
        return None
    return torch.kthvalue(d, k, dim=-1).values


def tie_mask(
    e1: torch.Tensor, e2: torch.Tensor, eta: float, granularity: Granularity = "element"
) -> torch.Tensor | None:
    """Boolean mask, shape of ``e1``, of the elements to average; ``None`` if none are.

    Args:
        e1, e2: predictions (P, ...), pair axis first; (P, T, C) for ``granularity="token"``.
        eta: percentile in [0, 1].
        granularity: ``"element"`` thresholds every latent element (the paper);
            ``"token"`` thresholds the per-token mean of ``d`` and ties whole tokens.
    """
    d = _differences(e1, e2, granularity)
    q = percentile_threshold(d, eta)
    if q is None:
        return None
    mask = d <= q.unsqueeze(-1)
    if granularity == "token":
        return mask.unsqueeze(-1).expand_as(e1)
    return mask.reshape(e1.shape)


def tie(e1: torch.Tensor, e2: torch.Tensor, eta: float, granularity: Granularity = "element") -> torch.Tensor:
    """``mu(e1, e2, eta)`` of SUB Eq. 3: mean of the pair where ``d <= q``, ``e1`` elsewhere.

    Args:
        e1, e2: (P, ...) predictions of P pairs; each pair gets its own percentile.
        eta: percentile in [0, 1]; 0 returns ``e1`` unchanged.
    Returns:
        a tensor shaped and typed like ``e1``.
    """
    return tie_pair(e1, e2, eta, granularity)[0]


def tie_pair(
    e_r: torch.Tensor, e_g: torch.Tensor, eta: float, granularity: Granularity = "element"
) -> tuple[torch.Tensor, torch.Tensor]:
    """SUB Eqs. 5-6: ``(mu(e_r, e_g, eta), mu(e_g, e_r, eta))``, one percentile per pair.

    ``d`` is symmetric, so one mask serves both sides. At ``eta = 1`` both outputs are the
    same tensor values (the mean); at ``eta = 0`` the inputs are returned unchanged.
    """
    import torch

    eta = _check_eta(eta)
    mask = tie_mask(e_r, e_g, eta, granularity)
    if mask is None:
        return e_r, e_g
    mean = (e_r + e_g) / 2
    return torch.where(mask, mean, e_r), torch.where(mask, mean, e_g)


def tie_batch(
    prediction: torch.Tensor, t: float, schedule: Callable[[float], float], granularity: Granularity = "element"
) -> tuple[torch.Tensor, float]:
    """One TDG step on a batch ``[references; guides]``: SUB Eqs. 5-6 at ``eta = schedule(t)`` (Eq. 4).

    Args:
        prediction: (2P, ...) final guided predictions; row ``i`` pairs with row ``P + i``.
        t: normalised time in [0, 1] (``timestep / num_train_timesteps``; 1 is pure noise).
    Returns:
        the tied predictions (the input itself when ``eta = 0``) and ``eta``.
    Raises:
        ValueError: an odd batch, or ``eta`` outside [0, 1] (one line).

    >>> import torch
    >>> batch = torch.tensor([[0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0]])   # one pair: reference, guide
    >>> tie_batch(batch, 0.5, lambda t: 0.5)
    (tensor([[0.0000, 0.5000, 2.0000, 3.0000],
            [0.0000, 0.5000, 0.0000, 0.0000]]), 0.5)
    """
    import torch

    if prediction.shape[0] % 2:
        raise ValueError(f"TDG needs an even batch [references; guides], got {prediction.shape[0]} rows")
    eta = float(schedule(t))
    if not 0.0 <= eta <= 1.0:  # also NaN
        raise ValueError(f"eta_schedule must give eta in [0, 1], got {eta!r} at t = {t:.4g}")
    if eta != 0.0:
        e_r, e_g = prediction.chunk(2)
        prediction = torch.cat(tie_pair(e_r, e_g, eta, granularity))
    return prediction, eta
