"""The training knobs every trainer shares (:class:`TrainConfig`) and the default thread
count, in a module without torch: the command line builds its parsers from them, and
``concept-grounding --help`` or a mistyped argument must not wait for torch to import.
:mod:`.training` re-exports both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_THREADS", "TrainConfig", "train_settings"]

#: CPU threads of a :func:`reproducible` block unless told otherwise. Fixed, not the
#: machine's core count, because a float sum split over another number of threads rounds
#: differently and training amplifies the difference. One thread: the same split on every
#: machine, and on a busy shared 2-core machine a small bench ran 2-4x faster in wall time
#: with 1 thread than with 2 (OpenMP threads spin while they wait for a core).
DEFAULT_THREADS = 1


@dataclass(frozen=True)
class TrainConfig:
    """The training knobs every trainer here shares, in one place.

    ``train_cbm``, ``train_cem`` and ``train_posthoc_cbm`` take one as ``train=``; the
    bench builds it from its :class:`~concept_grounding.bench.config.BenchConfig` and the
    Space from its build settings. ``None`` for ``batch_size`` / ``lr`` keeps each
    trainer's own default (they differ: a CBM's image side trains at batch 32 and
    ``3e-3``, the post-hoc CBM embeds at batch 256). The trainers' loose ``epochs``,
    ``seed``, ``batch_size``, ``lr`` and ``progress`` build one (:func:`train_settings`); a
    knob is given one way or the other, never both.

    Attributes:
        epochs: passes over the data of the image-side training.
        seed: seeds initialisation, shuffling and sampling.
        batch_size: minibatch size, or ``None`` for the trainer's default.
        lr: (peak) Adam learning rate, or ``None`` for the trainer's default.
        threads: CPU threads of a :func:`reproducible` block around the training.
        progress: show tqdm bars.

    >>> TrainConfig(epochs=0)
    Traceback (most recent call last):
    ...
    ValueError: epochs must be >= 1, got 0
    """

    epochs: int = 10
    seed: int = 0
    batch_size: int | None = None
    lr: float | None = None
    threads: int = DEFAULT_THREADS
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("epochs", "threads", "batch_size"):
            value = getattr(self, name)
            if value is not None and int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.lr is not None and not float(self.lr) > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


def train_settings(train: TrainConfig | None, **loose: Any) -> TrainConfig:
    """The one :class:`TrainConfig` of a trainer call: ``train`` as given, or one built from the
    loose keyword arguments the caller set (those not ``None``; the rest keep
    :class:`TrainConfig`'s defaults, and ``batch_size`` / ``lr`` ``None`` the trainer's own).

    An explicit value is never overridden: a knob set both loose and through ``train`` is
    refused, naming it (pass the one :class:`TrainConfig`, e.g. ``dataclasses.replace(train, progress=False)``).

    >>> train_settings(None, epochs=3, seed=1, batch_size=32, lr=None)
    TrainConfig(epochs=3, seed=1, batch_size=32, lr=None, threads=1, progress=True)
    >>> train_settings(TrainConfig(epochs=2, lr=0.1), epochs=None, seed=None, progress=None)
    TrainConfig(epochs=2, seed=0, batch_size=None, lr=0.1, threads=1, progress=True)
    >>> train_settings(TrainConfig(epochs=2), epochs=None, progress=False)
    Traceback (most recent call last):
    ...
    ValueError: progress given both loose and in train=; set it in the TrainConfig
    """
    given = {name: value for name, value in loose.items() if value is not None}
    if train is None:
        return TrainConfig(**given)
    if given:
        raise ValueError(f"{', '.join(given)} given both loose and in train=; set it in the TrainConfig")
    return train
