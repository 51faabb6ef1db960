"""Validation images during ``learn``, as diffusers' training scripts' ``log_validation`` draws them
(docs/guide/learners.md, "Validation images")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config import LearnConfig
from .data import draw_images

__all__ = ["VALIDATION", "validation_due", "save_validation_images"]

#: where :func:`~.train.fit` writes validation images: ``out/validation/step-NNNNNN/NN.png``
VALIDATION = "validation"


def validation_due(config: LearnConfig, step: int) -> bool:
    """Whether validation images are drawn after optimisation step ``step`` (1-based): every
    ``validation_steps`` steps and at the last one, when ``validation_prompt`` is set."""
    if config.validation() is None:
        return False
    return step % config.validation_steps == 0 or step == config.resolved_steps()


def save_validation_images(trainer: Any, out: Path, step: int, side: tuple[int, int]) -> Path:
    """Draw ``num_validation_images`` images of the validation prompt with ``trainer``'s (a
    :class:`~.train.Trainer`) current weights, as diffusers' scripts' ``log_validation`` does, in the training
    precision, into ``out/validation/step-NNNNNN/``.

    Image ``i`` has noise seeded by ``(seed, i)`` at every step, from a generator of its own: the
    training draws (:func:`.train.training_step`'s generators) are untouched, so a resumed run stays
    identical. Returns the folder.
    """
    import torch
    from PIL import Image

    cfg, pipe = trainer.config, trainer.pipe
    prompt = cfg.validation()
    if prompt is None:
        raise ValueError("save_validation_images: the config has no validation_prompt")
    seeds = [cfg.seed * 1_000_033 + 23 + i for i in range(cfg.num_validation_images)]
    bf16 = trainer.accelerator.mixed_precision == "bf16"
    with torch.autocast(pipe.transformer.device.type, dtype=torch.bfloat16, enabled=bf16):
        images = draw_images(pipe, prompt, seeds, side, cfg.validation_inference_steps, cfg.batch)
    folder = out / VALIDATION / f"step-{step:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    for i, image in enumerate(images):
        Image.fromarray(image).save(folder / f"{i:02d}.png")
    return folder
