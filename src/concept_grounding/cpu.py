"""CPU threads sized to the cores free to this process, with idle threads that sleep instead of spinning.

torch, OpenMP, MKL and OpenBLAS start one thread per core and let idle threads spin; beside another busy
process they fight it for the cores. :func:`configure_threads` (the command line calls it once, before
torch starts its pools) picks a count and a passive wait policy; :func:`limited_threads` pins a count
for a block. The manual: docs/guide/install.md (CPU threads).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .errors import UsageError

__all__ = [
    "THREADS_ENV",
    "WAIT_POLICY",
    "ThreadChoice",
    "allowed_cores",
    "cgroup_cores",
    "busy_cores",
    "choose_threads",
    "configure_threads",
    "set_threads",
    "limited_threads",
]

#: forces the thread count: a number >= 1, ``auto`` (the default: the cores free to this process) or
#: ``off`` (leave every runtime at its own default, a thread per core spinning while idle)
THREADS_ENV = "CONCEPT_GROUNDING_THREADS"
#: read by the OpenMP runtimes when they start: idle threads sleep at once (GNU ``libgomp``, Intel ``libiomp``)
WAIT_POLICY: Mapping[str, str] = {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0"}
#: the thread counts read by the runtimes when they start; a value already set counts as forced
THREAD_VARS: tuple[str, ...] = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: how long :func:`busy_cores` watches the other processes (s)
SAMPLE_SECONDS = 0.2


@dataclass(frozen=True)
class ThreadChoice:
    """A thread count and why: ``threads`` is ``None`` when the runtimes keep their defaults (``off``)."""

    threads: int | None
    reason: str


def cgroup_cores(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPU quota of this container in cores (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), or ``None``.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "cpu.max").write_text("150000 100000\\n")
    ...     cgroup_cores(Path(d))
    1.5
    """
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def _affinity() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return set(range(os.cpu_count() or 1))


def allowed_cores() -> int:
    """Cores this process may run on: its CPU affinity, capped by the container's quota (rounded up)."""
    cores = len(_affinity())
    quota = cgroup_cores()
    return max(1, min(cores, math.ceil(quota)) if quota else cores)


def _cpu_ticks(cpus: set[int], stat: Path) -> tuple[int, int]:
    """(busy, total) clock ticks of ``cpus`` since boot, from ``/proc/stat``'s ``cpuN`` lines."""
    busy = total = 0
    for line in stat.read_text().splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        ticks = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
        total += sum(ticks)
        busy += sum(ticks) - ticks[3] - ticks[4]
    return busy, total


def busy_cores(seconds: float = SAMPLE_SECONDS, stat: Path = Path("/proc/stat")) -> float:
    """Cores of this process's affinity that *other* processes kept busy over the next ``seconds``.

    Reads ``/proc/stat`` before and after a sleep and takes away this process's own CPU time;
    0.0 where ``/proc/stat`` cannot be read.
    """
    cpus = _affinity()
    try:
        busy0, total0 = _cpu_ticks(cpus, stat)
        own0 = time.process_time()
        time.sleep(seconds)
        busy1, total1 = _cpu_ticks(cpus, stat)
    except (OSError, ValueError):
        return 0.0
    if total1 <= total0:
        return 0.0
    cores = len(cpus) * (busy1 - busy0) / (total1 - total0)
    return max(0.0, cores - (time.process_time() - own0) / seconds)


@cache
def _free_cores() -> int:
    return max(1, min(allowed_cores(), round(allowed_cores() - busy_cores())))


def choose_threads(env: Mapping[str, str] | None = None) -> ThreadChoice:
    """The thread count for this process: :data:`THREADS_ENV` if set, else ``OMP_NUM_THREADS`` if set,
    else the allowed cores less those other processes keep busy (sampled once per process; at least 1).

    >>> choose_threads({"CONCEPT_GROUNDING_THREADS": "3"})
    ThreadChoice(threads=3, reason='CONCEPT_GROUNDING_THREADS=3')
    >>> choose_threads({"OMP_NUM_THREADS": "1"}).threads, choose_threads({THREADS_ENV: "off"}).threads
    (1, None)
    >>> choose_threads({THREADS_ENV: "two"})
    Traceback (most recent call last):
    ...
    concept_grounding.errors.UsageError: CONCEPT_GROUNDING_THREADS: expected a thread count >= 1,
    'auto' or 'off', got 'two'
    """
    env = os.environ if env is None else env
    value = env.get(THREADS_ENV, "").strip().lower()
    if value == "off":
        return ThreadChoice(None, f"{THREADS_ENV}=off: the runtimes' defaults")
    if value not in ("", "auto"):
        if not value.isdigit() or int(value) < 1:
            raise UsageError(
                f"expected a thread count >= 1, 'auto' or 'off', got {env[THREADS_ENV]!r}", argument=THREADS_ENV
            )
        return ThreadChoice(int(value), f"{THREADS_ENV}={int(value)}")
    omp = env.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) >= 1:
        return ThreadChoice(int(omp), f"OMP_NUM_THREADS={int(omp)}")
    free = _free_cores()
    return ThreadChoice(free, f"{free} of {allowed_cores()} allowed cores free")


def configure_threads(env: MutableMapping[str, str] | None = None) -> ThreadChoice:
    """Apply :func:`choose_threads` to this process: the passive wait policy and the thread counts as
    environment variables (unless already set), for the runtimes not started yet and for child
    processes, and torch's and the BLAS pools' counts where they are already loaded. Call it before
    ``import torch``: a started OpenMP runtime keeps its wait policy."""
    env = os.environ if env is None else env
    choice = choose_threads(env)
    if choice.threads is None:
        return choice
    for name, value in WAIT_POLICY.items():
        env.setdefault(name, value)
    for name in THREAD_VARS:
        env.setdefault(name, str(choice.threads))
    if env is os.environ:
        _set_pools(choice.threads)
    return choice


def set_threads(threads: int) -> None:
    """Set torch's intra-op pool and the loaded BLAS / OpenMP pools (``threadpoolctl``) to ``threads``,
    and :data:`THREAD_VARS` for the pools not started yet and child processes, for the rest of the
    process (:func:`limited_threads` restores the pools after a block)."""
    if int(threads) < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    os.environ.update({name: str(int(threads)) for name in THREAD_VARS})
    _set_pools(int(threads))


def _set_pools(threads: int) -> None:
    """torch's intra-op pool and the loaded BLAS / OpenMP pools at ``threads``, where loaded."""
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(threads))
    if "numpy" in sys.modules:
        try:  # the models extra's; a base install's NumPy keeps its pool
            from threadpoolctl import threadpool_limits
        except ImportError:
            return
        threadpool_limits(limits=int(threads))


@contextmanager
def limited_threads(threads: int | None) -> Iterator[None]:
    """Run the block with torch and the BLAS / OpenMP pools at ``threads`` (``None``: as they are);
    the counts before are restored on exit. A fixed count makes float sums split the same way on
    every machine, which byte-identical results need.

    >>> import torch
    >>> before = torch.get_num_threads()
    >>> with limited_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    if threads is None:
        yield
        return
    if int(threads) < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    import torch
    from threadpoolctl import threadpool_limits

    old = torch.get_num_threads()
    with threadpool_limits(limits=int(threads)):
        torch.set_num_threads(int(threads))
        try:
            yield
        finally:
            torch.set_num_threads(old)
