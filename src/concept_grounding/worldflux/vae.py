"""The VAE stage of the world Flux: its training set, the attribute-preserving loss, the fit
and the latents (resumable from ``work_dir``).

By default the ``AutoencoderKL`` is fitted with ``L1 + MSE + kl_weight * KL`` on the
transformer's own training renders; ``vae_deviant_per_class`` (renders whose attributes vary
independently of the species) and ``vae_part_weight`` (pixel losses weighted by the exact part map)
make it keep what a judge of attributes reads, and ``vae_decoder_only`` refits only the decoder.
Why, and the weights' formula: the world Flux's model card (``assets/world_flux/README.md``,
"The attribute-preserving VAE").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from .components import FluxTrainConfig, build_vae
from .training_utils import atomic_save, cosine_lr, render_fields, to_tensor, training_world

__all__ = []

#: First round (``index = class + round * num_classes``) of the deviation-rate-1 renders: far
#: from the transformer's renders (round 0 on) and the judge's (rounds 100,000 and 200,000 on).
VAE_DEVIANT_START = 50_000


def part_weights(part_maps: np.ndarray, strength: float) -> np.ndarray:
    """Per-pixel loss weights from exact part maps.

    Args:
        part_maps: ``(N, H, W)`` uint8, part index + 1 per pixel, 0 = no part
            (:attr:`~concept_grounding.world.WorldSample.part_map`).
        strength: lambda >= 0; 0 gives uniform weights.

    Returns:
        ``(N, H, W)`` float32 weights with mean 1 per image: ``1 + lambda * H / A_k`` on the
        ``A_k`` pixels of part ``k``, then divided by the image mean.

    >>> pm = np.zeros((1, 4, 4), np.uint8); pm[0, 0, 0] = 1; pm[0, 1:, :] = 2
    >>> w = part_weights(pm, 1.0)
    >>> float(w.mean()), float(w[0, 0, 0] / w[0, 3, 3]), float(w[0, 0, 1] / w[0, 3, 3])
    (1.0, 3.75, 0.75)
    """
    if strength < 0:
        raise ValueError(f"vae_part_weight must be >= 0, got {strength}")
    maps = np.asarray(part_maps)
    weights = np.ones(maps.shape, np.float32)
    side = float(maps.shape[-2])
    for part in range(1, int(maps.max(initial=0)) + 1):
        member = maps == part
        area = member.sum(axis=(1, 2), keepdims=True).astype(np.float32)
        weights += strength * member * (side / np.maximum(area, 1.0))
    return weights / weights.mean(axis=(1, 2), keepdims=True)


def _training_part_maps(
    config: Any, data: dict[str, np.ndarray], workers: int, progress: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``(images, part_maps)`` of the transformer's renders ``data``, re-rendered: a single
    bird's exact part map; a composition render's birds (``data["composed"]``) count as one
    part (1 on any bird), so its small birds weigh as much as its background."""
    from ..world.composition import composition_config

    composed = data.get("composed", np.zeros(len(data["indices"]), bool))
    images = np.empty_like(data["images"])
    maps = np.zeros(images.shape[:3], np.uint8)
    single = np.flatnonzero(~composed)
    if len(single):
        base = render_fields(config, data["indices"][single], ("image", "part_map"), workers, "vae parts", progress)
        images[single], maps[single] = base["image"], base["part_map"]
    flock = np.flatnonzero(composed)
    if len(flock):
        comp = render_fields(
            composition_config(config),
            data["indices"][flock],
            ("image", "mask"),
            workers,
            "vae compositions",
            progress,
            counts=data["count"][flock].tolist(),
        )
        images[flock], maps[flock] = comp["image"], comp["mask"].astype(np.uint8)
    return images, maps


def render_vae_set(
    cfg: FluxTrainConfig, data: dict[str, np.ndarray], progress: bool = True, workers: int = 1
) -> dict[str, np.ndarray]:
    """The VAE's training images when an attribute-preserving setting is on.

    Returns:
        ``images`` ``(N + D, H, W, 3)`` uint8: the transformer's renders (``data``) then
        ``D = vae_deviant_per_class * classes`` deviation-rate-1 renders; ``part_maps``
        ``(N + D, H, W)`` uint8, their exact part maps (weights: :func:`part_weights`).
    """
    world = training_world(cfg)
    images, maps = _training_part_maps(world.config, data, workers, progress)
    if not np.array_equal(images, data["images"]):
        raise ValueError("work_dir: data.npz does not match the world's renders; use a fresh --work-dir")
    if cfg.vae_deviant_per_class:
        deviant = type(world)(replace(world.config, deviation_rate=1.0), world.vocab)
        C = deviant.num_classes
        rounds = range(VAE_DEVIANT_START, VAE_DEVIANT_START + cfg.vae_deviant_per_class)
        extra = render_fields(
            deviant.config,
            [c + k * C for k in rounds for c in range(C)],
            ("image", "part_map"),
            workers,
            "vae deviant",
            progress,
        )
        images, maps = np.concatenate([images, extra["image"]]), np.concatenate([maps, extra["part_map"]])
    return {"images": images, "part_maps": maps}


def _vae_training_set(
    cfg: FluxTrainConfig, data: dict[str, np.ndarray], work: Path, progress: bool, workers: int = 1
) -> tuple[Any, Any]:
    """``(x, weights)``: image tensor in [-1, 1] and per-pixel weights ``(N, 1, H, W)`` or
    ``None`` for the plain loss; the rendered set is cached as ``vae_data.npz`` (compressed
    images and part maps; a cache of an older run may hold the weights themselves)."""
    import torch

    if not (cfg.vae_deviant_per_class or cfg.vae_part_weight):
        return to_tensor(data["images"]), None
    path = work / "vae_data.npz"
    if path.exists():
        with np.load(path) as z:
            vae_data = {k: z[k] for k in z.files}
    else:
        vae_data = render_vae_set(cfg, data, progress, workers)
        np.savez_compressed(path, **vae_data)
    weights = vae_data["weights"] if "weights" in vae_data else part_weights(vae_data["part_maps"], cfg.vae_part_weight)
    return to_tensor(vae_data["images"]), torch.from_numpy(weights)[:, None]


def _initial_vae(cfg: FluxTrainConfig) -> Any:
    """A fresh VAE, or ``init_from``'s VAE weights and latent shift / scaling factors in it
    (same architecture required)."""
    vae = build_vae(cfg)
    if cfg.init_from:
        from diffusers import AutoencoderKL

        source = AutoencoderKL.from_pretrained(Path(cfg.init_from) / "vae")
        try:
            vae.load_state_dict({k: v.float() for k, v in source.state_dict().items()})
        except RuntimeError:
            raise ValueError(
                f"--init-from: {cfg.init_from}'s VAE does not match --vae-blocks/--latent-channels"
            ) from None
        vae.register_to_config(shift_factor=source.config.shift_factor, scaling_factor=source.config.scaling_factor)
    return vae


def _trainable(vae: Any, cfg: FluxTrainConfig) -> list[Any]:
    """The parameters the VAE stage fits: all, or (``vae_decoder_only``) the decoder's, the
    encoder frozen."""
    if not cfg.vae_decoder_only:
        return list(vae.parameters())
    vae.requires_grad_(False)
    decoder = [vae.decoder] + ([vae.post_quant_conv] if vae.post_quant_conv is not None else [])
    for module in decoder:
        module.requires_grad_(True)
    return [p for module in decoder for p in module.parameters()]


def _latent_factors(
    vae: Any, cfg: FluxTrainConfig, data: dict[str, np.ndarray], device: str = "cpu"
) -> tuple[float, float]:
    """``(shift, scale)``: the mean and 1 / std of the posterior means of (up to 2,048 of) the
    training renders, or the initial VAE's own when only its decoder was fitted."""
    import torch

    if cfg.vae_decoder_only:
        return float(vae.config.shift_factor), float(vae.config.scaling_factor)
    x_data = to_tensor(data["images"])
    with torch.no_grad():
        means = torch.cat(
            [
                vae.encode(x_data[i : i + 256].to(device)).latent_dist.mean.cpu()
                for i in range(0, min(len(x_data), 2048), 256)
            ]
        )
    return float(means.mean()), float(1.0 / means.std())


def train_vae(
    cfg: FluxTrainConfig,
    data: dict[str, np.ndarray],
    work: Path,
    progress: bool,
    log: Callable,
    device: str = "cpu",
    workers: int = 1,
) -> Any:
    """Fit the VAE (resuming ``work / "vae.pt"``); set ``shift_factor`` / ``scaling_factor`` to
    the mean and 1/std of the latent means, as FluxPipeline decodes ``z / scaling + shift``.

    Loss per batch: ``mean(w |x' - x|) + mean(w (x' - x)^2) + kl_weight * KL`` with ``w`` from
    :func:`part_weights` (``w = 1`` by default); with ``vae_decoder_only`` the encoder is frozen
    and ``shift`` / ``scale`` are ``init_from``'s. Batches, posterior samples and the fit run on
    ``device`` (its own ``torch.Generator``; on the CPU the draws are those of earlier runs)."""
    import torch

    path = work / "vae.pt"
    torch.manual_seed(cfg.world.seed)
    vae = _initial_vae(cfg).to(device)
    if cfg.vae_steps == 0:  # keep init_from's VAE (weights and latent factors): a transformer-only run
        vae.eval()
        log(
            "vae",
            {
                "steps": 0,
                "kept_from": cfg.init_from,
                "shift_factor": vae.config.shift_factor,
                "scaling_factor": vae.config.scaling_factor,
            },
        )
        return vae
    params = _trainable(vae, cfg)
    opt = torch.optim.AdamW(params, lr=cfg.vae_lr, weight_decay=0.0)
    start, losses = 0, []
    if path.exists():
        state = torch.load(path, map_location=device, weights_only=True)
        vae.load_state_dict(state["model"])
        if state["done"]:
            vae.register_to_config(shift_factor=state["shift"], scaling_factor=state["scale"])
            return vae
        opt.load_state_dict(state["opt"])
        start, losses = state["step"], state["losses"]
    x_all, w_all = _vae_training_set(cfg, data, work, progress, workers)
    x_all = x_all.to(device)
    w_all = w_all.to(device) if w_all is not None else None
    n = x_all.shape[0]
    vae.train()
    bar = tqdm(range(start, cfg.vae_steps), desc="vae", disable=not progress, initial=start, total=cfg.vae_steps)
    for step in bar:
        g = torch.Generator(device).manual_seed(cfg.world.seed * 1_000_003 + step)
        idx = torch.randint(n, (cfg.vae_batch,), generator=g, device=device)
        x = x_all[idx]
        flip = (torch.rand(cfg.vae_batch, generator=g, device=device) < 0.5) & cfg.mirror_augment
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
        for group in opt.param_groups:
            group["lr"] = cosine_lr(step, cfg.vae_steps, cfg.vae_lr, 50)
        with torch.set_grad_enabled(not cfg.vae_decoder_only):
            post = vae.encode(x).latent_dist
        rec = vae.decode(post.sample(generator=g)).sample
        if w_all is None:
            l1 = (rec - x).abs().mean()
            mse = ((rec - x) ** 2).mean()
        else:
            w = torch.where(flip[:, None, None, None], w_all[idx].flip(-1), w_all[idx])
            l1 = ((rec - x).abs() * w).mean()
            mse = (((rec - x) ** 2) * w).mean()
        kl = post.kl().mean()
        loss = l1 + mse + cfg.kl_weight * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append([step, l1.item(), mse.item(), kl.item()])
        bar.set_postfix(l1=f"{losses[-1][1]:.4f}", mse=f"{losses[-1][2]:.4f}")
        if (step + 1) % cfg.checkpoint_every == 0 and step + 1 < cfg.vae_steps:
            atomic_save(
                {"model": vae.state_dict(), "opt": opt.state_dict(), "step": step + 1, "losses": losses, "done": False},
                path,
            )
    vae.eval()
    shift, scale = _latent_factors(vae, cfg, data, device)
    vae.register_to_config(shift_factor=shift, scaling_factor=scale)
    atomic_save(
        {
            "model": vae.state_dict(),
            "step": cfg.vae_steps,
            "losses": losses,
            "done": True,
            "shift": shift,
            "scale": scale,
        },
        path,
    )
    log(
        "vae",
        {
            "steps": cfg.vae_steps,
            "images": n,
            "shift_factor": shift,
            "scaling_factor": scale,
            "decoder_only": cfg.vae_decoder_only,
            "final_l1": losses[-1][1] if losses else None,
        },
    )
    return vae


def encode_latents(
    vae: Any, data: dict[str, np.ndarray], work: Path, progress: bool, mirror: bool = True, device: str = "cpu"
) -> dict[str, Any]:
    """Posterior ``mean`` and ``std`` ``(N, c, h, w)`` of every training render and, with
    ``mirror``, of its mirror image (``mean_flip``, ``std_flip``), cached as ``latents.pt``
    (CPU tensors; ``vae`` runs on ``device``)."""
    import torch

    path = work / "latents.pt"
    if path.exists():
        return torch.load(path, weights_only=True)
    x_all = to_tensor(data["images"])
    views = (("", False), ("_flip", True)) if mirror else (("", False),)
    out: dict[str, list] = {f"{key}{suffix}": [] for suffix, _ in views for key in ("mean", "std")}
    with torch.no_grad():
        for i in tqdm(range(0, x_all.shape[0], 256), desc="latents", disable=not progress):
            x = x_all[i : i + 256].to(device)
            for suffix, flipped in views:
                d = vae.encode(x.flip(-1) if flipped else x).latent_dist
                out["mean" + suffix].append(d.mean.cpu())
                out["std" + suffix].append(d.std.cpu())
    lat = {k: torch.cat(v) for k, v in out.items()}
    atomic_save(lat, path)
    return lat
