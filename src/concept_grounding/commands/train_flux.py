"""``concept-grounding train-flux``: train the world Flux text-to-image pipeline (resumable).

Renders the bird world, fits an AutoencoderKL, trains word-level CLIP and T5 text encoders
jointly with a FluxTransformer2DModel (rectified flow) and saves a ``FluxPipeline`` folder
(float16 safetensors) with ``loss_curve.png``, ``samples.png`` and ``train_log.json``.
Re-running the same command with the same ``--work-dir`` resumes from the last checkpoint.
``--tiny`` trains a seconds-long smoke configuration.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

__all__ = ["add_arguments", "run", "config_from_args"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=Path, help="output pipeline folder")
    parser.add_argument("--work-dir", required=True, type=Path, help="checkpoint / cache folder (resume from here)")
    parser.add_argument("--tiny", action="store_true", help="2 classes, 8 images, 2 steps per stage: a smoke test")
    parser.add_argument("--size", type=int, default=32, help="image side in pixels")
    parser.add_argument("--per-class", type=int, default=400, help="training renders per species")
    parser.add_argument("--vae-blocks", type=_channel_list, default=(16, 32, 64), help="AutoencoderKL block widths, e.g. 32,64,128")
    parser.add_argument("--latent-channels", type=int, default=8, help="VAE latent channels")
    parser.add_argument("--vae-steps", type=int, default=800, help="VAE training steps (0 with --init-from: keep its VAE)")
    parser.add_argument("--vae-batch", type=int, default=32, help="VAE batch size")
    parser.add_argument("--steps", type=int, default=None,
                        help="transformer steps (default: fit --minutes; 0 with --init-from: keep its transformer)")
    parser.add_argument("--minutes", type=float, default=42.0, help="transformer wall-time budget when --steps is not given")
    parser.add_argument("--batch", type=int, default=32, help="transformer batch size")
    parser.add_argument("--lr", type=float, default=8e-4, help="transformer peak learning rate (cosine schedule)")
    parser.add_argument("--layers", type=int, default=2, help="double-stream transformer blocks")
    parser.add_argument("--single-layers", type=int, default=4, help="single-stream transformer blocks")
    parser.add_argument("--heads", type=int, default=4, help="transformer attention heads")
    parser.add_argument("--head-dim", type=int, default=32, help="transformer width per head (multiple of 4)")
    parser.add_argument("--checkpoint-every", type=int, default=200, help="transformer steps between checkpoints")
    parser.add_argument(
        "--threads", type=int, default=1,
        help="torch CPU threads (1: on a shared 2-core machine one thread ran 5x faster than two)",
    )
    parser.add_argument("--pose", choices=("canonical", "varied"), default="canonical",
                        help="pose of the training renders (WorldConfig.pose)")
    parser.add_argument("--zoom", type=float, default=1.0, help="bird size factor of the training renders (WorldConfig.zoom)")
    parser.add_argument("--scene", choices=("plain", "varied"), default="plain",
                        help="background of the training renders (WorldConfig.scene)")
    parser.add_argument("--vae-lr", type=float, default=1e-3, help="VAE peak learning rate (cosine schedule)")
    parser.add_argument("--vae-deviant-per-class", type=int, default=0,
                        help="deviation-rate-1 renders per class added to the VAE's training set (attributes drawn "
                             "independently of the species)")
    parser.add_argument("--vae-part-weight", type=float, default=0.0,
                        help="lambda of the VAE's part-weighted pixel loss (every part gets the same extra weight; 0: plain)")
    parser.add_argument("--warmup", type=int, default=200, help="transformer warm-up steps")
    parser.add_argument("--init-from", type=Path, default=None,
                        help="FluxPipeline folder of the same sizes (e.g. the shipped world Flux) to start from")
    parser.add_argument("--vae-decoder-only", action="store_true",
                        help="fit only the --init-from VAE's decoder (its encoder and latent space are kept, so its "
                             "transformer stays valid)")
    parser.add_argument("--guide-captions", type=float, default=0.20,
                        help="probability of TDG's colour guide caption 'a photo of a bird with {S}' (the other forms "
                             "keep their proportions)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the renders and the training")
    parser.add_argument("--workers", type=int, default=1, help="processes rendering the training sets (same renders for any count)")
    parser.add_argument("--device", default="cpu",
                        help="torch device of the VAE, latents and transformer training (e.g. cuda; rendering and export stay on the CPU)")
    parser.add_argument("--no-progress", action="store_true", help="show no progress bars")


def _channel_list(text: str) -> tuple[int, ...]:
    """``"32,64,128"`` -> ``(32, 64, 128)`` (argparse type of ``--vae-blocks``).

    >>> _channel_list("32, 64,128")
    (32, 64, 128)
    """
    try:
        widths = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not widths or min(widths) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive widths, got {text!r}")
    return widths


def config_from_args(args: argparse.Namespace):
    """The :class:`FluxTrainConfig` of the command line (``--tiny`` overrides sizes)."""
    from concept_grounding.world import WorldConfig
    from concept_grounding.worldflux import FluxTrainConfig
    from concept_grounding.worldflux.components import TRAINING_WORLD

    init_from = str(args.init_from) if args.init_from else None
    if args.tiny:  # the attribute-preserving VAE settings and --init-from apply to a smoke run too
        return FluxTrainConfig(
            world=replace(TRAINING_WORLD, class_names=("017.Cardinal", "073.Blue_Jay"), seed=args.seed), per_class=4,
            vae_blocks=(8, 16), latent_channels=4, vae_steps=0 if args.vae_steps == 0 else 2, vae_batch=4, text_width=16, text_layers=1, layers=1,
            single_layers=1, heads=2, head_dim=16, batch=4, warmup=1, checkpoint_every=1,
            vae_deviant_per_class=args.vae_deviant_per_class, vae_part_weight=args.vae_part_weight, init_from=init_from,
            vae_decoder_only=args.vae_decoder_only, steps=0 if args.steps == 0 else 2, guide_captions=args.guide_captions,
        )  # fmt: skip
    return FluxTrainConfig(
        world=WorldConfig(image_size=args.size, seed=args.seed, pose=args.pose, zoom=args.zoom, scene=args.scene),
        per_class=args.per_class,
        vae_blocks=tuple(args.vae_blocks),
        latent_channels=args.latent_channels,
        vae_steps=args.vae_steps,
        vae_batch=args.vae_batch,
        steps=args.steps,
        minutes=args.minutes,
        batch=args.batch,
        lr=args.lr,
        layers=args.layers,
        single_layers=args.single_layers,
        heads=args.heads,
        head_dim=args.head_dim,
        checkpoint_every=args.checkpoint_every,
        vae_lr=args.vae_lr,
        vae_deviant_per_class=args.vae_deviant_per_class,
        vae_part_weight=args.vae_part_weight,
        warmup=args.warmup,
        init_from=init_from,
        vae_decoder_only=args.vae_decoder_only,
        guide_captions=args.guide_captions,
    )


def run(args: argparse.Namespace) -> int:
    if args.threads is not None and args.threads <= 0:
        raise ValueError(f"--threads must be > 0, got {args.threads}")
    if args.workers <= 0:
        raise ValueError(f"--workers must be > 0, got {args.workers}")
    if args.init_from is not None and not (args.init_from / "model_index.json").is_file():
        raise ValueError(f"--init-from: {args.init_from} is not a FluxPipeline folder (no model_index.json)")
    cfg = config_from_args(args)
    from concept_grounding.worldflux.train import train_world_flux

    record = train_world_flux(cfg, args.out, args.work_dir, progress=not args.no_progress, threads=args.threads,
                              device=args.device, workers=args.workers)
    print(json.dumps({k: record[k] for k in ("parameters", "bytes_on_disk", "flux_steps", "flux_seconds", "final_loss_mean_last_100")}, indent=1))
    print(f"wrote {args.out}")
    return 0
