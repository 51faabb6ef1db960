"""The ``train-flux`` job: train the world Flux pipeline (resumable), and its report.

The job shape of :mod:`concept_grounding.jobs`: :class:`TrainFluxConfig` declares every
setting of ``concept-grounding train-flux`` once (flag, default, help, validator);
:func:`run_train_flux` checks the cheap ones, then trains with
:func:`~.train.train_world_flux`, which writes as it goes (checkpoints under ``work_dir``,
the pipeline folder, ``loss_curve.png``, ``samples.png``, ``train_log.json`` and
``loss_history.json`` under ``out``) so an interrupted run resumes; the
:class:`TrainFluxResult`'s ``save(out)`` then has nothing left to write and returns
``train_log.json``'s path.

>>> TrainFluxConfig(work_dir=Path("w"), tiny=True, seed=3).training_config().world.seed
3
>>> TrainFluxConfig(work_dir=Path("w"), size=64).training_config().world.image_size
64
>>> TrainFluxConfig(work_dir=Path("w"), train=FluxTrainConfig(lr=1e-3)).training_config().lr
0.001
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..settings import nested, setting
from ..world.config import WorldConfig
from .components import FluxTrainConfig

__all__ = ["TrainFluxConfig", "TrainFluxResult", "run_train_flux"]


def _trained_world(config: TrainFluxConfig) -> dict[str, Any]:
    """The field of ``train`` that :class:`TrainFluxConfig`'s own settings decide: its training world
    (so the training settings are checked, e.g. ``image_size`` against ``vae_blocks``, on the world
    they train on)."""
    return {"world": config.world()}


@dataclass(frozen=True)
class TrainFluxConfig:
    """One ``train-flux`` run: how it runs and what it renders, and ``train``, the
    :class:`~.components.FluxTrainConfig` whose declared settings are the training flags;
    :meth:`training_config` is what trains (``tiny`` overrides the sizes).

    Args:
        work_dir: checkpoint / cache folder; the same one resumes.
        out: the pipeline folder written as the job runs (the command's ``--out``).
        threads, workers, device, progress: how the job runs (torch CPU threads, rendering
            processes, the training device, progress bars).
        size, seed, pose, zoom, scene: the training world (:meth:`world`).
        train: the training settings, a nested config (:func:`~concept_grounding.settings.nested`):
            its settings are the command's training flags, and built from them it trains on
            :meth:`world`.
    """

    work_dir: Path = setting(help="checkpoint / cache folder (resume from here)", parse=Path)
    tiny: bool = setting(False, "2 classes, 8 images, 2 steps per stage: a smoke test", action="store_true")
    size: int = setting(32, "image side in pixels", parse=int)
    threads: int = setting(
        1, "torch CPU threads (1: on a shared 2-core machine one thread ran 5x faster than two)", parse=int
    )
    pose: str = setting("canonical", "pose of the training renders (WorldConfig.pose)", choices=("canonical", "varied"))
    zoom: float = setting(1.0, "bird size factor of the training renders (WorldConfig.zoom)", parse=float)
    scene: str = setting("plain", "background of the training renders (WorldConfig.scene)", choices=("plain", "varied"))
    seed: int = setting(0, "seed of the renders and the training", parse=int)
    workers: int = setting(1, "processes rendering the training sets (same renders for any count)", parse=int)
    device: str = setting(
        "cpu",
        "torch device of the VAE, latents and transformer training (e.g. cuda; rendering and export stay on the CPU)",
    )
    progress: bool = setting(True, "show no progress bars", flag="--no-progress", action="store_false")
    out: Path | None = None
    train: FluxTrainConfig = nested(FluxTrainConfig, given=_trained_world)

    def world(self) -> WorldConfig:
        """The training renders' world: ``size``, ``seed``, ``pose``, ``zoom``, ``scene``."""
        return WorldConfig(image_size=self.size, seed=self.seed, pose=self.pose, zoom=self.zoom, scene=self.scene)

    def check(self) -> None:
        """The cheap checks, before anything is rendered (one line naming the flag).

        Raises:
            ValueError: ``threads`` or ``workers`` below 1, or ``init_from`` not a ``FluxPipeline`` folder.
        """
        if self.threads is not None and self.threads <= 0:
            raise ValueError(f"--threads must be > 0, got {self.threads}")
        if self.workers <= 0:
            raise ValueError(f"--workers must be > 0, got {self.workers}")
        init_from = self.train.init_from
        if init_from is not None and not (Path(init_from) / "model_index.json").is_file():
            raise ValueError(f"--init-from: {init_from} is not a FluxPipeline folder (no model_index.json)")

    def training_config(self) -> FluxTrainConfig:
        """The :class:`~.components.FluxTrainConfig` trained: ``train`` on :meth:`world`, or with
        ``tiny`` the smoke sizes (``train``'s attribute-preserving VAE settings, ``init_from``
        and a 0 for ``vae_steps`` / ``steps`` apply to a smoke run too)."""
        from .components import TRAINING_WORLD

        t = self.train
        if self.tiny:
            return replace(
                t,
                world=replace(TRAINING_WORLD, class_names=("017.Cardinal", "073.Blue_Jay"), seed=self.seed),
                per_class=4,
                vae_blocks=(8, 16),
                latent_channels=4,
                vae_steps=0 if t.vae_steps == 0 else 2,
                vae_batch=4,
                text_width=16,
                text_layers=1,
                layers=1,
                single_layers=1,
                heads=2,
                head_dim=16,
                batch=4,
                warmup=1,
                checkpoint_every=1,
                steps=0 if t.steps == 0 else 2,
            )
        return replace(t, world=self.world())


@dataclass(frozen=True)
class TrainFluxResult:
    """What :func:`run_train_flux` trained and wrote.

    Attributes:
        config: the job's configuration.
        out: the pipeline folder (with ``train_log.json``).
        record: the training log (``train_log.json``'s content).
    """

    config: TrainFluxConfig
    out: Path
    record: dict[str, Any]

    def save(self, out: str | Path) -> Path:
        """``train_log.json``'s path: the resumable job wrote everything as it ran.

        Raises:
            ValueError: ``out`` is not the folder the job wrote to.
        """
        if Path(out).resolve() != self.out.resolve():
            raise ValueError(f"out: the train-flux job wrote to {self.out}, its config's out, not {out}")
        return self.out / "train_log.json"

    def summary(self) -> dict[str, Any]:
        """The headline numbers the command prints."""
        return {
            k: self.record[k]
            for k in ("parameters", "bytes_on_disk", "flux_steps", "flux_seconds", "final_loss_mean_last_100")
        }


def run_train_flux(config: TrainFluxConfig) -> TrainFluxResult:
    """Check the settings, then train into ``config.out`` / ``config.work_dir`` (resumable).

    Raises:
        ValueError: ``config.out`` is ``None``, or a check of :meth:`TrainFluxConfig.check` fails.
    """
    if config.out is None:
        raise ValueError("out: give the pipeline folder to write")
    config.check()
    training = config.training_config()
    from .train import train_world_flux

    record = train_world_flux(
        training,
        config.out,
        config.work_dir,
        progress=config.progress,
        threads=config.threads,
        device=config.device,
        workers=config.workers,
    )
    return TrainFluxResult(config, Path(config.out), record)
