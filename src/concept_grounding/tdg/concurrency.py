"""Per-call concurrency of the TDG pipelines: one pipeline serves concurrent calls from threads.

Each call runs the base pipeline's loop on a *per-call view* (:meth:`PerCallConcurrency.call_view`):
a shallow copy that shares every model (no extra memory) but owns its scheduler and the base
pipeline's per-call attributes (:data:`CALL_STATE`), which are published to the shared pipeline
when the call ends (:meth:`PerCallConcurrency.publish_call_state`), so ``pipe.guidance_scale`` and
``pipe.num_timesteps`` read as after a FluxPipeline call. Three locks, created on the shared
pipeline and held by every view: prompt encoding runs one call at a time
(:func:`serialised_encode_prompt`: fast tokenizers switch their padding in place), a diffusers
transformer cache runs the calls one at a time (:meth:`PerCallConcurrency.cache_session`), and
publishing the state is atomic. The denoising steps of calls without a cache run in parallel.
Not thread-safe: model CPU offloading (its hooks move shared modules between devices).

:class:`~.pipeline.TiedPipelineMixin` builds on it; :mod:`.pipeline` keeps the tie and the latents.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["CALL_STATE", "PerCallConcurrency", "serialised_encode_prompt"]

#: FluxPipeline's (and Flux2Pipeline's) per-call state: set on the call's view, published to
#: the shared pipeline when the call ends (FluxPipeline sets it on ``self`` during its call).
CALL_STATE = (
    "_guidance_scale",
    "_joint_attention_kwargs",
    "_attention_kwargs",
    "_num_timesteps",
    "_current_timestep",
    "_interrupt",
)


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


class PerCallConcurrency:
    """Per-call views, their locks, the cache session and the published call state of a pipeline
    (module docstring); a mixin listed before the diffusers base pipeline."""

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
