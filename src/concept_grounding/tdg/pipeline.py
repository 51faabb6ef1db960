"""``TiedDiffusionPipeline``: FLUX with Tied Diffusion Guidance (SUB, Bader et al., Sec. 3; Eqs. 3-6).

A subclass of diffusers' ``FluxPipeline`` that changes only what TDG changes (:class:`TiedPipelineMixin`,
shared with the FLUX.2 pipelines of :mod:`.pipeline_flux2`): reference and guide prompts run as one
batch from shared initial latents, and the final guided prediction is tied per pair in a per-call copy
of ``scheduler.step`` (the shared pipeline is never patched, so concurrent calls each get the images
they would get alone). ``__call__`` takes every FluxPipeline argument but those in
:data:`REFUSED_ARGUMENTS`; the output's ``images`` are the references. Manual: docs/tdg.md,
docs/guide/tdg.md.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any

import torch
from diffusers import FluxPipeline
from diffusers.image_processor import PipelineImageInput

from .concurrency import PerCallConcurrency, serialised_encode_prompt
from .pairs import RENAMED_ARGUMENTS, pair_batch, pair_negative
from .pipeline_output import TiedDiffusionPipelineOutput
from .schedule import EtaSchedule, Schedule
from .tie import Granularity, tie_batch

__all__ = ["TiedDiffusionPipeline", "TiedPipelineMixin", "tied_scheduler", "REFUSED_ARGUMENTS", "RENAMED_ARGUMENTS"]

#: Base-pipeline arguments TDG refuses by design, and why (the one list; the tests check
#: that every other argument of each base pipeline's ``__call__`` is accepted).
REFUSED_ARGUMENTS: dict[str, str] = {
    "prompt_2": "FLUX.1's separate T5 prompt: a TDG pair is (reference_prompt, guide_prompt), each read by both "
    "text encoders; a second prompt per side is not part of SUB's method (Sec. 3)",
    "negative_prompt_2": "the negative counterpart of prompt_2 (negative_prompt reaches both text encoders)",
    "caption_upsample_temperature": "FLUX.2's prompt upsampling rewrites each prompt on its own, so the reference "
    "and guide prompts would no longer differ only in the attribute (SUB Sec. 3)",
}


def tied_scheduler(
    scheduler: Any, schedule: Schedule, granularity: Granularity = "element"
) -> tuple[Any, list[tuple[float, float]]]:
    """A private copy of ``scheduler`` whose ``step`` ties the pair, and its step record.

    The batch given to ``step`` must be ``[references; guides]``: row ``i`` of the first
    half pairs with row ``i`` of the second (SUB Eqs. 5-6, :func:`~.tie.tie_pair`) at
    ``eta = schedule(t)``, ``t = timestep / num_train_timesteps``. The returned list
    receives ``(t, eta)`` per step. ``scheduler`` itself is left untouched, so calls that
    each build their own copy cannot disturb one another.

    Per step this adds only the tie: ``t`` is read from a host copy of the scheduler's
    timesteps (made once per call) instead of the device tensor, so a GPU is not
    synchronised at every step, and a step with ``eta = 0`` passes the prediction through
    untouched (``tie_pair`` would return it unchanged).

    >>> from diffusers import FlowMatchEulerDiscreteScheduler
    >>> from concept_grounding.tdg import ConstantEta
    >>> shared = FlowMatchEulerDiscreteScheduler()
    >>> tied, record = tied_scheduler(shared, ConstantEta(1.0))
    >>> tied is shared, "step" in vars(shared), record
    (False, False, [])
    """
    tied = copy.deepcopy(scheduler)
    original = tied.step
    num_train = float(tied.config.num_train_timesteps)
    record: list[tuple[float, float]] = []
    host: dict[str, Any] = {"timesteps": None, "values": []}

    def host_timestep(timestep: Any) -> float:
        """The step's timestep as a float, read at the scheduler's own step index (the one
        its ``step`` uses) from a host copy: ``float(timestep)`` would synchronise a GPU."""
        index = getattr(tied, "step_index", None)
        if index is None:  # before the first step: FluxPipeline sets the begin index
            index = getattr(tied, "begin_index", None)
        timesteps = getattr(tied, "timesteps", None)
        if index is None or not isinstance(timesteps, torch.Tensor) or not 0 <= index < len(timesteps):
            return float(timestep)
        if host["timesteps"] is not timesteps:  # set_timesteps ran: copy the new ones once
            host["timesteps"], host["values"] = timesteps, timesteps.tolist()
        return float(host["values"][index])

    def step(model_output: torch.Tensor, timestep: Any, sample: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        t = host_timestep(timestep) / num_train
        model_output, eta = tie_batch(model_output, t, schedule, granularity)
        record.append((t, eta))
        return original(model_output, timestep, sample, *args, **kwargs)

    tied.step = step
    return tied, record


class TiedPipelineMixin(PerCallConcurrency):
    """What TDG adds to a Flux-family text-to-image pipeline; mixed in before the base class
    (``class TiedDiffusionPipeline(TiedPipelineMixin, FluxPipeline)``). See the module docstring.

    The base pipeline's ``__call__`` runs unchanged on a per-call view (:meth:`call_view`) whose
    scheduler ties the pair (:func:`tied_scheduler`) and whose :meth:`prepare_latents` gives every
    guide its reference's initial latents; :meth:`tied_call` is the whole of it.
    """

    def prepare_latents(self, batch_size: int, *args: Any, **kwargs: Any) -> Any:
        """The base pipeline's ``prepare_latents``; inside a TDG call, guide ``i`` gets reference ``i``'s.

        The base loop asks for ``batch_size = 2 * reference_rows``; this draws (or takes, from
        ``latents``) the reference half only, with the caller's generator(s), and repeats it:
        latents (and per-row position ids, FLUX.2's (B, seq, 4)) become ``[half; half]``.
        Outside a TDG call it is the base method unchanged.
        """
        rows = vars(self).get("_tdg_reference_rows")
        if rows is None:
            return super().prepare_latents(batch_size, *args, **kwargs)
        if batch_size != 2 * rows:
            raise ValueError(f"TDG expected a batch of {2 * rows} rows [references; guides], got {batch_size}")
        bound = inspect.signature(super().prepare_latents).bind(rows, *args, **kwargs)
        given = bound.arguments.get("latents")
        if given is not None and given.shape[0] != rows:
            raise ValueError(f"latents must hold the reference half ({rows} rows), got shape {tuple(given.shape)}")
        prepared = super().prepare_latents(*bound.args, **bound.kwargs)
        return tuple(
            torch.cat([x, x]) if isinstance(x, torch.Tensor) and x.ndim >= 3 and x.shape[0] == rows else x
            for x in prepared
        )

    def base_call(self, **kwargs: Any) -> Any:
        """The base pipeline's own ``__call__``, untied (SUB's prompting-only baseline from the same
        weights; :func:`~.baseline.prompting_images` batches it), on a per-call view with its own
        copy of the scheduler (:meth:`call_view`), so it may run beside other calls on this pipeline."""
        view = self.call_view(copy.deepcopy(self.scheduler))
        with self.cache_session(view):
            try:
                return super(TiedPipelineMixin, view).__call__(**kwargs)
            finally:
                self.publish_call_state(view)

    def split_pair_output(self, images: Any, num_references: int) -> tuple[Any, Any]:
        """Split the base pipeline's image batch into (reference images, guide images)."""
        return images[:num_references], images[num_references:]

    def tied_call(
        self,
        *,
        reference_rows: int,
        eta_schedule: Schedule,
        granularity: Granularity,
        return_dict: bool,
        **base_kwargs: Any,
    ) -> TiedDiffusionPipelineOutput | tuple[Any, Any, list[float]]:
        """Run the base pipeline's ``__call__`` on the batch ``[references; guides]``, tied.

        Args:
            reference_rows: n * num_images_per_prompt, the rows of each half.
            eta_schedule: ``t -> eta`` (SUB Eq. 4), evaluated at every step.
            granularity: see :func:`~.tie.tie_pair`.
            base_kwargs: the base ``__call__``'s arguments for the whole batch (2n prompts or
                (2n, ...) embeddings; ``latents`` of the reference half).
        """
        if granularity not in ("element", "token"):
            raise ValueError(f"granularity must be 'element' or 'token', got {granularity!r}")
        scheduler, record = tied_scheduler(self.scheduler, eta_schedule, granularity)
        view = self.call_view(scheduler, reference_rows)
        with self.cache_session(view):
            try:
                images = super(TiedPipelineMixin, view).__call__(return_dict=False, **base_kwargs)[0]
            finally:
                self.publish_call_state(view)
        reference_images, guide_images = self.split_pair_output(images, reference_rows)
        eta_per_step = [eta for _, eta in record]
        if not return_dict:
            return reference_images, guide_images, eta_per_step
        return TiedDiffusionPipelineOutput(
            images=reference_images,
            guide_images=guide_images,
            eta_per_step=eta_per_step,
            t_per_step=[t for t, _ in record],
        )


def resolve_schedule(eta_schedule: Schedule | None, t_min: float, t_max: float, k: float) -> Schedule:
    """``eta_schedule``, or SUB Eq. 4's :class:`~.schedule.EtaSchedule` ``(t_min, t_max, k)``."""
    return eta_schedule if eta_schedule is not None else EtaSchedule(t_min=t_min, t_max=t_max, k=k)


class TiedDiffusionPipeline(TiedPipelineMixin, FluxPipeline):
    """FLUX.1 text-to-image with Tied Diffusion Guidance; see the module docstring."""

    encode_prompt = serialised_encode_prompt(FluxPipeline.encode_prompt)

    def default_max_sequence_length(self) -> int:
        """T5 prompt length when the caller gives none: the T5 tokenizer's ``model_max_length``
        capped at FluxPipeline's 512 (a model trained on short prompts, such as the world
        Flux, records its trained length there; padding it to 512 would leave the prompts
        out of distribution)."""
        length = getattr(self.tokenizer_2, "model_max_length", 512) if self.tokenizer_2 is not None else 512
        return int(min(512, length)) if isinstance(length, int) and length > 0 else 512

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
        negative_prompt: str | list[str] | None = None,
        true_cfg_scale: float = 1.0,
        height: int | None = None,
        width: int | None = None,
        num_inference_steps: int = 28,
        sigmas: list[float] | None = None,
        guidance_scale: float = 3.5,
        num_images_per_prompt: int = 1,
        generator: torch.Generator | list[torch.Generator] | None = None,
        latents: torch.Tensor | None = None,
        reference_prompt_embeds: torch.Tensor | None = None,
        reference_pooled_prompt_embeds: torch.Tensor | None = None,
        guide_prompt_embeds: torch.Tensor | None = None,
        guide_pooled_prompt_embeds: torch.Tensor | None = None,
        ip_adapter_image: PipelineImageInput | None = None,
        ip_adapter_image_embeds: list[torch.Tensor] | None = None,
        negative_ip_adapter_image: PipelineImageInput | None = None,
        negative_ip_adapter_image_embeds: list[torch.Tensor] | None = None,
        negative_prompt_embeds: torch.Tensor | None = None,
        negative_pooled_prompt_embeds: torch.Tensor | None = None,
        output_type: str = "pil",
        return_dict: bool = True,
        joint_attention_kwargs: dict[str, Any] | None = None,
        callback_on_step_end: Callable[[Any, int, int, dict], dict] | None = None,
        callback_on_step_end_tensor_inputs: list[str] = ["latents"],  # noqa: B006 (FluxPipeline's default)
        max_sequence_length: int | None = None,
    ) -> TiedDiffusionPipelineOutput | tuple[Any, Any, list[float]]:
        """Generate tied (reference, guide) image pairs.

        Every argument not listed here is FluxPipeline's, with its meaning and default, for
        the whole pair; :data:`REFUSED_ARGUMENTS` lists the ones TDG refuses and why.

        Args:
            reference_prompt: ``c_R``, one string or n strings.
            guide_prompt: ``c_G``, same count as ``reference_prompt``.
            eta_schedule: any ``t -> eta`` callable with values in [0, 1]; default
                ``EtaSchedule(t_min, t_max, k)`` (SUB Eq. 4; paper: k = 10, t_min = 0.2,
                t_max = 0.9 colour/shape, 0.6 pattern).
            granularity: ``"element"`` (paper) or ``"token"`` (ties whole latent tokens).
            negative_prompt: FluxPipeline's true CFG with ``true_cfg_scale > 1``; one string or
                one per pair (serves both sides). The tie acts after the CFG combination.
            generator: one generator, or ``n * num_images_per_prompt`` (one per reference image;
                the guide image reuses its reference's initial latents).
            latents: packed initial latents of the reference half, ``(n * num_images_per_prompt, seq, C)``.
            reference_prompt_embeds, guide_prompt_embeds: precomputed T5 embeddings (n, L, D)
                of each side (``encode_prompt``), instead of the prompts; equal shapes.
            reference_pooled_prompt_embeds, guide_pooled_prompt_embeds: their CLIP pooled
                embeddings (n, D_pool), required with them.
            negative_prompt_embeds, negative_pooled_prompt_embeds: one row per pair.
            max_sequence_length: T5 prompt length; default :meth:`default_max_sequence_length`.
        Returns:
            :class:`TiedDiffusionPipelineOutput` (``images`` are the references), or
            ``(reference_images, guide_images, eta_per_step)`` when ``return_dict=False``.
        """
        # 1. Check TDG's inputs and lay the pair out as one batch [references; guides]
        batch = pair_batch(
            reference_prompt,
            guide_prompt,
            {
                "prompt_embeds": (reference_prompt_embeds, guide_prompt_embeds),
                "pooled_prompt_embeds": (reference_pooled_prompt_embeds, guide_pooled_prompt_embeds),
            },
        )
        # 2. FluxPipeline's own call on that batch, tied inside the scheduler step
        return self.tied_call(
            reference_rows=batch.pairs * num_images_per_prompt,
            eta_schedule=resolve_schedule(eta_schedule, t_min, t_max, k),
            granularity=granularity,
            return_dict=return_dict,
            prompt=batch.prompt,
            **batch.embeds,
            negative_prompt=pair_negative(negative_prompt, batch.pairs, "negative_prompt"),
            true_cfg_scale=true_cfg_scale,
            height=height,
            width=width,
            num_inference_steps=num_inference_steps,
            sigmas=sigmas,
            guidance_scale=guidance_scale,
            num_images_per_prompt=num_images_per_prompt,
            generator=generator,
            latents=latents,
            ip_adapter_image=ip_adapter_image,
            ip_adapter_image_embeds=ip_adapter_image_embeds,
            negative_ip_adapter_image=negative_ip_adapter_image,
            negative_ip_adapter_image_embeds=negative_ip_adapter_image_embeds,
            negative_prompt_embeds=pair_negative(negative_prompt_embeds, batch.pairs, "negative_prompt_embeds"),
            negative_pooled_prompt_embeds=pair_negative(
                negative_pooled_prompt_embeds, batch.pairs, "negative_pooled_prompt_embeds"
            ),
            output_type=output_type,
            joint_attention_kwargs=joint_attention_kwargs,
            callback_on_step_end=callback_on_step_end,
            callback_on_step_end_tensor_inputs=callback_on_step_end_tensor_inputs,
            max_sequence_length=max_sequence_length or self.default_max_sequence_length(),
        )
