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
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..settings import setting
from .components import FluxTrainConfig

__all__ = ["TrainFluxConfig", "TrainFluxResult", "run_train_flux", "channel_list"]


def channel_list(text: str) -> tuple[int, ...]:
    """``"32,64,128"`` -> ``(32, 64, 128)`` (the parser of ``--vae-blocks``).

    >>> channel_list("32, 64,128")
    (32, 64, 128)
    """
    try:
        widths = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not widths or min(widths) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive widths, got {text!r}")
    return widths


@dataclass(frozen=True)
class TrainFluxConfig:
    """Every setting of one ``train-flux`` run; :meth:`training_config` is the
    :class:`~.components.FluxTrainConfig` it trains (``tiny`` overrides the sizes).

    Args:
        work_dir: checkpoint / cache folder; the same one resumes.
        out: the pipeline folder written as the job runs (the command's ``--out``).
        threads, workers, device, progress: how the job runs (torch CPU threads, rendering
            processes, the training device, progress bars); the other settings are the
            :class:`~.components.FluxTrainConfig` fields of the same names (``size``,
            ``seed``, ``pose``, ``zoom``, ``scene``: its world's).
    """

    work_dir: Path = setting(help="checkpoint / cache folder (resume from here)", parse=Path)
    tiny: bool = setting(False, "2 classes, 8 images, 2 steps per stage: a smoke test", action="store_true")
    size: int = setting(32, "image side in pixels", parse=int)
    per_class: int = setting(400, "training renders per species", parse=int)
    vae_blocks: tuple[int, ...] = setting((16, 32, 64), "AutoencoderKL block widths, e.g. 32,64,128",
                                          parse=channel_list)
    latent_channels: int = setting(8, "VAE latent channels", parse=int)
    vae_steps: int = setting(800, "VAE training steps (0 with --init-from: keep its VAE)", parse=int)
    vae_batch: int = setting(32, "VAE batch size", parse=int)
    steps: int | None = setting(None, "transformer steps (default: fit --minutes; 0 with --init-from: keep its "
                                      "transformer)", parse=int)
    minutes: float = setting(42.0, "transformer wall-time budget when --steps is not given", parse=float)
    batch: int = setting(32, "transformer batch size", parse=int)
    lr: float = setting(8e-4, "transformer peak learning rate (cosine schedule)", parse=float)
    layers: int = setting(2, "double-stream transformer blocks", parse=int)
    single_layers: int = setting(4, "single-stream transformer blocks", parse=int)
    heads: int = setting(4, "transformer attention heads", parse=int)
    head_dim: int = setting(32, "transformer width per head (multiple of 4)", parse=int)
    checkpoint_every: int = setting(200, "transformer steps between checkpoints", parse=int)
    threads: int = setting(1, "torch CPU threads (1: on a shared 2-core machine one thread ran 5x faster than two)",
                           parse=int)
    pose: str = setting("canonical", "pose of the training renders (WorldConfig.pose)", choices=("canonical", "varied"))
    zoom: float = setting(1.0, "bird size factor of the training renders (WorldConfig.zoom)", parse=float)
    scene: str = setting("plain", "background of the training renders (WorldConfig.scene)", choices=("plain", "varied"))
    vae_lr: float = setting(1e-3, "VAE peak learning rate (cosine schedule)", parse=float)
    vae_deviant_per_class: int = setting(0, "deviation-rate-1 renders per class added to the VAE's training set "
                                            "(attributes drawn independently of the species)", parse=int)
    vae_part_weight: float = setting(0.0, "lambda of the VAE's part-weighted pixel loss (every part gets the same "
                                          "extra weight; 0: plain)", parse=float)
    warmup: int = setting(200, "transformer warm-up steps", parse=int)
    init_from: Path | None = setting(None, "FluxPipeline folder of the same sizes (e.g. the shipped world Flux) to "
                                           "start from", parse=Path)
    vae_decoder_only: bool = setting(False, "fit only the --init-from VAE's decoder (its encoder and latent space are "
                                            "kept, so its transformer stays valid)", action="store_true")
    guide_captions: float = setting(0.20, "probability of TDG's colour guide caption 'a photo of a bird with {S}' "
                                          "(the other forms keep their proportions)", parse=float)
    seed: int = setting(0, "seed of the renders and the training", parse=int)
    workers: int = setting(1, "processes rendering the training sets (same renders for any count)", parse=int)
    device: str = setting("cpu", "torch device of the VAE, latents and transformer training (e.g. cuda; rendering "
                                 "and export stay on the CPU)")
    progress: bool = setting(True, "show no progress bars", flag="--no-progress", action="store_false")
    out: Path | None = None

    def check(self) -> None:
        """The cheap checks, before anything is rendered (one line naming the flag).

        Raises:
            ValueError: ``threads`` or ``workers`` below 1, or ``init_from`` not a ``FluxPipeline`` folder.
        """
        if self.threads is not None and self.threads <= 0:
            raise ValueError(f"--threads must be > 0, got {self.threads}")
        if self.workers <= 0:
            raise ValueError(f"--workers must be > 0, got {self.workers}")
        if self.init_from is not None and not (Path(self.init_from) / "model_index.json").is_file():
            raise ValueError(f"--init-from: {self.init_from} is not a FluxPipeline folder (no model_index.json)")

    def training_config(self) -> FluxTrainConfig:
        """The :class:`~.components.FluxTrainConfig` trained (``tiny``: the smoke sizes; the
        attribute-preserving VAE settings and ``init_from`` apply to a smoke run too)."""
        from ..world import WorldConfig
        from .components import TRAINING_WORLD

        init_from = str(self.init_from) if self.init_from else None
        if self.tiny:
            return FluxTrainConfig(
                world=replace(TRAINING_WORLD, class_names=("017.Cardinal", "073.Blue_Jay"), seed=self.seed), per_class=4,
                vae_blocks=(8, 16), latent_channels=4, vae_steps=0 if self.vae_steps == 0 else 2, vae_batch=4, text_width=16, text_layers=1, layers=1,
                single_layers=1, heads=2, head_dim=16, batch=4, warmup=1, checkpoint_every=1,
                vae_deviant_per_class=self.vae_deviant_per_class, vae_part_weight=self.vae_part_weight, init_from=init_from,
                vae_decoder_only=self.vae_decoder_only, steps=0 if self.steps == 0 else 2, guide_captions=self.guide_captions,
            )  # fmt: skip
        return FluxTrainConfig(
            world=WorldConfig(image_size=self.size, seed=self.seed, pose=self.pose, zoom=self.zoom, scene=self.scene),
            per_class=self.per_class, vae_blocks=tuple(self.vae_blocks), latent_channels=self.latent_channels,
            vae_steps=self.vae_steps, vae_batch=self.vae_batch, steps=self.steps, minutes=self.minutes,
            batch=self.batch, lr=self.lr, layers=self.layers, single_layers=self.single_layers, heads=self.heads,
            head_dim=self.head_dim, checkpoint_every=self.checkpoint_every, vae_lr=self.vae_lr,
            vae_deviant_per_class=self.vae_deviant_per_class, vae_part_weight=self.vae_part_weight,
            warmup=self.warmup, init_from=init_from, vae_decoder_only=self.vae_decoder_only,
            guide_captions=self.guide_captions,
        )


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
        return {k: self.record[k] for k in ("parameters", "bytes_on_disk", "flux_steps", "flux_seconds",
                                            "final_loss_mean_last_100")}


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

    record = train_world_flux(training, config.out, config.work_dir, progress=config.progress,
                              threads=config.threads, device=config.device, workers=config.workers)
    return TrainFluxResult(config, Path(config.out), record)
