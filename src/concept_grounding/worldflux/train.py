"""Train a small Flux-architecture text-to-image pipeline on the bird world (resumable).

Five stages, each resumable from ``work_dir`` (a finished stage is skipped on restart): **data**
(renders without held-out SUB combinations, :mod:`.data`), **vae** (an ``AutoencoderKL``, :mod:`.vae`),
**latents**, **flux** (both text encoders and the ``FluxTransformer2DModel`` trained jointly with
FluxPipeline's rectified-flow loss, ``x_t = (1 - t) x_0 + t eps``, target ``eps - x_0``, logit-normal
``t``) and **export** (a float16 ``FluxPipeline`` folder). Batches are drawn from a generator seeded
with ``(seed, step)``, so a resumed run draws the same batches as an uninterrupted one. Each stage
and its measured cost: the world Flux's model card (``assets/world_flux/README.md``, "Training").
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..cpu import set_threads
from .captions import caption_vocabulary, word_tokenizers
from .components import FluxTrainConfig, build_scheduler, build_text_encoders, build_transformer
from .data import batch_captions, render_training_set
from .objective import encode_prompts, flow_matching_loss
from .training_utils import atomic_save, cosine_lr, grow_vocabulary, training_world
from .vae import encode_latents, train_vae

__all__ = ["train_world_flux"]


# ----------------------------------------------------------------------------- Flux
#: Steps whose losses are read back from the device at once (one host-device sync each).
_LOSS_FLUSH = 20
#: A ``minutes`` budget is turned into a step count from the pace of these steps (the first
#: ones, slowed by allocation and kernel selection, are left out).
_CALIBRATION_START, _CALIBRATION_END = 5, 20


def _flush_losses(losses: list, pending: list, step: int) -> None:
    """Append the ``pending`` loss tensors of the steps ending at ``step`` to ``losses`` as
    ``[step, value]`` pairs (one read-back from the device) and empty ``pending``."""
    if not pending:
        return
    import torch

    first = step - len(pending) + 1
    losses.extend([first + i, v] for i, v in enumerate(torch.stack(pending).tolist()))
    pending.clear()


def _load_initial(modules: Any, folder: Path, vocabulary: dict[str, int]) -> None:
    """Load ``folder``'s transformer and text encoders (a ``FluxPipeline`` folder of the same
    sizes) into ``modules`` as the starting point of training. Its word vocabulary may be a
    subset of this run's ``vocabulary`` (e.g. v3's for a run with ``compositions``): the
    text encoders' embeddings then grow (:func:`grow_vocabulary`)."""
    from diffusers import FluxTransformer2DModel
    from transformers import CLIPTextModel, T5EncoderModel

    old_vocab = json.loads((folder / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
    sources = {
        "transformer": (FluxTransformer2DModel, "transformer"),
        "clip": (CLIPTextModel, "text_encoder"),
        "t5": (T5EncoderModel, "text_encoder_2"),
    }
    for key, (cls, sub) in sources.items():
        state = {k: v.float() for k, v in cls.from_pretrained(folder / sub).state_dict().items()}
        if key != "transformer":
            state = grow_vocabulary(state, modules[key].state_dict(), old_vocab, vocabulary)
        try:
            modules[key].load_state_dict(state)
        except RuntimeError:
            raise ValueError(f"--init-from: {folder}/{sub} does not match this run's sizes or vocabulary") from None


def _train_flux(
    cfg: FluxTrainConfig,
    data: dict[str, np.ndarray],
    lat: dict[str, Any],
    vae: Any,
    tokenizers: tuple[Any, Any],
    work: Path,
    progress: bool,
    log: Callable,
    device: str = "cpu",
) -> tuple[Any, Any, Any, dict]:
    """Train (or resume) the text encoders and transformer on ``device``; return them (EMA
    weights, on ``device``) and the run's state (``step``, ``losses``, ``seconds``, ...).

    Indices, flips and timesteps are drawn on the CPU from ``(seed, step)``, the latent
    samples and noise on ``device`` (one generator on the CPU: the draws of earlier runs).
    Losses are read back every :data:`_LOSS_FLUSH` steps, so a GPU never waits for the host.
    """
    import torch
    from diffusers import FluxPipeline

    world = training_world(cfg)
    path = work / "flux.pt"
    torch.manual_seed(cfg.world.seed + 1)
    clip, t5 = build_text_encoders(cfg, len(tokenizers[0]))
    torch.manual_seed(cfg.world.seed + 2)
    transformer = build_transformer(cfg)
    modules = torch.nn.ModuleDict({"transformer": transformer, "clip": clip, "t5": t5})
    if cfg.init_from:
        _load_initial(modules, Path(cfg.init_from), tokenizers[0].get_vocab())
    modules.to(device)
    if cfg.steps == 0:  # keep init_from's transformer and text encoders (e.g. after a decoder-only VAE fit)
        return transformer, clip, t5, {"step": 0, "losses": [], "total": 0, "seconds": 0.0, "done": True}
    ema = {k: v.detach().clone() for k, v in modules.state_dict().items()}
    opt = torch.optim.AdamW(
        modules.parameters(), lr=cfg.lr, weight_decay=0.01, fused=torch.device(device).type == "cuda" or None
    )
    state: dict[str, Any] = {"step": 0, "losses": [], "total": cfg.steps, "seconds": 0.0}
    if path.exists():
        ck = torch.load(path, map_location=device, weights_only=True)
        modules.load_state_dict(ck["model"])
        ema = ck["ema"]
        opt.load_state_dict(ck["opt"])
        state = ck["state"]
        if state.get("done"):
            modules.load_state_dict(ema)
            return transformer, clip, t5, state
    shift, scale = float(vae.config.shift_factor), float(vae.config.scaling_factor)
    lat = {k: v.to(device) for k, v in lat.items()}
    n = lat["mean"].shape[0]
    h = lat["mean"].shape[-1]
    img_ids = FluxPipeline._prepare_latent_image_ids(1, h // 2, h // 2, device, torch.float32)
    txt_ids = torch.zeros(cfg.max_length, 3, device=device)
    floats = [k for k, v in modules.state_dict().items() if v.dtype.is_floating_point]
    others = [k for k, v in modules.state_dict().items() if not v.dtype.is_floating_point]
    pending: list[Any] = []
    t_calibration: float | None = None
    composed = data.get("composed")  # composition renders: captions name count, relation and action
    # a canonical world faces right: only its composition renders may be mirrored
    mirrorable = torch.from_numpy(composed) if composed is not None and cfg.world.pose == "canonical" else None
    modules.train()
    step = state["step"]
    t_start = time.perf_counter() - state["seconds"]
    bar = tqdm(desc="flux", disable=not progress, initial=step, total=state["total"])
    while state["total"] is None or step < state["total"]:
        g = torch.Generator().manual_seed(cfg.world.seed * 1_000_003 + 7 + step)
        g_dev = (
            g
            if torch.device(device).type == "cpu"
            else torch.Generator(device).manual_seed(cfg.world.seed * 1_000_003 + 7 + step)
        )
        rng = np.random.default_rng([cfg.world.seed, 7, step])
        idx = torch.randint(n, (cfg.batch,), generator=g)
        flip = ((torch.rand(cfg.batch, generator=g) < 0.5) & cfg.mirror_augment)[:, None, None, None]
        if mirrorable is not None:
            flip = flip & mirrorable[idx][:, None, None, None]
        idx_dev, flip = idx.to(device), flip.to(device)
        mean, std = lat["mean"][idx_dev], lat["std"][idx_dev]
        if cfg.mirror_augment:
            mean = torch.where(flip, lat["mean_flip"][idx_dev], mean)
            std = torch.where(flip, lat["std_flip"][idx_dev], std)
        z = mean + std * torch.randn(mean.shape, generator=g_dev, device=device)
        x0 = (z - shift) * scale
        noise = torch.randn(x0.shape, generator=g_dev, device=device)
        t = torch.sigmoid(torch.randn(cfg.batch, generator=g)).to(device)
        prompts = batch_captions(data, idx.tolist(), flip.flatten().tolist(), world, rng, cfg)
        total_for_lr = state["total"] if state["total"] is not None else 10**9
        for group in opt.param_groups:
            group["lr"] = cosine_lr(step, total_for_lr, cfg.lr, cfg.warmup)
        states, pooled = encode_prompts(tokenizers, (clip, t5), prompts, cfg.max_length)
        loss = flow_matching_loss(transformer, x0, noise, t, states, pooled, img_ids, txt_ids)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(modules.parameters(), 1.0)
        opt.step()
        decay = min(cfg.ema, (1 + step) / (10 + step))
        with torch.no_grad():
            current = modules.state_dict()
            ema_floats = [ema[k] for k in floats]
            torch._foreach_mul_(ema_floats, decay)
            torch._foreach_add_(ema_floats, [current[k].detach() for k in floats], alpha=1 - decay)
            for k in others:
                ema[k].copy_(current[k])
        step += 1
        pending.append(loss.detach())
        bar.update(1)
        if len(pending) == _LOSS_FLUSH or step == state["total"] or step % cfg.checkpoint_every == 0:
            _flush_losses(state["losses"], pending, step)
            bar.set_postfix(loss=f"{state['losses'][-1][1]:.3f}")
        state["seconds"] = time.perf_counter() - t_start
        if step == _CALIBRATION_START:
            t_calibration = time.perf_counter()
        if state["total"] is None and step == _CALIBRATION_END:
            per_step = (
                (time.perf_counter() - t_calibration) / (_CALIBRATION_END - _CALIBRATION_START)
                if t_calibration is not None
                else state["seconds"] / step
            )
            state["total"] = max(step + 1, int((cfg.minutes * 60 - state["seconds"]) / per_step) + step)
            bar.total = state["total"]
            log("calibration", {"seconds_per_step": per_step, "steps": state["total"]})
        state["step"] = step
        if step % cfg.checkpoint_every == 0 and step < (state["total"] or 0):
            atomic_save({"model": modules.state_dict(), "ema": ema, "opt": opt.state_dict(), "state": state}, path)
    bar.close()
    _flush_losses(state["losses"], pending, step)
    state["done"] = True
    atomic_save({"model": modules.state_dict(), "ema": ema, "opt": opt.state_dict(), "state": state}, path)
    modules.load_state_dict(ema)
    return transformer, clip, t5, state


# ----------------------------------------------------------------------------- export
def _plot_losses(losses: list, vae_losses: list, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    if losses:
        a = np.asarray(losses, float)
        k = max(1, len(a) // 100)
        smooth = np.convolve(a[:, 1], np.ones(k) / k, mode="valid")
        axes[0].plot(a[:, 0], a[:, 1], alpha=0.25, lw=0.5)
        axes[0].plot(a[k - 1 :, 0], smooth, lw=1.5)
    else:
        axes[0].text(
            0.5,
            0.5,
            "no transformer steps\n(kept from --init-from)",
            ha="center",
            va="center",
            transform=axes[0].transAxes,
        )
    axes[0].set(title="Flux rectified-flow loss", xlabel="step", ylabel="MSE", yscale="log" if losses else "linear")
    if vae_losses:
        v = np.asarray(vae_losses, float)
        axes[1].plot(v[:, 0], v[:, 1], label="L1")
        axes[1].plot(v[:, 0], v[:, 2], label="MSE")
        axes[1].legend()
    axes[1].set(title="VAE reconstruction", xlabel="step", yscale="log")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def export_pipeline(components: dict[str, Any], out_dir: Path) -> int:
    """Save a float16 ``FluxPipeline`` folder; return its size on disk in bytes."""
    import torch
    from diffusers import FluxPipeline

    pipe = FluxPipeline(**components)
    pipe.to(torch.float16)
    out_dir.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(out_dir, safe_serialization=True)
    return sum(p.stat().st_size for p in out_dir.rglob("*") if p.is_file())


def _sample_sheet(out_dir: Path, world: Any, path: Path, seed: int) -> None:
    import torch
    from diffusers import FluxPipeline
    from PIL import Image

    from .loader import load_world_flux, world_flux_call_kwargs

    pipe = load_world_flux(out_dir, pipeline_cls=FluxPipeline)
    names = [c.split(".", 1)[-1].replace("_", " ") for c in world.class_names][:12]
    prompts = [f"a photo of a {n}" for n in names]
    g = [torch.Generator().manual_seed(seed + i) for i in range(len(prompts))]
    ims = pipe(prompts, negative_prompt=[""] * len(prompts), generator=g, **world_flux_call_kwargs(pipe)).images
    s = world.config.image_size
    sheet = Image.new("RGB", (s * len(ims), s))
    for i, im in enumerate(ims):
        sheet.paste(im, (i * s, 0))
    sheet.resize((sheet.width * 3, sheet.height * 3), Image.NEAREST).save(path)


# ----------------------------------------------------------------------------- entry
#: Settings a resumed run may change: the wall-time budget (used only until the step count
#: is calibrated and stored in the checkpoint), the checkpoint interval and the VAE step
#: count (the cosine schedule continues on the new length from the checkpointed step; to
#: shorten a run on a machine slower than planned).
_RESUME_FREE = ("minutes", "checkpoint_every", "vae_steps")


def train_world_flux(
    cfg: FluxTrainConfig,
    out_dir: str | Path,
    work_dir: str | Path,
    progress: bool = True,
    threads: int | None = None,
    device: str = "cpu",
    workers: int = 1,
) -> dict[str, Any]:
    """Run every stage (see module docstring); return the training log dict.

    ``out_dir`` receives the pipeline folder, ``loss_curve.png``, ``samples.png`` and
    ``train_log.json``; ``work_dir`` the resumable stage files. The VAE, the latents and the
    transformer are fitted on ``device`` (e.g. ``"cuda"``); the export runs on the CPU.
    """
    import torch

    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device: {device} asked for but torch sees no CUDA device")
    if torch.device(device).type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # TF32 matrix products (the model is small; fp32 storage)
        torch.backends.cudnn.allow_tf32 = True

    if threads:
        set_threads(threads)
    out, work = Path(out_dir), Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    cfg_path = work / "config.json"
    if cfg_path.exists():
        old = FluxTrainConfig.from_dict(json.loads(cfg_path.read_text())).to_dict()
        new = cfg.to_dict()
        for free in _RESUME_FREE:  # may change between a run and its resumption
            old.pop(free), new.pop(free)
        if old != new:
            raise ValueError(
                f"work_dir: {work} holds a run with another config; use a fresh --work-dir or the same settings"
            )
    else:
        cfg_path.write_text(json.dumps(cfg.to_dict(), indent=1))
    log_path = work / "log.json"
    record: dict[str, Any] = json.loads(log_path.read_text()) if log_path.exists() else {"stages": {}}

    def log(stage: str, info: dict) -> None:
        record["stages"][stage] = info
        log_path.write_text(json.dumps(record, indent=1))

    t0 = time.perf_counter()
    data_path = work / "data.npz"
    if data_path.exists():
        with np.load(data_path) as z:
            data = {k: z[k] for k in z.files}
    else:
        data = render_training_set(cfg, progress, workers)
        np.savez_compressed(data_path, **data)
        log("data", {"images": len(data["labels"]), "seconds": time.perf_counter() - t0})
    t1 = time.perf_counter()
    vae = train_vae(cfg, data, work, progress, log, device=device, workers=workers)
    vae.eval()
    lat = (
        encode_latents(vae, data, work, progress, mirror=cfg.mirror_augment, device=device) if cfg.steps != 0 else None
    )
    t2 = time.perf_counter()
    world = training_world(cfg)
    tokenizers = word_tokenizers(caption_vocabulary(world, cfg.compositions > 0), cfg.max_length)
    transformer, clip, t5, state = _train_flux(cfg, data, lat, vae, tokenizers, work, progress, log, device=device)
    t3 = time.perf_counter()
    for m in (transformer, clip, t5, vae):
        m.eval().to("cpu")
    size = export_pipeline(
        {
            "scheduler": build_scheduler(),
            "vae": vae,
            "text_encoder": clip,
            "tokenizer": tokenizers[0],
            "text_encoder_2": t5,
            "tokenizer_2": tokenizers[1],
            "transformer": transformer,
        },
        out,
    )
    vae_state = torch.load(work / "vae.pt", weights_only=True) if (work / "vae.pt").exists() else {}  # none: VAE kept
    _plot_losses(state["losses"], vae_state.get("losses", []), out / "loss_curve.png")
    _sample_sheet(out, world, out / "samples.png", cfg.world.seed)
    params = {
        "transformer": sum(p.numel() for p in transformer.parameters()),
        "vae": sum(p.numel() for p in vae.parameters()),
        "text_encoder": sum(p.numel() for p in clip.parameters()),
        "text_encoder_2": sum(p.numel() for p in t5.parameters()),
    }
    record.update(
        config=cfg.to_dict(),
        parameters=params,
        bytes_on_disk=size,
        flux_steps=state["step"],
        flux_seconds=state["seconds"],
        final_loss_mean_last_100=float(np.mean([l for _, l in state["losses"][-100:]])) if state["losses"] else None,
        vocabulary_size=len(tokenizers[0]),
        session_seconds={
            "data": t1 - t0,
            "vae_and_latents": t2 - t1,
            "flux": t3 - t2,
            "export": time.perf_counter() - t3,
        },
        torch_threads=torch.get_num_threads(),
        device=torch.cuda.get_device_name(device) if torch.device(device).type == "cuda" else "cpu",
    )
    log_path.write_text(json.dumps(record, indent=1))
    slim = dict(record.items())
    (out / "train_log.json").write_text(json.dumps(slim, indent=1))
    (out / "loss_history.json").write_text(
        json.dumps(
            {
                "flux": state["losses"][:: max(1, len(state["losses"]) // 500)],
                "vae": vae_state.get("losses", [])[:: max(1, len(vae_state.get("losses", [])) // 200)],
            }
        )
    )
    return record
