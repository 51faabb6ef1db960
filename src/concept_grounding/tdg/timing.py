"""Interleaved timing of several callables: the one way this project times TDG.

:func:`interleave` warms every callable up, then runs rounds that call each once in a rotating order,
reading wall and process CPU time around each call (garbage collector off, as in :mod:`timeit`), and
reports per-round ratios, so a neighbour's burst on a shared machine does not read as overhead. Why
and how: docs/guide/development.md, "Tests and benchmarks".

>>> import itertools
>>> fake = itertools.count()
>>> result = interleave({"a": lambda: None, "b": lambda: None}, rounds=3, warmup=0,
...                     clocks={"cpu": lambda: next(fake), "wall": lambda: next(fake)})
>>> result.order
[['a', 'b'], ['b', 'a'], ['a', 'b']]
>>> sorted(result.timings), len(result.timings["a"].cpu_s)
(['a', 'b'], 3)
>>> result.ratio("a", "b").median   # every fake call lasts 2 ticks on both clocks
1.0
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["interleave"]

CLOCKS = ("cpu", "wall")


@dataclass(frozen=True)
class Spread:
    """Median, minimum and maximum of a list of values (seconds, or ratios).

    >>> Spread.of([3.0, 1.0, 2.0])
    Spread(median=2.0, min=1.0, max=3.0)
    """

    median: float
    min: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        if not values:
            raise ValueError("no values to summarise")
        return cls(float(statistics.median(values)), float(min(values)), float(max(values)))

    def format(self, digits: int = 3, unit: str = "") -> str:
        """``"1.007x [0.990, 1.010]"``-style text."""
        return f"{self.median:.{digits}f}{unit} [{self.min:.{digits}f}, {self.max:.{digits}f}]"


@dataclass(frozen=True)
class Timing:
    """Per-round seconds of one callable, on each clock."""

    name: str
    cpu_s: tuple[float, ...]
    wall_s: tuple[float, ...]

    def seconds(self, clock: str = "cpu") -> tuple[float, ...]:
        if clock not in CLOCKS:
            raise ValueError(f"clock must be one of {CLOCKS}, got {clock!r}")
        return self.cpu_s if clock == "cpu" else self.wall_s

    def spread(self, clock: str = "cpu") -> Spread:
        return Spread.of(list(self.seconds(clock)))


@dataclass(frozen=True)
class Interleaved:
    """What :func:`interleave` measured.

    Attributes:
        timings: name -> :class:`Timing`, in the order the callables were given.
        order: the call order of each round.
        warmup: untimed calls of each callable before the rounds.
    """

    timings: dict[str, Timing]
    order: list[list[str]] = field(default_factory=list)
    warmup: int = 1

    @property
    def rounds(self) -> int:
        return len(self.order)

    def ratio(self, numerator: str, denominator: str, clock: str = "cpu") -> Spread:
        """``numerator / denominator`` per round (both calls share the round's load)."""
        top, bottom = self.timings[numerator].seconds(clock), self.timings[denominator].seconds(clock)
        return Spread.of([a / b for a, b in zip(top, bottom)])

    def ratio_of_minima(self, numerator: str, denominator: str, clock: str = "cpu") -> float:
        """``min(numerator) / min(denominator)``: the least disturbed call of each."""
        return min(self.timings[numerator].seconds(clock)) / min(self.timings[denominator].seconds(clock))

    def as_dict(self, ratios: Mapping[str, tuple[str, str]] | None = None) -> dict[str, Any]:
        """Plain JSON values: per callable and clock the median/min/max seconds, and the named ratios."""
        out: dict[str, Any] = {"rounds": self.rounds, "warmup": self.warmup, "seconds": {}, "ratios": {}}
        for name, timing in self.timings.items():
            out["seconds"][name] = {clock: vars(timing.spread(clock)) for clock in CLOCKS}
        for label, (a, b) in (ratios or {}).items():
            out["ratios"][label] = {
                clock: {**vars(self.ratio(a, b, clock)), "of_minima": self.ratio_of_minima(a, b, clock)}
                for clock in CLOCKS
            }
        return out

    def report(
        self, ratios: Mapping[str, tuple[str, str]] | None = None, unit: float = 1.0, unit_name: str = "s"
    ) -> str:
        """Lines of text: each callable's CPU and wall seconds (divided by ``unit``, e.g. pairs
        per call) as ``median [min, max]``, then each named ratio on both clocks."""
        width = max(len(name) for name in self.timings)
        lines = [f"{self.rounds} interleaved rounds after {self.warmup} warm-up call(s) each; median [min, max]"]
        for name, timing in self.timings.items():
            cpu = Spread.of([s / unit for s in timing.cpu_s]).format(3, f" {unit_name}")
            wall = Spread.of([s / unit for s in timing.wall_s]).format(3, f" {unit_name}")
            lines.append(f"  {name:<{width}}  CPU {cpu}   wall {wall}")
        for label, (a, b) in (ratios or {}).items():
            lines.append(
                f"  {label}: CPU {self.ratio(a, b, 'cpu').format(3, 'x')} "
                f"(of minima {self.ratio_of_minima(a, b, 'cpu'):.3f}x), "
                f"wall {self.ratio(a, b, 'wall').format(3, 'x')} (of minima {self.ratio_of_minima(a, b, 'wall'):.3f}x)"
            )
        return "\n".join(lines)


def interleave(
    callables: Mapping[str, Callable[[], Any]],
    rounds: int = 5,
    warmup: int = 1,
    sync: Callable[[], Any] | None = None,
    clocks: Mapping[str, Callable[[], float]] | None = None,
) -> Interleaved:
    """Time ``callables`` (name -> zero-argument callable) in ``rounds`` interleaved rounds.

    Args:
        callables: at least one; their return values are discarded.
        rounds: timed calls of each callable.
        warmup: untimed calls of each callable first (at least 1 is advised).
        sync: called before and after each timed call, inside the timer's span
            (``torch.cuda.synchronize`` on a GPU, so the wall clock sees the kernels).
        clocks: ``{"cpu": ..., "wall": ...}`` replacements (tests); default
            ``time.process_time`` and ``time.perf_counter``.
    Returns:
        :class:`Interleaved` (see the module docstring for the method).
    """
    if not callables:
        raise ValueError("nothing to time")
    if rounds < 1 or warmup < 0:
        raise ValueError(f"need rounds >= 1 and warmup >= 0, got rounds={rounds}, warmup={warmup}")
    clocks = dict(clocks or {"cpu": time.process_time, "wall": time.perf_counter})
    cpu_clock, wall_clock = clocks["cpu"], clocks["wall"]
    names = list(callables)
    for _ in range(warmup):
        for name in names:
            callables[name]()
    cpu: dict[str, list[float]] = {name: [] for name in names}
    wall: dict[str, list[float]] = {name: [] for name in names}
    order = []
    enabled = gc.isenabled()
    try:
        for r in range(rounds):
            this_round = names[r % len(names) :] + names[: r % len(names)]
            order.append(this_round)
            gc.collect()
            for name in this_round:
                gc.disable()
                if sync is not None:
                    sync()
                c0, w0 = cpu_clock(), wall_clock()
                callables[name]()
                if sync is not None:
                    sync()
                c1, w1 = cpu_clock(), wall_clock()
                if enabled:
                    gc.enable()
                cpu[name].append(c1 - c0)
                wall[name].append(w1 - w0)
    finally:
        if enabled:
            gc.enable()
    timings = {name: Timing(name, tuple(cpu[name]), tuple(wall[name])) for name in names}
    return Interleaved(timings, order, warmup)
