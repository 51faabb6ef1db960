"""The one training loop every model here uses: minibatches, Adam, tqdm, seeds, early stop.

>>> import torch
>>> w = torch.nn.Parameter(torch.zeros(1))
>>> x = torch.linspace(0, 1, 32)
>>> hist = fit(lambda b: ((w * b[0] - 2 * b[0]) ** 2).mean(), [w], (x,), epochs=100, lr=0.1, progress=False)
>>> round(float(w.detach()), 1), hist.losses[-1] < hist.losses[0]
(2.0, True)
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

__all__ = ["fit", "TrainHistory"]

logger = logging.getLogger(__name__)

LossFn = Callable[[tuple[torch.Tensor, ...]], torch.Tensor]


@dataclass
class TrainHistory:
    """Per-epoch mean training loss (and validation loss when given); ``stopped_early`` and the
    epoch whose weights were kept (``best_epoch``, 0-based)."""

    losses: list[float] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)
    val_losses: list[float] = field(default_factory=list)
    best_epoch: int | None = None
    stopped_early: bool = False


def fit(
    loss_fn: LossFn,
    params: Iterable[nn.Parameter],
    tensors: Sequence[torch.Tensor],
    *,
    epochs: int = 10,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    seed: int = 0,
    module: nn.Module | None = None,
    val_fn: Callable[[], float] | None = None,
    patience: int | None = None,
    desc: str = "train",
    progress: bool = True,
) -> TrainHistory:
    """Minimise ``loss_fn`` over shuffled minibatches of ``tensors`` with Adam.

    Args:
        loss_fn: batch (tuple of the same tensors, ``batch_size`` rows) -> scalar loss.
        params: the parameters to train (others stay as they are).
        tensors: tensors sharing their first dimension ``N``.
        epochs: passes over the data.
        seed: seeds the shuffling and torch's RNG inside the loop (dropout, RandInt);
            the caller's RNG state is restored afterwards.
        module: put in ``train()`` mode for the loop (and ``eval()`` for ``val_fn``); with
            ``patience`` its best-validation weights are restored at the end.
        val_fn: returns a validation loss (lower is better) after each epoch.
        patience: stop after this many epochs without a better ``val_fn`` (needs ``val_fn``).
        progress: show a tqdm bar over epochs.

    Returns:
        :class:`TrainHistory`.
    """
    from tqdm.auto import tqdm

    params = [p for p in params if p.requires_grad]
    if not params:
        raise ValueError("fit: no trainable parameters were given")
    if not tensors:
        raise ValueError("fit: tensors is empty")
    n = int(tensors[0].shape[0])
    if any(int(t.shape[0]) != n for t in tensors):
        raise ValueError(f"fit: tensors differ in length: {[tuple(t.shape) for t in tensors]}")
    if n == 0:
        raise ValueError("fit: no training rows")
    if patience is not None and val_fn is None:
        raise ValueError("fit: patience needs val_fn")
    history = TrainHistory()
    optimiser = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(int(seed))
    best, best_state, bad_epochs = math.inf, None, 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        bar = tqdm(range(int(epochs)), desc=desc, disable=not progress, leave=False)
        for epoch in bar:
            if module is not None:
                module.train()
            order = torch.randperm(n, generator=generator)
            total = 0.0
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                loss = loss_fn(tuple(t[idx] for t in tensors))
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
                optimiser.step()
                history.step_losses.append(float(loss.detach()))
                total += float(loss.detach()) * len(idx)
            history.losses.append(total / n)
            postfix = {"loss": f"{history.losses[-1]:.4f}"}
            if val_fn is not None:
                if module is not None:
                    module.eval()
                with torch.no_grad():
                    val = float(val_fn())
                history.val_losses.append(val)
                postfix["val"] = f"{val:.4f}"
                if val < best:
                    best, bad_epochs, history.best_epoch = val, 0, epoch
                    if patience is not None and module is not None:
                        best_state = copy.deepcopy(module.state_dict())
                else:
                    bad_epochs += 1
            bar.set_postfix(postfix)
            if patience is not None and bad_epochs >= patience:
                history.stopped_early = True
                logger.info("%s: early stop after epoch %d (best %d)", desc, epoch, history.best_epoch)
                break
    if best_state is not None and module is not None:
        module.load_state_dict(best_state)
    if module is not None:
        module.eval()
    return history
