"""Train one concept learner on a Flux pipeline with ``accelerate`` (resumable), and many across processes.

The objective is rectified flow in FluxPipeline's convention (``x_t = (1 - t) x_0 + t eps``, target
``eps - x_0``; Esser et al., Eq. 2 and Sec. 3.1) with ``t`` from
``diffusers.training_utils.compute_density_for_timestep_sampling`` (default logit-normal:
``t = sigmoid(N(0, 1))``), prompts through ``pipe.encode_prompt``. DreamBooth and Custom Diffusion
add ``prior_weight`` times the loss on class images (ConceptBed App. D's L_DB): instance and class
images go through ONE forward and the loss is split by chunk. The loop is diffusers' scripts' on an
``accelerate.Accelerator``: bf16 autocast with float32 master weights, gradient accumulation,
``diffusers.optimization.get_scheduler``, ``save_state`` / ``load_state`` checkpoints.

Micro-step ``k`` draws its images, latent samples, noise and timesteps from a CPU generator seeded
with ``(seed, k)``, so a resumed run continues exactly as an uninterrupted one
(docs/guide/learners.md).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cpu import limited_threads
from ..errors import UsageError, named
from .checkpoint import CHECKPOINT, check_out, save_checkpoint
from .config import LearnConfig, check_images, model_folder
from .data import MAX_SEQUENCE_LENGTH, Latents, class_images, encode_images, load_images
from .methods import LearnerMethod
from .placeholder import Placeholder, add_placeholder
from .validation import save_validation_images, validation_due

__all__ = [
    "Latents",
    "Trainer",
    "prepare_trainer",
    "chunk_losses",
    "flow_loss",
    "training_step",
    "learn",
    "fit",
    "learn_many",
    "load_images",
]

#: timestep density parameters of diffusers' Flux scripts (``--logit_mean``, ``--logit_std``, ``--mode_scale``).
LOGIT_MEAN, LOGIT_STD, MODE_SCALE = 0.0, 1.0, 1.29


@dataclass
class _Progress:
    """The loop's own state, checkpointed with ``accelerator.register_for_checkpointing``."""

    params: dict[str, Any]
    step: int = 0
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def state_dict(self) -> dict[str, Any]:
        return {
            "params": {k: v.detach() for k, v in self.params.items()},
            "step": self.step,
            "losses": list(self.losses),
            "seconds": self.seconds,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        import torch

        with torch.no_grad():
            for name, p in self.params.items():
                p.copy_(state["params"][name])
        self.step, self.losses, self.seconds = int(state["step"]), list(state["losses"]), float(state["seconds"])


@dataclass
class Trainer:
    """One method set up on one pipeline (:func:`prepare_trainer`), ready for :func:`training_step`.

    Attributes:
        method: the learner (:mod:`.methods`); placeholder: V* and its hooks (closed by :meth:`close`).
        params: name -> every trained parameter (float32; checkpointed).
        optimizer, scheduler: ``accelerator``'s AdamW and diffusers' learning-rate schedule.
        embeds: prompt -> (T5 states, pooled) of a frozen-text method (``None``: encode every step).
    """

    pipe: Any
    config: LearnConfig
    method: LearnerMethod
    placeholder: Placeholder
    params: dict[str, Any]
    accelerator: Any
    optimizer: Any
    scheduler: Any
    progress: _Progress
    embeds: dict[str, tuple[Any, Any]] | None = None
    max_length: int = MAX_SEQUENCE_LENGTH

    @property
    def rows(self) -> dict[str, Any]:
        """Encoder attribute -> V*'s row."""
        return self.placeholder.rows

    def close(self) -> None:
        """Write V*'s rows into the embedding tables and remove the hooks."""
        self.placeholder.close()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_accelerator(config: LearnConfig, work: Path | None = None) -> Any:
    """The run's ``Accelerator``: bf16 autocast for a bfloat16 pipeline, ``gradient_accumulation`` micro-steps.

    Raises:
        UsageError: this process already runs accelerate with another precision.
    """
    from accelerate import Accelerator

    mixed = "bf16" if config.dtype == "bfloat16" else "no"
    try:  # the pipeline stays on config.device: accelerate places nothing
        return Accelerator(
            mixed_precision=mixed,
            gradient_accumulation_steps=config.gradient_accumulation,
            device_placement=False,
            project_dir=str(work) if work is not None else None,
        )
    except ValueError:
        raise UsageError(
            "this process already runs accelerate with another precision; learn each --dtype in its own process",
            argument=named("dtype"),
        ) from None


def _encode(trainer: Trainer, prompts: Sequence[str], batch: int) -> tuple[Any, Any]:
    """(T5 states (P*B, L, D), pooled (P*B, D)) of each prompt repeated ``batch`` times, by ``pipe.encode_prompt``."""
    import torch

    if trainer.embeds is not None:
        pairs = [trainer.embeds[p] for p in prompts]
    else:
        states, pooled, _ = trainer.pipe.encode_prompt(
            list(prompts), device=trainer.pipe.transformer.device, max_sequence_length=trainer.max_length
        )
        pairs = [(states[i : i + 1], pooled[i : i + 1]) for i in range(len(prompts))]
    states = torch.cat([s.expand(batch, -1, -1) for s, _ in pairs])
    pooled = torch.cat([p.expand(batch, -1) for _, p in pairs])
    return states, pooled


def prepare_trainer(
    pipe: Any, config: LearnConfig, accelerator: Any | None = None, method: LearnerMethod | None = None
) -> Trainer:
    """Add V* to ``pipe``, freeze it, unfreeze / add what the method trains, make AdamW and its schedule.

    ``pipe`` is changed in place (token, hooks, adapters); frozen weights keep their device and
    dtype, trained ones are float32 (the master copy under bf16 autocast). ``method``: a method object
    of one's own (e.g. ``LoRA(lora=LoraConfig(...))``; default: the one ``config`` builds).
    """
    import torch
    from diffusers.optimization import get_scheduler
    from diffusers.training_utils import cast_training_params

    method = method if method is not None else config.learner_method()
    rows_from = config.init_word if method.trains_rows else None
    placeholder = add_placeholder(pipe, config.token, rows_from, torch.Generator().manual_seed(config.seed * 7919 + 11))
    for enc in ("text_encoder", "text_encoder_2", "transformer"):
        getattr(pipe, enc).requires_grad_(False)
    if method.trains_rows:
        placeholder.hook()
    params = method.trainable(pipe, placeholder, config.seed)
    cast_training_params(pipe.transformer, dtype=torch.float32)  # in place: ``params`` stay the same objects
    if config.gradient_checkpointing:
        pipe.transformer.enable_gradient_checkpointing()
    accelerator = accelerator if accelerator is not None else make_accelerator(config)
    on_cuda = next(iter(params.values())).device.type == "cuda"
    # fused on CUDA: no full-size temporaries
    optimizer = torch.optim.AdamW(params.values(), lr=config.resolved_lr(), weight_decay=1e-2, fused=on_cuda or None)
    scheduler = get_scheduler(
        config.lr_scheduler,
        optimizer=optimizer,
        num_warmup_steps=config.lr_warmup_steps,
        num_training_steps=config.resolved_steps(),
    )
    progress = _Progress(params)
    accelerator.register_for_checkpointing(scheduler, progress)
    trainer = Trainer(
        pipe,
        config,
        method,
        placeholder,
        params,
        accelerator,
        accelerator.prepare(optimizer),
        scheduler,
        progress,
        max_length=min(int(pipe.tokenizer_2.model_max_length), MAX_SEQUENCE_LENGTH),
    )
    if not method.trains_rows:
        with torch.no_grad():
            trainer.embeds = {p: _encode(trainer, [p], 1) for p in (config.prompt(), config.class_prompt)}
    return trainer


def _draw(trainer: Trainer, latents: Latents, g: Any) -> tuple[Any, Any, Any]:
    """(x0, noise, t) of ``config.batch`` images of ``latents`` drawn with the CPU generator ``g``."""
    import torch
    from diffusers.training_utils import compute_density_for_timestep_sampling

    cfg, vae = trainer.config, trainer.pipe.vae
    shift = float(vae.config.shift_factor or 0.0) if vae is not None else 0.0
    scale = float(vae.config.scaling_factor) if vae is not None else 1.0
    n = latents.mean.shape[0]
    idx = torch.randint(n, (cfg.batch,), generator=g)
    mean, std = latents.mean[idx.to(latents.mean.device)], latents.std[idx.to(latents.std.device)]
    eps = torch.randn(mean.shape, generator=g).to(mean.device, mean.dtype)
    x0 = (mean + std * eps - shift) * scale
    noise = torch.randn(mean.shape, generator=g).to(mean.device, mean.dtype)
    t = compute_density_for_timestep_sampling(
        cfg.weighting_scheme, cfg.batch, LOGIT_MEAN, LOGIT_STD, MODE_SCALE, generator=g
    ).to(mean.device, mean.dtype)
    return x0, noise, t


def chunk_losses(trainer: Trainer, chunks: Sequence[tuple[Latents, str]], g: Any) -> list[Any]:
    """Each chunk's rectified-flow loss (a scalar tensor), all chunks in ONE transformer forward.

    ``chunks``: ``(latents, prompt)``; each gives ``config.batch`` images drawn with the CPU
    generator ``g`` (chunk by chunk, in order).
    """
    import torch
    from diffusers import FluxPipeline
    from diffusers.training_utils import compute_loss_weighting_for_sd3

    draws = [_draw(trainer, latents, g) for latents, _ in chunks]
    x0, noise, t = (torch.cat(parts) for parts in zip(*draws))
    b, c, h, w = x0.shape
    tt = t.view(b, 1, 1, 1)
    packed = FluxPipeline._pack_latents((1.0 - tt) * x0 + tt * noise, b, c, h, w)
    target = FluxPipeline._pack_latents(noise - x0, b, c, h, w)
    states, pooled = _encode(trainer, [prompt for _, prompt in chunks], trainer.config.batch)
    img_ids = FluxPipeline._prepare_latent_image_ids(1, h // 2, w // 2, x0.device, x0.dtype)
    txt_ids = torch.zeros(states.shape[1], 3, device=x0.device, dtype=x0.dtype)
    transformer = trainer.pipe.transformer
    guidance = (
        torch.full((b,), trainer.config.guidance, device=x0.device, dtype=torch.float32)
        if transformer.config.guidance_embeds
        else None
    )
    # accelerate's bf16 autocast, on the transformer's device (which may not be the accelerator's)
    bf16 = trainer.accelerator.mixed_precision == "bf16"
    with torch.autocast(x0.device.type, dtype=torch.bfloat16, enabled=bf16):
        pred = transformer(
            hidden_states=packed,
            timestep=t,
            guidance=guidance,
            pooled_projections=pooled,
            encoder_hidden_states=states,
            txt_ids=txt_ids,
            img_ids=img_ids,
            return_dict=False,
        )[0]
    weighting = compute_loss_weighting_for_sd3(trainer.config.weighting_scheme, sigmas=t).view(b, 1, 1)
    per_image = (weighting.float() * (pred.float() - target.float()) ** 2).reshape(b, -1).mean(1)
    return [chunk.mean() for chunk in per_image.split(trainer.config.batch)]


def flow_loss(trainer: Trainer, latents: Latents, prompt: str, g: Any) -> Any:
    """The rectified-flow loss of ``config.batch`` images of ``latents`` captioned ``prompt`` (a scalar tensor)."""
    return chunk_losses(trainer, [(latents, prompt)], g)[0]


def _generator(config: LearnConfig, micro_step: int) -> Any:
    import torch

    return torch.Generator().manual_seed(config.seed * 1_000_003 + 7 + micro_step)


def training_step(trainer: Trainer, step: int, instance: Latents, prior: Latents | None = None) -> Any:
    """One optimisation step of ``gradient_accumulation`` micro-steps (gradient norm clipped to 1);
    returns the detached mean loss. Draws follow ``(config.seed, step)`` only, so step ``s`` is the same in any run."""
    cfg, accelerator = trainer.config, trainer.accelerator
    chunks = [(instance, cfg.prompt())] + ([(prior, cfg.class_prompt)] if prior is not None else [])
    total = 0.0
    for k in range(cfg.gradient_accumulation):
        with accelerator.accumulate():
            losses = chunk_losses(trainer, chunks, _generator(cfg, step * cfg.gradient_accumulation + k))
            loss = losses[0] + cfg.prior_weight * losses[1] if prior is not None else losses[0]
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(list(trainer.params.values()), 1.0)
            trainer.optimizer.step()
            if accelerator.sync_gradients:
                trainer.scheduler.step()
            trainer.optimizer.zero_grad(set_to_none=True)
        total = total + loss.detach()
    return total / cfg.gradient_accumulation


# ----------------------------------------------------------------------------- the job
def learn(config: LearnConfig, out: str | Path) -> Path:
    """Learn the concept of ``config.images`` with ``config.method``; save it in ``out``.

    Resumable: rerun with the same config and ``out`` to continue from the last checkpoint (a
    finished ``out`` is returned at once). Returns ``out``, loadable by diffusers' own loaders or
    :func:`~concept_grounding.learners.load_learned`.

    Raises:
        UsageError: bad input (:meth:`LearnConfig.check`), or ``out`` holding another run.
    """
    config.check()
    out = Path(out)
    check_out(config, out)
    if (out / "learned.json").is_file():
        return out
    with limited_threads(config.threads), fit(config, out):
        pass
    return out


def _data(pipe: Any, config: LearnConfig, work: Path) -> tuple[Latents, Latents | None]:
    """The instance latents and, for a prior-preserving method, the class images' latents."""
    images = load_images(config.images)
    prior = None
    if config.uses_prior():
        prior_images = class_images(pipe, config, images.shape[1:3], work)
        prior = encode_images(pipe, prior_images, work / "prior", config.device, config.progress)
    return encode_images(pipe, images, work / "instance", config.device, config.progress), prior


def fit(config: LearnConfig, out: str | Path) -> Trainer:
    """:func:`learn`'s work on an unfinished ``out``: train (resuming from ``out``'s checkpoint),
    save, and return the trained :class:`Trainer` (its pipeline in memory, V* hooked in until
    :meth:`Trainer.close`)."""
    import torch
    from diffusers import FluxPipeline
    from tqdm.auto import tqdm

    from ..tdg.loading import load_flux_pipeline

    out = Path(out)
    check_out(config, out)
    if torch.device(config.device).type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"{config.device} asked for but torch sees no CUDA device", argument=named("device"))
    work = out / ".work"
    work.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    pipe = load_flux_pipeline(model_folder(config.model), config.dtype, FluxPipeline).to(config.device)
    instance, prior = _data(pipe, config, work)
    trainer = prepare_trainer(pipe, config, make_accelerator(config, work))
    total, state = config.resolved_steps(), trainer.progress
    ckpt = work / CHECKPOINT
    if ckpt.is_dir():
        trainer.accelerator.load_state(str(ckpt))
    start = time.perf_counter() - state.seconds
    width, height = check_images(config.images, 1)
    bar = tqdm(
        desc=f"{config.method} {Path(config.images).name}", total=total, initial=state.step, disable=not config.progress
    )
    for step in range(state.step, total):
        loss = training_step(trainer, step, instance, prior)
        state.losses.append(float(loss))
        state.step, state.seconds = step + 1, time.perf_counter() - start
        bar.update(1)
        bar.set_postfix(loss=f"{state.losses[-1]:.4f}")
        if validation_due(config, state.step):  # before the checkpoint: a checkpoint's steps have their images
            save_validation_images(trainer, out, state.step, (height, width))
        if state.step % config.checkpoint_every == 0 and state.step < total:
            save_checkpoint(trainer.accelerator, ckpt)
    bar.close()
    files = trainer.method.save(pipe, trainer.placeholder, trainer.params, out)
    manifest = {
        "method": config.method,
        "token": config.token,
        "files": files,
        "steps": state.step,
        "losses": state.losses,
        "seconds_training": state.seconds,
        "seconds_total": time.perf_counter() - t0,
        "trained_parameters": int(sum(p.numel() for p in trainer.params.values())),
        "config": json.loads(config.to_json()),
    }
    (out / "learned.json").write_text(json.dumps(manifest, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return trainer


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
