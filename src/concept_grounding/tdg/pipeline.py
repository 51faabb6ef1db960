"""``TiedDiffusionPipeline``: FLUX with Tied Diffusion Guidance (SUB, Bader et al., Sec. 3).

The pipeline subclasses diffusers' ``FluxPipeline`` and changes only what TDG changes
(:class:`TiedPipelineMixin`, shared with the FLUX.2 pipelines of :mod:`.pipeline_flux2`):

1. the reference prompts ``c_R`` and guide prompts ``c_G`` (or their precomputed
   embeddings) run as one batch ``[R_1..R_n, G_1..G_n]`` (each repeated
   ``num_images_per_prompt`` times), and every guide image starts from the same initial
   latents as its reference image (:meth:`TiedPipelineMixin.prepare_latents`);
2. at each step, the final guided prediction (after FLUX's distilled guidance and, if
   used, true classifier-free guidance) is tied per pair before the scheduler step
   (SUB Eqs. 3-6; :func:`~concept_grounding.tdg.tie.tie_pair`), with ``eta`` from the
   schedule of Eq. 4 at ``t = timestep / 1000``.

Step 2 happens in ``scheduler.step``, the one place that receives the final guided
``noise_pred`` on both of FluxPipeline's guidance paths. Each call runs FluxPipeline's own
loop on a *per-call view* of the pipeline (:meth:`TiedPipelineMixin.call_view`): a
shallow copy that shares every model (no extra memory) but owns a private copy of the
scheduler whose ``step`` ties the pair (:func:`tied_scheduler`), and owns FluxPipeline's
per-call attributes (``_guidance_scale``, ``_interrupt``, ``_current_timestep``, ...),
which are published to the pipeline when the call ends (``pipe.guidance_scale``,
``pipe.num_timesteps`` read as after a FluxPipeline call). The shared pipeline is never
patched, so one pipeline can serve concurrent calls from threads, each giving exactly the
images it gives alone. Prompt encoding is serialised per pipeline (fast tokenizers switch
their padding settings in place between calls); the denoising steps run in parallel.
Encoding, latents, timesteps and decoding are FluxPipeline's own. Not thread-safe: model
CPU offloading (its hooks move shared modules between devices).

``__call__`` lists every FluxPipeline argument it accepts; ``prompt`` and the prompt
embeddings become one argument per side (:data:`RENAMED_ARGUMENTS`), and the few it refuses
are in :data:`REFUSED_ARGUMENTS` with the reason. The output's ``images`` are the references.

diffusers' caches and ``torch.compile`` act on the transformer, which sees the batch
``[references; guides]`` of the tied latents at every step, so they work unchanged:
``pipe.transformer.enable_cache(FirstBlockCacheConfig(threshold=0.2))`` or
``pipe.transformer.compile_repeated_blocks()`` (see :mod:`.acceleration`, which the
``generate`` job and its ``--cache`` / ``--compile`` use). A cache keeps state in the
shared transformer, so while one is enabled calls run one at a time
(:meth:`TiedPipelineMixin.cache_session`).

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
    out.images[0].save("blue_jay_yellow_crown.png")
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from diffusers import FluxPipeline
from diffusers.image_processor import PipelineImageInput

from .pipeline_output import TiedDiffusionPipelineOutput
from .schedule import EtaSchedule, Schedule
from .tie import Granularity, tie_batch

__all__ = ["TiedDiffusionPipeline", "TiedPipelineMixin", "tied_scheduler", "REFUSED_ARGUMENTS",
           "RENAMED_ARGUMENTS"]

#: FluxPipeline's (and Flux2Pipeline's) per-call state: set on the call's view, published to
#: the shared pipeline when the call ends (FluxPipeline sets it on ``self`` during its call).
CALL_STATE = ("_guidance_scale", "_joint_attention_kwargs", "_attention_kwargs", "_num_timesteps",
              "_current_timestep", "_interrupt")

#: Base-pipeline arguments TDG replaces with one per side of the pair.
RENAMED_ARGUMENTS: dict[str, tuple[str, str]] = {
    "prompt": ("reference_prompt", "guide_prompt"),
    "prompt_embeds": ("reference_prompt_embeds", "guide_prompt_embeds"),
    "pooled_prompt_embeds": ("reference_pooled_prompt_embeds", "guide_pooled_prompt_embeds"),
}

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


def _as_list(prompt: str | list[str], name: str) -> list[str]:
    if isinstance(prompt, str):
        return [prompt]
    if not isinstance(prompt, (list, tuple)) or not prompt or not all(isinstance(p, str) for p in prompt):
        raise ValueError(f"{name} must be a string or a non-empty list of strings, got {prompt!r}")
    return list(prompt)


@dataclass(frozen=True)
class PairBatch:
    """The base pipeline's prompt arguments for the batch ``[references; guides]``.

    Attributes:
        pairs: n, the number of (reference, guide) prompt pairs.
        prompt: ``[R_1..R_n, G_1..G_n]``, or ``None`` when embeddings were given.
        embeds: base argument name (``"prompt_embeds"``, ...) -> ``[reference; guide]`` rows,
            (2n, ...); empty when prompts were given.
    """

    pairs: int
    prompt: list[str] | None
    embeds: dict[str, torch.Tensor]


def pair_batch(reference_prompt: str | list[str] | None, guide_prompt: str | list[str] | None,
               embeds: Mapping[str, tuple[torch.Tensor | None, torch.Tensor | None]]) -> PairBatch:
    """Check TDG's two prompts (or their precomputed embeddings) and stack them as one batch.

    Args:
        reference_prompt, guide_prompt: ``c_R`` and ``c_G``: one string or n strings each.
        embeds: base argument name -> (reference side, guide side), e.g. ``{"prompt_embeds":
            (reference_prompt_embeds, guide_prompt_embeds)}``; each (n, ...) or ``None``. Every
            name of the mapping is then required, both sides of it, with equal shapes; they
            replace the prompts.
    Raises:
        ValueError: one line naming the argument.

    >>> pair_batch(["a red bird", "a blue bird"], ["a bird", "a bird"], {}).prompt
    ['a red bird', 'a blue bird', 'a bird', 'a bird']
    >>> pair_batch(None, None, {"prompt_embeds": (torch.zeros(1, 4, 8), torch.ones(1, 4, 8))}).embeds["prompt_embeds"].shape
    torch.Size([2, 4, 8])
    >>> pair_batch(None, None, {"prompt_embeds": (torch.zeros(1, 4, 8), torch.ones(1, 5, 8))})
    Traceback (most recent call last):
    ...
    ValueError: reference_prompt_embeds and guide_prompt_embeds must have the same shape, got (1, 4, 8) and (1, 5, 8)
    """
    given = {name: pair for name, pair in embeds.items() if pair[0] is not None or pair[1] is not None}
    if not given:
        if reference_prompt is None or guide_prompt is None:
            raise ValueError("reference_prompt and guide_prompt are required (or reference_prompt_embeds and "
                             "guide_prompt_embeds)")
        reference, guide = _as_list(reference_prompt, "reference_prompt"), _as_list(guide_prompt, "guide_prompt")
        if len(reference) != len(guide):
            raise ValueError(f"reference_prompt and guide_prompt must have the same length, got {len(reference)} "
                             f"and {len(guide)}")
        return PairBatch(len(reference), reference + guide, {})
    if reference_prompt is not None or guide_prompt is not None:
        raise ValueError("give reference_prompt / guide_prompt or their precomputed embeddings, not both")
    missing = [RENAMED_ARGUMENTS[name] for name in embeds if name not in given]
    if missing:
        raise ValueError(f"{' and '.join(missing[0])} are required with "
                         f"{' / '.join(RENAMED_ARGUMENTS[next(iter(given))])}")
    stacked = {}
    for name, (reference, guide) in given.items():
        r_name, g_name = RENAMED_ARGUMENTS[name]
        if reference is None or guide is None:
            raise ValueError(f"{r_name} and {g_name} go together: got only {r_name if guide is None else g_name}")
        if reference.shape != guide.shape:
            raise ValueError(f"{r_name} and {g_name} must have the same shape, got {tuple(reference.shape)} and "
                             f"{tuple(guide.shape)}")
        stacked[name] = torch.cat([reference, guide])
    pairs = {pair[0].shape[0] for pair in given.values()}
    if len(pairs) != 1:
        raise ValueError(f"every precomputed embedding must have one row per pair, got row counts {sorted(pairs)}")
    return PairBatch(pairs.pop(), None, stacked)


def pair_negative(negative: Any, pairs: int, name: str) -> Any:
    """A per-pair negative (one string, n strings, or (n, ...) embeddings) for both halves of the batch.

    Returns ``None``, 2n strings or (2n, ...) rows: pair ``i``'s negative serves ``R_i`` and ``G_i``.

    >>> pair_negative("blurry", 2, "negative_prompt")
    ['blurry', 'blurry', 'blurry', 'blurry']
    >>> pair_negative(["dark", "blurry"], 2, "negative_prompt")
    ['dark', 'blurry', 'dark', 'blurry']
    """
    if negative is None:
        return None
    if isinstance(negative, torch.Tensor):
        if negative.shape[0] != pairs:
            raise ValueError(f"{name} must have one row per pair ({pairs}), got shape {tuple(negative.shape)}")
        return torch.cat([negative, negative])
    texts = _as_list(negative, name)
    if len(texts) not in (1, pairs):
        raise ValueError(f"{name} must be one string or one per pair ({pairs}), got {len(texts)}")
    return (texts * pairs if len(texts) == 1 else texts) * 2


def serialised_encode_prompt(encode_prompt: Callable[..., Any]) -> Callable[..., Any]:
    """The base pipeline's ``encode_prompt``, one call at a time per pipeline (``functools.wraps``:
    same name, docstring and ``inspect.signature``).

    Fast tokenizers keep padding and truncation as mutable state that FluxPipeline changes
    between its two T5 tokenizations, so concurrent encodings could read each other's
    settings. The text encoders are a small part of a call; the denoising loop is not serialised.
    """

    @functools.wraps(encode_prompt)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._prompt_lock():
            return encode_prompt(self, *args, **kwargs)

    return wrapper


class TiedPipelineMixin:
    """What TDG adds to a Flux-family text-to-image pipeline; mixed in before the base class
    (``class TiedDiffusionPipeline(TiedPipelineMixin, FluxPipeline)``). See the module docstring.

    The base pipeline's ``__call__`` runs unchanged on a per-call view (:meth:`call_view`) whose
    scheduler ties the pair (:func:`tied_scheduler`) and whose :meth:`prepare_latents` gives every
    guide its reference's initial latents; :meth:`tied_call` is the whole of it.
    """

    def call_view(self, scheduler: Any, reference_rows: int | None = None) -> Any:
        """A per-call shallow copy of the pipeline that runs with ``scheduler``.

        It shares every model, tokenizer and lock with ``self`` and owns its scheduler and the
        base pipeline's per-call attributes (:data:`CALL_STATE`), so a call on the view never
        writes to state another call reads. Callbacks receive the view as ``pipeline``.
        ``reference_rows`` (n * num_images_per_prompt) switches on the tied initial latents.
        """
        self._prompt_lock()  # created on the shared pipeline first, so every view holds the same locks
        self._cache_lock()
        self._state_lock()
        view = copy.copy(self)
        # Bypass DiffusionPipeline.__setattr__: the view's config keeps naming the scheduler class.
        vars(view)["scheduler"] = scheduler
        vars(view).pop("_tdg_running_view", None)
        vars(view)["_tdg_reference_rows"] = reference_rows
        return view

    def _prompt_lock(self) -> threading.Lock:
        return vars(self).setdefault("_tdg_prompt_lock", threading.Lock())

    def _cache_lock(self) -> threading.Lock:
        return vars(self).setdefault("_tdg_cache_lock", threading.Lock())

    def _state_lock(self) -> threading.Lock:
        return vars(self).setdefault("_tdg_state_lock", threading.Lock())

    def publish_call_state(self, view: Any) -> None:
        """Copy the view's :data:`CALL_STATE` (``guidance_scale``, ``num_timesteps``, ...) to the
        shared pipeline, as the base pipeline leaves it after a call; with concurrent calls the
        last to finish wins, as with the base pipeline."""
        with self._state_lock():
            for name in CALL_STATE:
                if name in vars(view):
                    vars(self)[name] = vars(view)[name]

    @property
    def current_timestep(self) -> Any:
        """The timestep of the denoising step in progress (``None`` between calls).

        The base pipeline's loop runs on a per-call view, so on the shared pipeline this reads
        the view of the call in progress while the transformer has a cache enabled (calls
        then run one at a time). diffusers' timestep-driven caches read it the documented
        way: ``PyramidAttentionBroadcastConfig(current_timestep_callback=lambda: pipe.current_timestep)``.
        """
        view = vars(self).get("_tdg_running_view")
        if view is not None:
            return view._current_timestep
        return vars(self).get("_current_timestep")

    @contextlib.contextmanager
    def cache_session(self, view: Any) -> Iterator[None]:
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
        return tuple(torch.cat([x, x]) if isinstance(x, torch.Tensor) and x.ndim >= 3 and x.shape[0] == rows else x
                     for x in prepared)

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

    def tied_call(self, *, reference_rows: int, eta_schedule: Schedule, granularity: Granularity,
                  return_dict: bool, **base_kwargs: Any) -> TiedDiffusionPipelineOutput | tuple[Any, Any, list[float]]:
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
        return TiedDiffusionPipelineOutput(images=reference_images, guide_images=guide_images,
                                           eta_per_step=eta_per_step, t_per_step=[t for t, _ in record])


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
        batch = pair_batch(reference_prompt, guide_prompt, {
            "prompt_embeds": (reference_prompt_embeds, guide_prompt_embeds),
            "pooled_prompt_embeds": (reference_pooled_prompt_embeds, guide_pooled_prompt_embeds)})
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
            negative_pooled_prompt_embeds=pair_negative(negative_pooled_prompt_embeds, batch.pairs,
                                                        "negative_pooled_prompt_embeds"),
            output_type=output_type,
            joint_attention_kwargs=joint_attention_kwargs,
            callback_on_step_end=callback_on_step_end,
            callback_on_step_end_tensor_inputs=callback_on_step_end_tensor_inputs,
            max_sequence_length=max_sequence_length or self.default_max_sequence_length(),
        )
