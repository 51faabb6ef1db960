"""The training knobs every trainer shares (:class:`TrainConfig`) and the default thread
count, in a module without torch: the command line builds its parsers from them, and
``concept-grounding --help`` or a mistyped argument must not wait for torch to import.
:mod:`.training` re-exports both.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_THREADS", "TrainConfig", "trainer_knobs"]

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
    ``3e-3``, the post-hoc CBM embeds at batch 256).

    Attributes:
        epochs: passes over the data of the image-side training.
        seed: seeds initialisation, shuffling and sampling.
        batch_size: minibatch size, or ``None`` for the trainer's default.
        lr: (peak) Adam learning rate, or ``None`` for the trainer's default.
        threads: CPU threads of a :func:`reproducible` block around the training.
        progress: show tqdm bars.

    >>> TrainConfig(epochs=2).resolve(batch_size=32, lr=3e-3)
    {'epochs': 2, 'seed': 0, 'batch_size': 32, 'lr': 0.003, 'progress': True}
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

    def resolve(self, *, batch_size: int | None, lr: float | None) -> dict[str, object]:
        """Keyword arguments of one trainer: this config's values, the trainer's defaults
        ``batch_size`` / ``lr`` where this config leaves them ``None``."""
        return {"epochs": int(self.epochs), "seed": int(self.seed),
                "batch_size": batch_size if self.batch_size is None else int(self.batch_size),
                "lr": lr if self.lr is None else float(self.lr), "progress": bool(self.progress)}


def trainer_knobs(
    train: TrainConfig | None, *, epochs: int, seed: int, batch_size: int | None, lr: float | None, progress: bool
) -> tuple[int, int, int | None, float | None, bool]:
    """``(epochs, seed, batch_size, lr, progress)`` of one trainer call: its loose arguments,
    or ``train``'s values where a :class:`TrainConfig` is given (:meth:`TrainConfig.resolve`:
    its batch size and learning rate only where set).

    >>> trainer_knobs(None, epochs=3, seed=1, batch_size=32, lr=None, progress=False)
    (3, 1, 32, None, False)
    >>> trainer_knobs(TrainConfig(epochs=2, lr=0.1), epochs=3, seed=1, batch_size=32, lr=None, progress=False)
    (2, 0, 32, 0.1, True)
    """
    if train is None:
        return epochs, seed, batch_size, lr, progress
    knobs = train.resolve(batch_size=batch_size, lr=lr)
    return knobs["epochs"], knobs["seed"], knobs["batch_size"], knobs["lr"], knobs["progress"]
