"""What a learner trains on: the concept's images, the class (prior-preservation) images and their latents.

Class images are the user's own (``class_data_dir``) and, up to ``num_prior``, images the base
model draws from ``class_prompt`` (DreamBooth's prior preservation, Ruiz et al., Sec. 3.3);
latents are the VAE's posterior mean and std (docs/guide/learners.md).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import LearnConfig, image_files

__all__ = ["Latents", "MAX_SEQUENCE_LENGTH", "load_images", "draw_images", "class_images", "encode_images"]

#: largest T5 prompt length trained (FluxPipeline's default ``max_sequence_length``).
MAX_SEQUENCE_LENGTH = 512


@dataclass
class Latents:
    """Posterior ``mean`` and ``std`` ``(N, C, h, w)`` of N images (``std`` 0: exact latents)."""

    mean: Any
    std: Any


def load_images(folder: str | Path) -> np.ndarray:
    """(N, H, W, 3) uint8 of ``folder``'s images (sorted by name; RGB)."""
    from PIL import Image

    return np.stack([np.asarray(Image.open(f).convert("RGB")) for f in image_files(folder)])


def _drawn_path(cfg: LearnConfig, side: tuple[int, int], count: int, work: Path) -> Path:
    """Where the ``count`` drawn class images live: the run's own ``work``, or the shared ``prior_cache``
    under a name made of everything the images depend on."""
    if not cfg.prior_cache:
        return work / "prior_images.npy"
    key = json.dumps(
        [
            str(Path(str(cfg.model)).resolve()) if cfg.model != "world" else "world",
            cfg.class_prompt,
            count,
            cfg.prior_steps,
            cfg.seed,
            list(side),
            cfg.batch,
            cfg.dtype,
        ]
    )
    return Path(cfg.prior_cache) / f"prior-{hashlib.sha256(key.encode()).hexdigest()[:16]}.npy"


def draw_images(
    pipe: Any, prompt: str, seeds: Sequence[int], side: tuple[int, int], steps: int, batch: int
) -> np.ndarray:
    """(N, H, W, 3) uint8 images ``pipe`` draws from ``prompt``, image ``i`` from noise seeded by ``seeds[i]``
    (CPU generators of its own: no global random state is used), ``batch`` at a time."""
    import torch

    from ..worldflux.loader import WORLD_TRUE_CFG

    kwargs: dict[str, Any] = {
        "height": side[0],
        "width": side[1],
        "num_inference_steps": steps,
        "max_sequence_length": min(int(pipe.tokenizer_2.model_max_length), MAX_SEQUENCE_LENGTH),
        "output_type": "np",
    }
    if pipe.transformer.config.guidance_embeds:
        kwargs["guidance_scale"] = 3.5
    else:  # an undistilled Flux (the world's) samples with true CFG against the empty prompt
        kwargs.update(true_cfg_scale=WORLD_TRUE_CFG, negative_prompt="")
    out = []
    with torch.no_grad():
        for i in range(0, len(seeds), batch):
            gens = [torch.Generator().manual_seed(s) for s in seeds[i : i + batch]]
            ims = pipe([prompt] * len(gens), generator=gens, **kwargs).images
            out.append((np.clip(ims, 0, 1) * 255).round().astype(np.uint8))
    return np.concatenate(out)


def _draw_class_images(pipe: Any, cfg: LearnConfig, side: tuple[int, int], count: int) -> np.ndarray:
    """``count`` images the base pipeline draws from ``class_prompt`` (image ``i``: noise seeded by ``(seed, i)``)."""
    seeds = [cfg.seed * 100_003 + i for i in range(count)]
    return draw_images(pipe, cfg.class_prompt, seeds, side, cfg.prior_steps, cfg.batch)


def class_images(pipe: Any, cfg: LearnConfig, side: tuple[int, int], work: Path) -> np.ndarray:
    """(N, H, W, 3) uint8 class images: ``class_data_dir``'s, then drawn ones up to ``num_prior`` (cached)."""
    own = load_images(cfg.class_data_dir) if cfg.class_data_dir else np.zeros((0, *side, 3), np.uint8)
    count = cfg.num_prior - len(own)
    if count <= 0:
        return own
    path = _drawn_path(cfg, side, count, work)
    if path.exists():
        return np.concatenate([own, np.load(path)])
    drawn = _draw_class_images(pipe, cfg, side, count)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # atomic: runs in other processes may share it
    with open(tmp, "wb") as f:
        np.save(f, drawn)
    os.replace(tmp, path)
    return np.concatenate([own, drawn])


def encode_images(pipe: Any, images: np.ndarray, work: Path, device: str, progress: bool) -> Latents:
    """Posterior latents of ``images`` by the pipeline's VAE (float32 while encoding; cached in ``work``)."""
    import torch

    from ..worldflux.vae import encode_latents

    work.mkdir(parents=True, exist_ok=True)
    vae = pipe.vae
    dtype = vae.dtype
    vae.to(torch.float32)
    lat = encode_latents(vae, {"images": images}, work, progress, mirror=False, device=device)
    vae.to(dtype)
    tdtype = pipe.transformer.dtype
    return Latents(lat["mean"].to(device, tdtype), lat["std"].to(device, tdtype))
