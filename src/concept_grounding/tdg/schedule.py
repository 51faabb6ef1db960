"""The eta schedule of Tied Diffusion Guidance: SUB (Bader et al.), Sec. 3, Eq. 4, and Sec. 5.

``t`` is normalised time in [0, 1] with ``t = 1`` pure noise; for Flux flow matching
``t = sigma = timestep / 1000``::

    eta(t) = 1                                   if t > t_max
           = ((t - t_min) / (t_max - t_min))^k   if t_min <= t <= t_max
           = 0                                   if t < t_min

Paper settings (Sec. 5): k = 10, t_min = 0.2, t_max = 0.6 for pattern attributes and
0.9 for colour and shape attributes.

>>> s = EtaSchedule(t_min=0.2, t_max=0.6, k=1.0)
>>> s(1.0), s(0.4), s(0.1)
(1.0, 0.5, 0.0)
>>> paper_schedule("pattern")
EtaSchedule(t_min=0.2, t_max=0.6, k=10.0)
>>> schedule_for_attribute("has_crown_color::black").t_max
0.9
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

__all__ = ["EtaSchedule", "ConstantEta", "PAPER_SCHEDULES", "paper_schedule", "schedule_for_attribute"]


class Schedule(Protocol):
    """Anything mapping normalised time ``t`` in [0, 1] to ``eta`` in [0, 1]."""

    def __call__(self, t: float) -> float: ...


@dataclass(frozen=True)
class EtaSchedule:
    """SUB Eq. 4. ``t_min == t_max`` is a step: ``eta = 1`` for ``t >= t_max``, else 0.

    Raises:
        ValueError: ``t_min > t_max``, either outside [0, 1], or ``k <= 0``.
    """

    t_min: float = 0.2
    t_max: float = 0.9
    k: float = 10.0

    def __post_init__(self) -> None:
        for name in ("t_min", "t_max", "k"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or math.isnan(value):
                raise ValueError(f"{name} must be a number, got {value!r}")
            object.__setattr__(self, name, float(value))
        if not 0.0 <= self.t_min <= 1.0 or not 0.0 <= self.t_max <= 1.0:
            raise ValueError(f"t_min and t_max must lie in [0, 1], got t_min={self.t_min}, t_max={self.t_max}")
        if self.t_min > self.t_max:
            raise ValueError(f"t_min must be <= t_max, got t_min={self.t_min} > t_max={self.t_max}")
        if self.k <= 0:
            raise ValueError(f"k must be > 0, got k={self.k}")

    def __call__(self, t: float) -> float:
        t = float(t)
        if t > self.t_max:
            return 1.0
        if t < self.t_min:
            return 0.0
        if self.t_max == self.t_min:
            return 1.0
        return ((t - self.t_min) / (self.t_max - self.t_min)) ** self.k


@dataclass(frozen=True)
class ConstantEta:
    """``eta(t) = value`` at every step (1: the pair moves identically; 0: no tie).

    >>> ConstantEta(1.0)(0.3)
    1.0
    """

    value: float

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.value) <= 1.0:
            raise ValueError(f"value must lie in [0, 1], got {self.value!r}")

    def __call__(self, t: float) -> float:
        return float(self.value)


#: Paper defaults (SUB Sec. 5) per attribute category.
PAPER_SCHEDULES: dict[str, EtaSchedule] = {
    "colour": EtaSchedule(t_min=0.2, t_max=0.9, k=10.0),
    "shape": EtaSchedule(t_min=0.2, t_max=0.9, k=10.0),
    "pattern": EtaSchedule(t_min=0.2, t_max=0.6, k=10.0),
}


def paper_schedule(category: str) -> EtaSchedule:
    """The SUB schedule for ``"colour"``, ``"shape"`` or ``"pattern"``."""
    try:
        return PAPER_SCHEDULES[category]
    except KeyError:
        raise ValueError(f"unknown attribute category {category!r}; known: {sorted(PAPER_SCHEDULES)}") from None


def schedule_for_attribute(attribute: str) -> EtaSchedule:
    """The SUB schedule for a CUB attribute name, via its category (see ``prompts.attribute_category``)."""
    from .prompts import attribute_category

    return paper_schedule(attribute_category(attribute))
