"""Output of the TDG pipelines (:class:`~concept_grounding.tdg.pipeline.TiedDiffusionPipeline`, the FLUX.2 ones)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diffusers.utils import BaseOutput

__all__ = ["TiedDiffusionPipelineOutput"]


@dataclass
class TiedDiffusionPipelineOutput(BaseOutput):
    """Reference and guide images of a TDG call, and the tie actually applied.

    ``images`` comes first, as in every diffusers pipeline output, so ``out.images``,
    ``out[0]`` and ``return_dict=False``'s first element are the references.

    Args:
        images: ``n * num_images_per_prompt`` images for the reference prompts (PIL list,
            (N, H, W, 3) numpy, (N, 3, H, W) torch, or latents), in prompt-major order: prompt
            ``i``'s ``j``-th image is at ``i * num_images_per_prompt + j``. SUB keeps these;
            :attr:`reference_images` is the same object.
        guide_images: the guide images, same layout (SUB discards them).
        eta_per_step: the ``eta`` used at each denoising step, in step order.
        t_per_step: normalised time ``t = timestep / num_train_timesteps`` of each step.
    """

    images: Any
    guide_images: Any
    eta_per_step: list[float]
    t_per_step: list[float]

    @property
    def reference_images(self) -> Any:
        """The reference images (``c_R``'s), i.e. :attr:`images`."""
        return self.images
