"""Train one concept learner on a Flux pipeline (resumable), and many across processes.

The objective is the world Flux's rectified-flow loss
(:func:`~concept_grounding.worldflux.train.flow_matching_loss`, FluxPipeline's convention
``x_t = (1 - t) x_0 + t eps``, target ``eps - x_0``, ``t = sigmoid(N(0, 1))``) on the concept's
images captioned ``instance_prompt``; DreamBooth and Custom Diffusion add ``prior_weight``
times the same loss on prior images the base model drew from ``class_prompt`` (ConceptBed
App. D's L_DB). Prompts are encoded by
:func:`~concept_grounding.worldflux.train.encode_prompts` (FluxPipeline's encoding) and image
latents by :func:`~concept_grounding.worldflux.vae.encode_latents` (posterior mean and std;
a fresh sample each step).

Step ``s`` draws its images, latent samples, noise and timesteps from a CPU generator seeded
with ``(seed, s)``, so a run resumed from a checkpoint (parameters, AdamW state, losses)
continues exactly as an uninterrupted one. ``out`` holds ``config.json`` and, while running,
``.work/`` (latents, prior images, ``checkpoint.pt``); when done the learner's files and
``learned.json`` (:mod:`.methods`), and ``.work/`` is removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..cpu import limited_threads
from ..errors import UsageError, named
from .config import LearnConfig, image_files, model_folder
from .methods import add_placeholder, save_learned, trainable_parameters

__all__ = [
    "Latents",
    "PreparedLearner",
    "prepare_learner",
    "flow_loss",
    "training_step",
    "learn",
    "fit",
    "learn_many",
    "load_images",
]

#: largest T5 prompt length trained (FluxPipeline's default ``max_sequence_length``).
MAX_SEQUENCE_LENGTH = 512


@dataclass
class Latents:
    """Posterior ``mean`` and ``std`` ``(N, C, h, w)`` of N images (``std`` 0: exact latents)."""

    mean: Any
    std: Any


@dataclass
class PreparedLearner:
    """One method set up on one pipeline (:func:`prepare_learner`), ready for :func:`training_step`.

    Attributes:
        rows: encoder name -> V*'s row (a parameter when trained).
        params: name -> every trained parameter (checkpoint keys).
        embeds: prompt -> (T5 states, pooled) of a frozen-text method (``None``: encode every step).
    """

    pipe: Any
    config: LearnConfig
    rows: dict[str, Any]
    params: dict[str, Any]
    optimizer: Any
    embeds: dict[str, tuple[Any, Any]] | None
    max_length: int


def _encode(learner: PreparedLearner, prompt: str, batch: int) -> tuple[Any, Any]:
    """(T5 states (B, L, D), pooled (B, D)) of ``prompt`` repeated ``batch`` times."""
    from ..worldflux.train import encode_prompts

    if learner.embeds is not None:
        states, pooled = learner.embeds[prompt]
        return states.expand(batch, -1, -1), pooled.expand(batch, -1)
    pipe = learner.pipe
    return encode_prompts(
        (pipe.tokenizer, pipe.tokenizer_2),
        (pipe.text_encoder, pipe.text_encoder_2),
        [prompt] * batch,
        learner.max_length,
    )


def prepare_learner(pipe: Any, config: LearnConfig) -> PreparedLearner:
    """Add V* to ``pipe``, freeze it, unfreeze / add what ``config.method`` trains, make AdamW.

    ``pipe`` is changed in place (tokens, hooks, adapters); its device and dtype are kept.
    """
    import torch

    method = config.method
    trains_row = method in ("textual_inversion", "custom_diffusion")
    rows = add_placeholder(pipe, config.token, config.init_word if trains_row else None, trains_row, config.seed)
    params = trainable_parameters(pipe, method, rows, config.rank, config.seed)
    if config.gradient_checkpointing:
        pipe.transformer.enable_gradient_checkpointing()
    max_length = min(int(pipe.tokenizer_2.model_max_length), MAX_SEQUENCE_LENGTH)
    on_cuda = next(iter(params.values())).device.type == "cuda"
    # fused on CUDA: no full-size temporaries (a full fine-tune of a 12 B transformer fits 141 GB)
    optimizer = torch.optim.AdamW(params.values(), lr=config.resolved_lr(), weight_decay=1e-2, fused=on_cuda or None)
    learner = PreparedLearner(pipe, config, rows, params, optimizer, None, max_length)
    if not trains_row:
        with torch.no_grad():
            learner.embeds = {p: _encode(learner, p, 1) for p in (config.prompt(), config.class_prompt)}
    return learner


def _draw(latents: Latents, batch: int, g: Any, shift: float, scale: float) -> tuple[Any, Any, Any]:
    """(x0, noise, t) of ``batch`` images of ``latents`` drawn with the CPU generator ``g``."""
    import torch

    n = latents.mean.shape[0]
    idx = torch.randint(n, (batch,), generator=g)
    mean, std = latents.mean[idx.to(latents.mean.device)], latents.std[idx.to(latents.std.device)]
    eps = torch.randn(mean.shape, generator=g).to(mean.device, mean.dtype)
    x0 = (mean + std * eps - shift) * scale
    noise = torch.randn(mean.shape, generator=g).to(mean.device, mean.dtype)
    t = torch.sigmoid(torch.randn(batch, generator=g)).to(mean.device, mean.dtype)
    return x0, noise, t


def flow_loss(learner: PreparedLearner, latents: Latents, prompt: str, g: Any) -> Any:
    """The rectified-flow loss of ``config.batch`` images of ``latents`` captioned ``prompt``,
    drawn with the CPU generator ``g`` (a scalar tensor)."""
    import torch
    from diffusers import FluxPipeline

    from ..worldflux.train import flow_matching_loss

    pipe, cfg = learner.pipe, learner.config
    vae_cfg = pipe.vae.config if pipe.vae is not None else None
    shift = float(vae_cfg.shift_factor or 0.0) if vae_cfg is not None else 0.0
    scale = float(vae_cfg.scaling_factor) if vae_cfg is not None else 1.0
    x0, noise, t = _draw(latents, cfg.batch, g, shift, scale)
    b, _, h, w = x0.shape
    img_ids = FluxPipeline._prepare_latent_image_ids(1, h // 2, w // 2, x0.device, x0.dtype)
    states, pooled = _encode(learner, prompt, b)
    txt_ids = torch.zeros(states.shape[1], 3, device=x0.device, dtype=x0.dtype)
    guidance = (
        torch.full((b,), cfg.guidance, device=x0.device, dtype=torch.float32)
        if pipe.transformer.config.guidance_embeds
        else None
    )
    return flow_matching_loss(pipe.transformer, x0, noise, t, states, pooled, img_ids, txt_ids, guidance)


def training_step(learner: PreparedLearner, step: int, instance: Latents, prior: Latents | None = None) -> Any:
    """One AdamW step (gradient norm clipped to 1); returns the detached loss.

    Draws follow ``(config.seed, step)`` only, so step ``s`` is the same in any run.
    """
    import torch

    cfg = learner.config
    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + 7 + step)
    loss = flow_loss(learner, instance, cfg.prompt(), g)
    if prior is not None:
        loss = loss + cfg.prior_weight * flow_loss(learner, prior, cfg.class_prompt, g)
    learner.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(learner.params.values()), 1.0)
    learner.optimizer.step()
    return loss.detach()


# ----------------------------------------------------------------------------- data
def load_images(folder: str | Path) -> np.ndarray:
    """(N, H, W, 3) uint8 of ``folder``'s images (sorted by name; RGB)."""
    from PIL import Image

    return np.stack([np.asarray(Image.open(f).convert("RGB")) for f in image_files(folder)])


def _prior_images(pipe: Any, cfg: LearnConfig, side: tuple[int, int], work: Path) -> np.ndarray:
    """``num_prior`` images the base pipeline draws from ``class_prompt`` (cached in ``work``)."""
    import torch

    from ..worldflux.loader import WORLD_TRUE_CFG

    path = work / "prior_images.npy"
    if cfg.prior_cache:  # shared by every concept of a run: what the images depend on names the file
        key = json.dumps(
            [
                str(Path(str(cfg.model)).resolve()) if cfg.model != "world" else "world",
                cfg.class_prompt,
                cfg.num_prior,
                cfg.prior_steps,
                cfg.seed,
                list(side),
                cfg.batch,
                cfg.dtype,
            ]
        )
        path = Path(cfg.prior_cache) / f"prior-{hashlib.sha256(key.encode()).hexdigest()[:16]}.npy"
    if path.exists():
        return np.load(path)
    kwargs: dict[str, Any] = {
        "height": side[0],
        "width": side[1],
        "num_inference_steps": cfg.prior_steps,
        "max_sequence_length": min(int(pipe.tokenizer_2.model_max_length), MAX_SEQUENCE_LENGTH),
        "output_type": "np",
    }
    if pipe.transformer.config.guidance_embeds:
        kwargs["guidance_scale"] = 3.5
    else:  # an undistilled Flux (the world's) samples with true CFG against the empty prompt
        kwargs.update(true_cfg_scale=WORLD_TRUE_CFG, negative_prompt="")
    out = []
    with torch.no_grad():
        for i in range(0, cfg.num_prior, cfg.batch):
            n = min(cfg.batch, cfg.num_prior - i)
            gens = [torch.Generator().manual_seed(cfg.seed * 100_003 + i + k) for k in range(n)]
            ims = pipe([cfg.class_prompt] * n, generator=gens, **kwargs).images
            out.append((np.clip(ims, 0, 1) * 255).round().astype(np.uint8))
    arr = np.concatenate(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # atomic: runs in other processes may share it
    with open(tmp, "wb") as f:
        np.save(f, arr)
    os.replace(tmp, path)
    return arr


def _latents(pipe: Any, images: np.ndarray, work: Path, device: str, progress: bool) -> Latents:
    """Posterior latents of ``images`` by the pipeline's VAE (float32 while encoding; cached)."""
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


# ----------------------------------------------------------------------------- the job
#: settings a resumed run may change (where it runs, how often it checkpoints)
_RESUME_FREE = ("device", "checkpoint_every", "threads", "prior_cache")


def _check_out(config: LearnConfig, out: Path) -> None:
    """Record the config in ``out`` or refuse one that holds another run's."""
    path = out / "config.json"
    text = config.to_json()

    def settled(settings: dict) -> dict:
        """The settings a resumed run must keep."""
        return {k: v for k, v in settings.items() if k not in _RESUME_FREE}

    if path.exists() and settled(json.loads(path.read_text())) != settled(json.loads(text)):
        raise UsageError(
            "holds a learner run with another config; use a fresh folder or the same settings", argument=named("out")
        )
    out.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(text)


def learn(config: LearnConfig, out: str | Path) -> Path:
    """Learn the concept of ``config.images`` with ``config.method``; save it in ``out``.

    Resumable: rerun with the same config and ``out`` to continue from the last checkpoint (a
    finished ``out`` is returned at once). Returns ``out``, loadable by
    :func:`~concept_grounding.learners.load_learned`.

    Raises:
        UsageError: bad input (:meth:`LearnConfig.check`), or ``out`` holding another run.
    """
    config.check()
    out = Path(out)
    _check_out(config, out)
    if (out / "learned.json").is_file():
        return out
    with limited_threads(config.threads):
        fit(config, out)
    return out


def fit(config: LearnConfig, out: str | Path) -> PreparedLearner:
    """:func:`learn`'s work on an unfinished ``out``: train (resuming from ``out``'s checkpoint),
    save, and return the trained :class:`PreparedLearner` (its pipeline in memory, V* hooked in)."""
    import torch
    from diffusers import FluxPipeline
    from tqdm.auto import tqdm

    from ..tdg.loading import load_flux_pipeline
    from ..worldflux.training_utils import atomic_save

    out = Path(out)
    _check_out(config, out)
    if torch.device(config.device).type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"{config.device} asked for but torch sees no CUDA device", argument=named("device"))
    work = out / ".work"
    work.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    pipe = load_flux_pipeline(model_folder(config.model), config.dtype, FluxPipeline).to(config.device)
    images = load_images(config.images)
    prior = None
    if config.uses_prior():
        prior_images = _prior_images(pipe, config, images.shape[1:3], work)
        prior = _latents(pipe, prior_images, work / "prior", config.device, config.progress)
    instance = _latents(pipe, images, work / "instance", config.device, config.progress)
    learner = prepare_learner(pipe, config)
    total = config.resolved_steps()
    state: dict[str, Any] = {"step": 0, "losses": [], "seconds": 0.0}
    ckpt = work / "checkpoint.pt"
    if ckpt.exists():
        saved = torch.load(ckpt, map_location=config.device, weights_only=True)
        with torch.no_grad():
            for name, p in learner.params.items():
                p.copy_(saved["params"][name])
        learner.optimizer.load_state_dict(saved["opt"])
        state = saved["state"]
    start = time.perf_counter() - state["seconds"]
    bar = tqdm(
        desc=f"{config.method} {Path(config.images).name}",
        total=total,
        initial=state["step"],
        disable=not config.progress,
    )
    for step in range(state["step"], total):
        loss = training_step(learner, step, instance, prior)
        state["losses"].append(float(loss))
        state["step"], state["seconds"] = step + 1, time.perf_counter() - start
        bar.update(1)
        bar.set_postfix(loss=f"{state['losses'][-1]:.4f}")
        if state["step"] % config.checkpoint_every == 0 and state["step"] < total:
            atomic_save(
                {
                    "params": {k: v.detach() for k, v in learner.params.items()},
                    "opt": learner.optimizer.state_dict(),
                    "state": state,
                },
                ckpt,
            )
    bar.close()
    files = save_learned(pipe, config.method, config.token, learner.rows, learner.params, out)
    manifest = {
        "method": config.method,
        "token": config.token,
        "files": files,
        "steps": state["step"],
        "losses": state["losses"],
        "seconds_training": state["seconds"],
        "seconds_total": time.perf_counter() - t0,
        "trained_parameters": int(sum(p.numel() for p in learner.params.values())),
        "config": json.loads(config.to_json()),
    }
    (out / "learned.json").write_text(json.dumps(manifest, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return learner


def learn_many(configs: Sequence[LearnConfig], outs: Sequence[str | Path]) -> list[Path]:
    """:func:`learn` every ``(config, out)``; under ``accelerate launch`` / ``torchrun`` process
    ``i`` of ``n`` learns the pairs ``k`` with ``k % n == i`` (accelerate's ``PartialState``),
    then waits for the others. Every config is checked first. Returns every ``out``."""
    from dataclasses import replace

    import torch
    from accelerate import PartialState

    if len(configs) != len(outs):
        raise ValueError(f"learn_many: {len(configs)} configs for {len(outs)} output folders")
    for config in configs:
        config.check()
    state = PartialState(cpu=not torch.cuda.is_available())
    for k, (config, out) in enumerate(zip(configs, outs)):
        if k % state.num_processes == state.process_index:
            device = f"cuda:{state.local_process_index}" if config.device == "cuda" else config.device
            learn(replace(config, device=device, progress=config.progress and state.is_local_main_process), out)
    state.wait_for_everyone()
    return [Path(o) for o in outs]
