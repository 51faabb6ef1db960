"""Split the SUB images across ``accelerate launch`` processes and gather the scores back.

Process ``r`` of ``P`` scores the contiguous block ``shard(N, r, P)`` of the images; the
blocks are gathered in rank order, so the concatenation is the single-process order
and the metrics, computed once on the full matrix, come out identical.

>>> [shard(10, r, 3) for r in range(3)]
[range(0, 4), range(4, 7), range(7, 10)]
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

__all__ = ["process_info", "shard"]


@dataclass(frozen=True)
class ProcessInfo:
    """``index`` of this process among ``count`` (``0`` of ``1`` without a launcher)."""

    index: int = 0
    count: int = 1

    @property
    def is_main(self) -> bool:
        return self.index == 0


def process_info() -> ProcessInfo:
    """This process's rank and the world size; starts accelerate's state only under a launcher
    (``WORLD_SIZE`` > 1: ``accelerate launch``, ``torchrun``), so a plain run pays nothing.
    Without CUDA the processes talk over gloo on the CPU."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return ProcessInfo()
    import torch
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available())
    return ProcessInfo(state.process_index, state.num_processes)


def shard(n: int, index: int, count: int) -> range:
    """Rows of process ``index`` of ``count``: contiguous blocks, the first ``n % count`` one longer."""
    base, extra = divmod(int(n), int(count))
    start = index * base + min(index, extra)
    return range(start, start + base + (index < extra))


def gather_rows(local: np.ndarray | None, info: ProcessInfo) -> np.ndarray | None:
    """Concatenate every process's ``(n_r, ...)`` block in rank order (identity for one process)."""
    if info.count == 1 or local is None:
        return local
    from accelerate.utils import gather_object

    blocks = gather_object([local])
    return np.concatenate(blocks, axis=0)
