"""Tied Diffusion Guidance for FLUX.2: ``TiedFlux2Pipeline`` and ``TiedFlux2KleinPipeline``.

Both are diffusers' FLUX.2 pipelines with :class:`~.pipeline.TiedPipelineMixin` mixed in,
the same tie as FLUX.1 (SUB Eqs. 3-6 inside ``scheduler.step``, on the final guided
prediction: after FLUX.2 [klein]'s classifier-free guidance when it runs), the same shared
initial latents per pair, per-call views and published call state. ``__call__`` lists each
base pipeline's arguments, with ``prompt`` / ``prompt_embeds`` one per side
(:data:`~.pipeline.RENAMED_ARGUMENTS`) and ``caption_upsample_temperature`` refused
(:data:`~.pipeline.REFUSED_ARGUMENTS`). FLUX.2's ``image`` (reference images to condition
on) serves both sides of every pair.

Load them from the package or as diffusers custom pipelines::

    pipe = DiffusionPipeline.from_pretrained("black-forest-labs/FLUX.2-klein-4B",
                                             custom_pipeline="pipelines/tied_flux2_klein", trust_remote_code=True)
    out = pipe("A photo of a Blue Jay with a yellow crown", "A photo of a bird with a yellow crown")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import PIL.Image
import torch
from diffusers import Flux2KleinPipeline, Flux2Pipeline

from .concurrency import serialised_encode_prompt
from .pairs import pair_batch, pair_negative
from .pipeline import TiedPipelineMixin, resolve_schedule
from .pipeline_output import TiedDiffusionPipelineOutput
from .schedule import Schedule
from .tie import Granularity

__all__ = ["TiedFlux2Pipeline", "TiedFlux2KleinPipeline"]


class TiedFlux2Pipeline(TiedPipelineMixin, Flux2Pipeline):
    """FLUX.2 [dev] text(-and-image)-to-image with Tied Diffusion Guidance; see the module docstring."""

    encode_prompt = serialised_encode_prompt(Flux2Pipeline.encode_prompt)

    @torch.no_grad()
    def __call__(
        self,
        reference_prompt: str | list[str] | None = None,
        guide_prompt: str | list[str] | None = None,
        *,
        eta_schedule: Schedule | None = None,
        t_min: float = 0.2,
        t_max: float = 0.9,
        k: float = 10.0,
        granularity: Granularity = "element",
        image: PIL.Image.Image | list[PIL.Image.Image] | None = None,
        height: int | None = None,
        width: int | None = None,
        num_inference_steps: int = 50,
        sigmas: list[float] | None = None,
        guidance_scale: float | None = 4.0,
        num_images_per_prompt: int = 1,
        generator: torch.Generator | list[torch.Generator] | None = None,
        latents: torch.Tensor | None = None,
        reference_prompt_embeds: torch.Tensor | None = None,
        guide_prompt_embeds: torch.Tensor | None = None,
        output_type: str | None = "pil",
        return_dict: bool = True,
        attention_kwargs: dict[str, Any] | None = None,
        callback_on_step_end: Callable[[Any, int, int, dict], dict] | None = None,
        callback_on_step_end_tensor_inputs: list[str] = ["latents"],  # noqa: B006 (Flux2Pipeline's default)
        max_sequence_length: int = 512,
        text_encoder_out_layers: tuple[int, ...] = (10, 20, 30),
    ) -> TiedDiffusionPipelineOutput | tuple[Any, Any, list[float]]:
        """Generate tied (reference, guide) image pairs; arguments as ``Flux2Pipeline.__call__`` and
        :meth:`~.pipeline.TiedDiffusionPipeline.__call__`.

        Args:
            latents: initial latents of the reference half, ``(n * num_images_per_prompt, C, H/2, W/2)``
                (FLUX.2's unpacked layout).
            reference_prompt_embeds, guide_prompt_embeds: precomputed (n, L, D) embeddings of
                each side (``encode_prompt``), instead of the prompts; equal shapes.
        """
        batch = pair_batch(
            reference_prompt, guide_prompt, {"prompt_embeds": (reference_prompt_embeds, guide_prompt_embeds)}
        )
        return self.tied_call(
            reference_rows=batch.pairs * num_images_per_prompt,
            eta_schedule=resolve_schedule(eta_schedule, t_min, t_max, k),
            granularity=granularity,
            return_dict=return_dict,
            image=image,
            prompt=batch.prompt,
            **batch.embeds,
            height=height,
            width=width,
            num_inference_steps=num_inference_steps,
            sigmas=sigmas,
            guidance_scale=guidance_scale,
            num_images_per_prompt=num_images_per_prompt,
            generator=generator,
            latents=latents,
            output_type=output_type,
            attention_kwargs=attention_kwargs,
            callback_on_step_end=callback_on_step_end,
            callback_on_step_end_tensor_inputs=callback_on_step_end_tensor_inputs,
            max_sequence_length=max_sequence_length,
            text_encoder_out_layers=text_encoder_out_layers,
        )


class TiedFlux2KleinPipeline(TiedPipelineMixin, Flux2KleinPipeline):
    """FLUX.2 [klein] with Tied Diffusion Guidance; see the module docstring. With ``guidance_scale > 1``
    on a non-distilled model the tie acts on the CFG-combined prediction."""

    encode_prompt = serialised_encode_prompt(Flux2KleinPipeline.encode_prompt)

    @torch.no_grad()
    def __call__(
        self,
        reference_prompt: str | list[str] | None = None,
        guide_prompt: str | list[str] | None = None,
        *,
        eta_schedule: Schedule | None = None,
        t_min: float = 0.2,
        t_max: float = 0.9,
        k: float = 10.0,
        granularity: Granularity = "element",
        image: PIL.Image.Image | list[PIL.Image.Image] | None = None,
        height: int | None = None,
        width: int | None = None,
        num_inference_steps: int = 50,
        sigmas: list[float] | None = None,
        guidance_scale: float = 4.0,
        num_images_per_prompt: int = 1,
        generator: torch.Generator | list[torch.Generator] | None = None,
        latents: torch.Tensor | None = None,
        reference_prompt_embeds: torch.Tensor | None = None,
        guide_prompt_embeds: torch.Tensor | None = None,
        negative_prompt_embeds: torch.Tensor | None = None,
        output_type: str = "pil",
        return_dict: bool = True,
        attention_kwargs: dict[str, Any] | None = None,
        callback_on_step_end: Callable[[Any, int, int, dict], dict] | None = None,
        callback_on_step_end_tensor_inputs: list[str] = ["latents"],  # noqa: B006 (Flux2KleinPipeline's default)
        max_sequence_length: int = 512,
        text_encoder_out_layers: tuple[int, ...] = (9, 18, 27),
    ) -> TiedDiffusionPipelineOutput | tuple[Any, Any, list[float]]:
        """Generate tied (reference, guide) image pairs; arguments as ``Flux2KleinPipeline.__call__`` and
        :meth:`TiedFlux2Pipeline.__call__`.

        Args:
            negative_prompt_embeds: the CFG negative, one row per pair (serves both sides). Required
                with precomputed embeddings when CFG runs (``guidance_scale > 1``, not distilled):
                FLUX.2 [klein] would otherwise encode one empty prompt for the whole batch.
        """
        batch = pair_batch(
            reference_prompt, guide_prompt, {"prompt_embeds": (reference_prompt_embeds, guide_prompt_embeds)}
        )
        cfg = guidance_scale > 1 and not self.config.is_distilled
        if cfg and batch.prompt is None and negative_prompt_embeds is None:
            raise ValueError(
                "negative_prompt_embeds (one row per pair) is required with precomputed prompt "
                "embeddings when classifier-free guidance runs (guidance_scale > 1)"
            )
        return self.tied_call(
            reference_rows=batch.pairs * num_images_per_prompt,
            eta_schedule=resolve_schedule(eta_schedule, t_min, t_max, k),
            granularity=granularity,
            return_dict=return_dict,
            image=image,
            prompt=batch.prompt,
            **batch.embeds,
            height=height,
            width=width,
            num_inference_steps=num_inference_steps,
            sigmas=sigmas,
            guidance_scale=guidance_scale,
            num_images_per_prompt=num_images_per_prompt,
            generator=generator,
            latents=latents,
            negative_prompt_embeds=pair_negative(negative_prompt_embeds, batch.pairs, "negative_prompt_embeds"),
            output_type=output_type,
            attention_kwargs=attention_kwargs,
            callback_on_step_end=callback_on_step_end,
            callback_on_step_end_tensor_inputs=callback_on_step_end_tensor_inputs,
            max_sequence_length=max_sequence_length,
            text_encoder_out_layers=text_encoder_out_layers,
        )
