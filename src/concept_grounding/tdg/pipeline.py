"""``TiedDiffusionPipeline``: FLUX with Tied Diffusion Guidance (SUB, Bader et al., Sec. 3).

The pipeline subclasses diffusers' ``FluxPipeline`` and changes only what TDG changes:

1. the reference prompts ``c_R`` and guide prompts ``c_G`` run as one batch
   ``[R_1..R_n, G_1..G_n]`` (each repeated ``num_images_per_prompt`` times), and every
   guide image starts from the same initial latents as its reference image;
2. at each step, the final guided prediction (after FLUX's distilled guidance and, if
   used, true classifier-free guidance) is tied per pair before the scheduler step
   (SUB Eqs. 3-6; :func:`~concept_grounding.tdg.tie.tie_pair`), with ``eta`` from the
   schedule of Eq. 4 at ``t = timestep / 1000``.

Step 2 happens in ``scheduler.step``, the one place that receives the final guided
``noise_pred`` on both of FluxPipeline's guidance paths. Each call runs FluxPipeline's own
loop on a *per-call view* of the pipeline (:meth:`TiedDiffusionPipeline.call_view`): a
shallow copy that shares every model (no extra memory) but owns a private copy of the
scheduler whose ``step`` ties the pair (:func:`tied_scheduler`), and owns FluxPipeline's
per-call attributes (``_guidance_scale``, ``_interrupt``, ``_current_timestep``, ...). The
shared pipeline is never patched, so one pipeline can serve concurrent calls from threads,
each giving exactly the images it gives alone. Prompt encoding is serialised per pipeline
(fast tokenizers switch their padding settings in place between calls); the denoising
steps run in parallel. Encoding, latents, timesteps and decoding are FluxPipeline's own.
Not thread-safe: model CPU offloading (its hooks move shared modules between devices).

diffusers' caches and ``torch.compile`` act on the transformer, which sees the batch
``[references; guides]`` of the tied latents at every step, so they work unchanged:
``pipe.transformer.enable_cache(FirstBlockCacheConfig(threshold=0.2))`` or
``pipe.transformer.compile_repeated_blocks()`` (see :mod:`.acceleration`, which the
``generate`` job and its ``--cache`` / ``--compile`` use). A cache keeps state in the
shared transformer, so while one is enabled calls run one at a time
(:meth:`TiedDiffusionPipeline.cache_session`).

Load it from the package or as a diffusers custom pipeline::

    from concept_grounding.tdg import TiedDiffusionPipeline
    pipe = TiedDiffusionPipeline.from_pretrained("black-forest-labs/FLUX.1-dev", torch_dtype=torch.bfloat16)
    # or
    pipe = DiffusionPipeline.from_pretrained(
        "black-forest-labs/FLUX.1-dev", custom_pipeline="pipelines/tied_diffusion", trust_remote_code=True
    )
    out = pipe("A photo of a Blue Jay with yellow colored feathers on the crown of its head",
               "A photo of a bird with yellow colored feathers on the crown of its head",
               t_min=0.2, t_max=0.9, k=10, guidance_scale=3.5, num_inference_steps=28)
    out.reference_images[0].save("blue_jay_yellow_crown.png")
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Iterator
from typing import Any

import torch
from diffusers import FluxPipeline

from .pipeline_output import TiedDiffusionPipelineOutput
from .schedule import EtaSchedule, Schedule
from .tie import Granularity, tie_pair

__all__ = ["TiedDiffusionPipeline", "tied_scheduler"]

_OWN_ARGUMENTS = ("prompt", "prompt_2", "prompt_embeds", "pooled_prompt_embeds")


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
        if model_output.shape[0] % 2:
            raise ValueError(f"TDG needs an even batch [references; guides], got {model_output.shape[0]} rows")
        t = host_timestep(timestep) / num_train
        eta = float(schedule(t))
        if eta != 0.0:
            e_r, e_g = model_output.chunk(2)
            model_output = torch.cat(tie_pair(e_r, e_g, eta, granularity))
        record.append((t, eta))
        return original(model_output, timestep, sample, *args, **kwargs)

    tied.step = step
    return tied, record


def _as_list(prompt: str | list[str], name: str) -> list[str]:
    if isinstance(prompt, str):
        return [prompt]
    if not isinstance(prompt, (list, tuple)) or not prompt or not all(isinstance(p, str) for p in prompt):
        raise ValueError(f"{name} must be a string or a non-empty list of strings, got {prompt!r}")
    return list(prompt)


class TiedDiffusionPipeline(FluxPipeline):
    """FLUX text-to-image with Tied Diffusion Guidance; see the module docstring."""

    def check_tdg_inputs(
        self,
        reference_prompt: str | list[str],
        guide_prompt: str | list[str],
        granularity: str,
        flux_kwargs: dict[str, Any],
    ) -> tuple[list[str], list[str]]:
        """Validate TDG's own arguments; FluxPipeline.check_inputs checks the rest."""
        reference = _as_list(reference_prompt, "reference_prompt")
        guide = _as_list(guide_prompt, "guide_prompt")
        if len(reference) != len(guide):
            raise ValueError(
                f"reference_prompt and guide_prompt must have the same length, got {len(reference)} and {len(guide)}"
            )
        if granularity not in ("element", "token"):
            raise ValueError(f"granularity must be 'element' or 'token', got {granularity!r}")
        clash = [name for name in _OWN_ARGUMENTS if name in flux_kwargs]
        if clash:
            raise ValueError(f"pass prompts as reference_prompt / guide_prompt, not {clash}")
        return reference, guide

    def prepare_tied_latents(
        self,
        num_references: int,
        height: int,
        width: int,
        generator: torch.Generator | list[torch.Generator] | None,
        latents: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Packed initial latents (2 * num_references, seq, channels): guides copy references.

        ``generator`` is one generator or one per reference image (the G half reuses it).
        ``latents``, if given, are the reference half (num_references, seq, channels).
        """
        if latents is None:
            num_channels = self.transformer.config.in_channels // 4
            dtype = self.text_encoder_2.dtype if self.text_encoder_2 is not None else self.transformer.dtype
            latents, _ = self.prepare_latents(
                num_references, num_channels, height, width, dtype, self._execution_device, generator
            )
        elif latents.shape[0] != num_references:
            raise ValueError(
                f"latents must hold the reference half ({num_references} rows), got shape {tuple(latents.shape)}"
            )
        return torch.cat([latents, latents])

    def call_view(self, scheduler: Any) -> "TiedDiffusionPipeline":
        """A per-call shallow copy of the pipeline that runs with ``scheduler``.

        It shares every model, tokenizer and the prompt lock with ``self`` and owns its
        scheduler and FluxPipeline's per-call attributes, so a call on the view never
        writes to state another call reads. Callbacks receive the view as ``pipeline``.
        """
        self._prompt_lock()  # created on the shared pipeline first, so every view holds the same lock
        self._cache_lock()
        view = copy.copy(self)
        # Bypass DiffusionPipeline.__setattr__: the view's config keeps naming the scheduler class.
        vars(view)["scheduler"] = scheduler
        vars(view).pop("_tdg_running_view", None)
        return view

    def _prompt_lock(self) -> threading.Lock:
        return vars(self).setdefault("_tdg_prompt_lock", threading.Lock())

    def _cache_lock(self) -> threading.Lock:
        return vars(self).setdefault("_tdg_cache_lock", threading.Lock())

    @property
    def current_timestep(self) -> Any:
        """The timestep of the denoising step in progress (``None`` between calls).

        FluxPipeline's loop runs on a per-call view, so on the shared pipeline this reads
        the view of the call in progress while the transformer has a cache enabled (calls
        then run one at a time). diffusers' timestep-driven caches read it the documented
        way: ``PyramidAttentionBroadcastConfig(current_timestep_callback=lambda: pipe.current_timestep)``.
        """
        view = vars(self).get("_tdg_running_view")
        if view is not None:
            return view._current_timestep
        return vars(self).get("_current_timestep")

    @contextlib.contextmanager
    def cache_session(self, view: "TiedDiffusionPipeline") -> Iterator[None]:
        """One call at a time while the transformer has a diffusers cache enabled.

        A cache (``transformer.enable_cache(...)``: first-block, TaylorSeer, ...) keeps its
        state in the shared transformer, so concurrent calls would read each other's cached
        residuals. With a cache on, this serialises the calls, resets the cache's state
        before each (a call's images depend only on its own arguments, even after an
        interrupted one) and exposes the running ``view`` as :attr:`current_timestep`.
        Without a cache it does nothing: calls run concurrently.
        """
        if not getattr(self.transformer, "is_cache_enabled", False):
            yield
            return
        from diffusers.hooks import HookRegistry

        with self._cache_lock():
            HookRegistry.check_if_exists_or_initialize(self.transformer).reset_stateful_hooks(recurse=True)
            vars(self)["_tdg_running_view"] = view
            try:
                yield
            finally:
                vars(self).pop("_tdg_running_view", None)

    def encode_prompt(self, *args: Any, **kwargs: Any) -> Any:
        """FluxPipeline's ``encode_prompt``, one call at a time per pipeline.

        Fast tokenizers keep padding and truncation as mutable state that FluxPipeline
        changes between its two T5 tokenizations, so concurrent encodings could read each
        other's settings. The text encoders are a small part of a call; the denoising loop
        is not serialised.
        """
        with self._prompt_lock():
            return super().encode_prompt(*args, **kwargs)

    def default_max_sequence_length(self) -> int:
        """T5 prompt length when the caller gives none: the T5 tokenizer's ``model_max_length``
        capped at FluxPipeline's 512 (a model trained on short prompts, such as the world
        Flux, records its trained length there; padding it to 512 would leave the prompts
        out of distribution)."""
        length = getattr(self.tokenizer_2, "model_max_length", 512) if self.tokenizer_2 is not None else 512
        return int(min(512, length)) if isinstance(length, int) and length > 0 else 512

    def split_pair_output(self, images: Any, num_references: int) -> tuple[Any, Any]:
        """Split FluxPipeline's image batch into (reference images, guide images)."""
        return images[:num_references], images[num_references:]

    @torch.no_grad()
    def __call__(
        self,
        reference_prompt: str | list[str],
        guide_prompt: str | list[str],
        *,
        eta_schedule: Schedule | None = None,
        t_min: float = 0.2,
        t_max: float = 0.9,
        k: float = 10.0,
        granularity: Granularity = "element",
        num_images_per_prompt: int = 1,
        height: int | None = None,
        width: int | None = None,
        generator: torch.Generator | list[torch.Generator] | None = None,
        latents: torch.Tensor | None = None,
        negative_prompt: str | list[str] | None = None,
        output_type: str = "pil",
        return_dict: bool = True,
        **flux_kwargs: Any,
    ) -> TiedDiffusionPipelineOutput | tuple[Any, Any, list[float]]:
        """Generate tied (reference, guide) image pairs.

        Args:
            reference_prompt: ``c_R``, one string or n strings.
            guide_prompt: ``c_G``, same count as ``reference_prompt``.
            eta_schedule: any ``t -> eta`` callable; default ``EtaSchedule(t_min, t_max, k)``
                (SUB Eq. 4; paper: k = 10, t_min = 0.2, t_max = 0.9 colour/shape, 0.6 pattern).
            granularity: ``"element"`` (paper) or ``"token"`` (ties whole latent tokens).
            num_images_per_prompt: images per pair.
            generator: one generator, or ``n * num_images_per_prompt`` (one per reference image;
                the guide image reuses its reference's initial latents).
            latents: packed initial latents of the reference half, ``(n * num_images_per_prompt, seq, 64)``.
            negative_prompt: enables FluxPipeline's true CFG with ``true_cfg_scale > 1``; one
                string or one per pair. The tie acts after the CFG combination.
            flux_kwargs: passed to ``FluxPipeline.__call__`` (``guidance_scale``,
                ``num_inference_steps``, ``true_cfg_scale``, ``max_sequence_length``, ...).
        Returns:
            :class:`TiedDiffusionPipelineOutput`, or ``(reference_images, guide_images,
            eta_per_step)`` when ``return_dict=False``.
        """
        # 1. Check inputs
        reference, guide = self.check_tdg_inputs(reference_prompt, guide_prompt, granularity, flux_kwargs)
        schedule = eta_schedule if eta_schedule is not None else EtaSchedule(t_min=t_min, t_max=t_max, k=k)
        num_references = len(reference) * num_images_per_prompt
        flux_kwargs.setdefault("max_sequence_length", self.default_max_sequence_length())
        height = height or self.default_sample_size * self.vae_scale_factor
        width = width or self.default_sample_size * self.vae_scale_factor
        if negative_prompt is not None:
            negative = _as_list(negative_prompt, "negative_prompt")
            if len(negative) not in (1, len(reference)):
                raise ValueError(f"negative_prompt must be one string or one per pair, got {len(negative)}")
            negative_prompt = (negative * len(reference) if len(negative) == 1 else negative) * 2

        # 2. Shared initial latents: guide i starts where reference i starts
        tied_latents = self.prepare_tied_latents(num_references, height, width, generator, latents)

        # 3. FluxPipeline's own denoising on a per-call view whose private scheduler ties the pair
        scheduler, record = tied_scheduler(self.scheduler, schedule, granularity)
        view = self.call_view(scheduler)
        with self.cache_session(view):
            images = super(TiedDiffusionPipeline, view).__call__(
                prompt=reference + guide,
                negative_prompt=negative_prompt,
                num_images_per_prompt=num_images_per_prompt,
                height=height,
                width=width,
                latents=tied_latents,
                output_type=output_type,
                return_dict=False,
                **flux_kwargs,
            )[0]

        # 4. Split the pair
        reference_images, guide_images = self.split_pair_output(images, num_references)
        eta_per_step = [eta for _, eta in record]
        if not return_dict:
            return reference_images, guide_images, eta_per_step
        return TiedDiffusionPipelineOutput(
            reference_images=reference_images,
            guide_images=guide_images,
            eta_per_step=eta_per_step,
            t_per_step=[t for t, _ in record],
        )
