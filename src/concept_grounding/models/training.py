"""The one training loop every model here uses: minibatches, Adam or AdamW, a learning-rate schedule,
optional augmentation, tqdm, seeds, early stop; and :func:`reproducible`, the block that
makes a whole run (data, training, scoring) repeat bit for bit on one machine.

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
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from ..cpu import limited_threads
from .train_config import DEFAULT_THREADS, TrainConfig

__all__ = ["fit", "TrainConfig", "TrainHistory", "reproducible", "DEFAULT_THREADS"]

#: learning-rate schedules of :func:`fit`.
SCHEDULES = ("constant", "onecycle", "cosine")
#: optimisers of :func:`fit`: Adam (``weight_decay`` an L2 penalty) or AdamW (decoupled decay,
#: Loshchilov & Hutter 2019).
OPTIMISERS = ("adam", "adamw")

logger = logging.getLogger(__name__)

LossFn = Callable[[tuple[torch.Tensor, ...]], torch.Tensor]


@contextmanager
def reproducible(seed: int, threads: int = DEFAULT_THREADS) -> Iterator[None]:
    """Run a block so that the same ``seed`` on the same machine gives the same bits.

    Inside the block:

    * torch's global RNG is seeded with ``seed`` (the caller's RNG state is restored after);
    * torch's intra-op thread pool and the BLAS / OpenMP pools of numpy, scipy and
      scikit-learn (through ``threadpoolctl``) use exactly ``threads`` threads, whatever
      the machine's core count;
    * ``torch.use_deterministic_algorithms(True, warn_only=True)``: torch picks its
      deterministic kernels and warns where an op has none; oneDNN's deterministic mode
      is on and cuDNN's autotuner is off.

    Every setting is put back on exit, so a user's process keeps its own. What stays
    machine-dependent: the CPU's instruction set and the BLAS build pick different
    kernels (AVX2 vs AVX-512 sum in another order), so another machine gives other
    last bits and, after training amplifies them, slightly other scores. On CUDA,
    cuBLAS is deterministic only with ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` set before
    start-up (not set here; the bench trains on the CPU).

    Args:
        seed: torch's global seed inside the block.
        threads: CPU threads (>= 1).

    >>> before = torch.get_num_threads()
    >>> with reproducible(0, threads=1):
    ...     torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(), round(float(torch.rand(1)), 4)
    (1, True, 0.4963)
    >>> torch.get_num_threads() == before, torch.are_deterministic_algorithms_enabled()
    (True, False)
    """
    if int(threads) < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    old_deterministic = torch.are_deterministic_algorithms_enabled()
    old_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    old_mkldnn = torch.backends.mkldnn.deterministic
    old_benchmark = torch.backends.cudnn.benchmark
    with limited_threads(int(threads)), torch.random.fork_rng(devices=[]):
        try:
            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.backends.mkldnn.deterministic = True
            torch.backends.cudnn.benchmark = False
            torch.manual_seed(int(seed))
            yield
        finally:
            torch.backends.cudnn.benchmark = old_benchmark
            torch.backends.mkldnn.deterministic = old_mkldnn
            torch.use_deterministic_algorithms(old_deterministic, warn_only=old_warn_only)


def random_hflip(images: torch.Tensor, p: float = 0.5) -> torch.Tensor:
    """Mirror each image ``(B, C, H, W)`` left-right with probability ``p`` (torch's global RNG).

    Label-preserving for the world's attributes (colours, patterns, shapes); not for
    left/right part identities (part visibility, part coordinates), which callers must
    not train on with it.

    >>> x = torch.arange(4.0).view(1, 1, 1, 4)
    >>> random_hflip(x, p=1.0).flatten().tolist(), random_hflip(x, p=0.0).flatten().tolist()
    ([3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0])
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    flip = torch.rand(images.shape[0], device=images.device) < p
    return torch.where(flip.view(-1, *([1] * (images.ndim - 1))), images.flip(-1), images)


def _scheduler(
    optimiser: torch.optim.Optimizer, schedule: str, lr: float, total_steps: int, warmup: float | None = None
):
    if schedule == "constant":
        return None
    if schedule == "onecycle":
        total = max(int(total_steps), 4)  # OneCycleLR needs >= 1 step in each phase
        pct_start = max(0.25, 2.0 / total) if warmup is None else float(warmup)
        return torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=lr, total_steps=total, pct_start=pct_start)
    if schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=max(total_steps, 1))
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")


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
    schedule: str = "constant",
    optimiser: str = "adam",
    warmup: float | None = None,
    augment: Callable[[torch.Tensor], torch.Tensor] | None = None,
    seed: int = 0,
    module: nn.Module | None = None,
    val_fn: Callable[[], float] | None = None,
    patience: int | None = None,
    desc: str = "train",
    progress: bool = True,
) -> TrainHistory:
    """Minimise ``loss_fn`` over shuffled minibatches of ``tensors`` with Adam (or AdamW).

    Args:
        loss_fn: batch (tuple of the same tensors, ``batch_size`` rows) -> scalar loss.
        params: the parameters to train (others stay as they are).
        tensors: tensors sharing their first dimension ``N``.
        epochs: passes over the data.
        lr: Adam's learning rate (the peak rate for ``"onecycle"``, the start for ``"cosine"``).
        weight_decay: Adam's L2 penalty (AdamW's decoupled decay with ``optimiser="adamw"``).
        schedule: per-step learning-rate schedule, one of :data:`SCHEDULES`: ``"constant"``;
            ``"onecycle"`` (Smith & Topin 2019: warm up to ``lr`` over the first ``warmup``
            fraction of the steps, default 25 %, then anneal to ~0); ``"cosine"`` (cosine decay
            from ``lr`` to 0).
        optimiser: one of :data:`OPTIMISERS`.
        warmup: ``"onecycle"``'s warm-up fraction in (0, 1) (``None``: 25 %, at least 2 steps).
        augment: applied to the first tensor of every training batch (e.g. :func:`random_hflip`
            on the images), never to validation.
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
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if optimiser not in OPTIMISERS:
        raise ValueError(f"optimiser must be one of {OPTIMISERS}, got {optimiser!r}")
    if warmup is not None and not 0.0 < warmup < 1.0:
        raise ValueError(f"warmup must be in (0, 1), got {warmup!r}")
    history = TrainHistory()
    make = torch.optim.AdamW if optimiser == "adamw" else torch.optim.Adam
    opt = make(params, lr=lr, weight_decay=weight_decay)
    scheduler = _scheduler(opt, schedule, lr, int(epochs) * math.ceil(n / batch_size), warmup)
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
                batch = tuple(t[idx] for t in tensors)
                if augment is not None:
                    batch = (augment(batch[0]), *batch[1:])
                loss = loss_fn(batch)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if scheduler is not None:
                    scheduler.step()
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
