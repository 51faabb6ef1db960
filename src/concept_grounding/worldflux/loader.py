"""Find and load the shipped world-trained Flux pipeline, and how it is sampled.

:class:`WorldFluxSettings` is the one declaration of the world Flux's sampling settings:
its steps and true CFG scale (the model card's, :data:`WORLD_STEPS`, :data:`WORLD_TRUE_CFG`),
its side and prompt length (read from the folder's configs by :func:`world_flux_settings`,
without torch). ``generate`` (:class:`~.source.WorldFlux`), the Space's TDG tab and
``benchmarks/bench_tdg_world.py`` all take them from there.

>>> s = world_flux_settings()
>>> s.size, s.max_sequence_length, s.num_inference_steps, s.true_cfg_scale
(32, 24, 20, 4.0)
>>> s.call_kwargs(num_inference_steps=4)
{'height': 32, 'width': 32, 'max_sequence_length': 24, 'true_cfg_scale': 4.0, 'num_inference_steps': 4}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "WORLD_FLUX_DIR",
    "WORLD_TRUE_CFG",
    "WORLD_STEPS",
    "WORLD_TDG_EXPECTATION",
    "WorldFluxSettings",
    "world_flux_settings",
    "world_flux_path",
    "load_world_flux",
    "world_flux_call_kwargs",
    "trained_world_config",
]

#: The shipped pipeline folder (package data).
WORLD_FLUX_DIR = Path(__file__).resolve().parent.parent / "assets" / "world_flux"
#: True classifier-free guidance scale against the empty prompt, and the sampling steps, at
#: which the world Flux was measured (model card); the transformer has no guidance embedding.
WORLD_TRUE_CFG = 4.0
WORLD_STEPS = 20
#: What to expect of TDG on the world Flux, in one sentence (the Space's TDG tab and ``make demo``
#: say it; measured in docs/tdg_world/report.md).
WORLD_TDG_EXPECTATION = (
    "What to expect: the world Flux draws S+ in about half of its colour guides when they run alone, but SUB's "
    "tie shares the first denoising steps, which on these canonical 32 px birds already settle the species' "
    "colours, so the tied guide often follows the reference and the TDG reference looks like the prompting-only "
    "image (on 849 held-out pairings TDG succeeds in 1.1 %, prompting in 0.5 %): TDG rarely helps here, which is "
    "the project's measured finding, not a fault of the page."
)


def world_flux_path() -> Path:
    """The shipped pipeline folder; raises ``FileNotFoundError`` if the weights are missing."""
    if not (WORLD_FLUX_DIR / "model_index.json").is_file():
        raise FileNotFoundError(
            f"world Flux weights not found in {WORLD_FLUX_DIR} (train them with `concept-grounding train-flux`)"
        )
    return WORLD_FLUX_DIR


@dataclass(frozen=True)
class WorldFluxSettings:
    """How a world-Flux folder is sampled (declared once; its card gives the steps and the CFG).

    Attributes:
        size: image side in pixels: the VAE's trained ``sample_size``.
        max_sequence_length: T5 prompt length in tokens: the trained one, ``tokenizer_2``'s ``model_max_length``.
        num_inference_steps: sampling steps the model was measured at (model card: 20).
        true_cfg_scale: true classifier-free guidance against :attr:`negative_prompt` (model card:
            4; the transformer has no guidance embedding, so ``guidance_scale`` is ignored).
        negative_prompt: the empty prompt (trained with 10 % caption dropout).
    """

    size: int
    max_sequence_length: int
    num_inference_steps: int = WORLD_STEPS
    true_cfg_scale: float = WORLD_TRUE_CFG
    negative_prompt: str = ""

    def extra(self) -> dict[str, Any]:
        """The call arguments beyond size, prompt length and steps: ``true_cfg_scale``, ``negative_prompt``."""
        return {"true_cfg_scale": self.true_cfg_scale, "negative_prompt": self.negative_prompt}

    def call_kwargs(
        self, *, true_cfg_scale: float | None = None, num_inference_steps: int | None = None
    ) -> dict[str, Any]:
        """``height``, ``width``, ``max_sequence_length``, ``true_cfg_scale``, ``num_inference_steps``
        (the settings' own unless given; ``negative_prompt`` must be passed beside them)."""
        return {
            "height": int(self.size),
            "width": int(self.size),
            "max_sequence_length": int(self.max_sequence_length),
            "true_cfg_scale": float(self.true_cfg_scale if true_cfg_scale is None else true_cfg_scale),
            "num_inference_steps": int(
                self.num_inference_steps if num_inference_steps is None else num_inference_steps
            ),
        }


def world_flux_folder(path: str | Path | None = None) -> Path:
    """``path`` (default: the shipped folder), checked to be a diffusers pipeline folder.

    Raises:
        FileNotFoundError: no ``model_index.json`` there.
    """
    folder = Path(path) if path is not None else world_flux_path()
    if not (folder / "model_index.json").is_file():
        raise FileNotFoundError(f"path: {folder} is not a diffusers pipeline folder (no model_index.json)")
    return folder


def world_flux_settings(path: str | Path | None = None) -> WorldFluxSettings:
    """The :class:`WorldFluxSettings` of a world-Flux folder (default: the shipped one), read from
    its ``vae/config.json`` and ``tokenizer_2/tokenizer_config.json`` (no torch)."""
    folder = world_flux_folder(path)
    size = json.loads((folder / "vae" / "config.json").read_text())["sample_size"]
    tokens = json.loads((folder / "tokenizer_2" / "tokenizer_config.json").read_text())["model_max_length"]
    return WorldFluxSettings(size=int(size), max_sequence_length=int(tokens))


def load_world_flux(path: str | Path | None = None, pipeline_cls: type | None = None, torch_dtype: Any = None) -> Any:
    """Load a world-Flux folder (default: the shipped one) as ``pipeline_cls`` through
    :func:`~concept_grounding.tdg.loading.load_flux_pipeline` (default
    :class:`~concept_grounding.tdg.TiedDiffusionPipeline`, weights cast to ``torch_dtype``,
    default float32, at the trained resolution)."""
    from ..tdg.loading import load_flux_pipeline

    return load_flux_pipeline(world_flux_folder(path), torch_dtype or "float32", pipeline_cls)


def world_flux_call_kwargs(
    pipe: Any, true_cfg_scale: float = WORLD_TRUE_CFG, num_inference_steps: int = WORLD_STEPS
) -> dict[str, Any]:
    """Keyword arguments a loaded world-Flux ``pipe`` needs (:meth:`WorldFluxSettings.call_kwargs`
    of its trained resolution and prompt length): ``height``, ``width``, ``max_sequence_length``,
    ``true_cfg_scale``, ``num_inference_steps`` (``negative_prompt=""`` must be passed beside them).
    """
    settings = WorldFluxSettings(
        size=int(pipe.vae.config.sample_size), max_sequence_length=int(pipe.tokenizer_2.model_max_length)
    )
    return settings.call_kwargs(true_cfg_scale=true_cfg_scale, num_inference_steps=num_inference_steps)


def trained_world_config(path: str | Path | None = None) -> Any:
    """The :class:`~concept_grounding.world.WorldConfig` a world-Flux folder (default: the
    shipped one) was trained on, from its ``train_log.json``: the world its judges must see.

    >>> trained_world_config().pose in ("canonical", "varied")
    True
    """
    from .components import FluxTrainConfig

    folder = Path(path) if path is not None else world_flux_path()
    log = folder / "train_log.json"
    if not log.is_file():
        raise FileNotFoundError(f"path: {folder} has no train_log.json (not a folder written by train-flux)")
    return FluxTrainConfig.from_dict(json.loads(log.read_text())["config"]).world
