"""Which models a Space visitor may make the server load: a list fixed at launch.

A visitor may pick only the built-in models or those the operator listed (``--tdg-model``,
``--clip-model`` or the ``CONCEPT_GROUNDING_*`` environment variables, read once at launch);
``--allow-any-model`` lifts the restriction. The check runs on the server, so an API client is
refused like the page. Visitor-chosen models live in a bounded LRU cache
(:class:`~.resources.ResourceStore`). The flags and variables: docs/guide/errors.md, "Space model
policy", and the Space's README.

>>> policy = ModelPolicy(clip_models=("openai/clip-vit-base-patch32",))
>>> policy.check("clip", " openai/clip-vit-base-patch32 ")
'openai/clip-vit-base-patch32'
>>> policy.check("clip", "/etc")
Traceback (most recent call last):
...
concept_grounding.web.visitor_input.UserInputError: This Space does not load the CLIP model '/etc'. Choose one of:
    openai/clip-vit-base-patch32 (the operator lists models with --clip-model, or allows any with
    --allow-any-model).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .inputs import UserInputError

__all__ = [
    "ModelKind",
    "ModelPolicy",
    "DEFAULT_CACHE_SIZE",
    "MAX_NAME_LENGTH",
    "TDG_MODELS_ENV",
    "CLIP_MODELS_ENV",
    "ALLOW_ANY_ENV",
    "CACHE_SIZE_ENV",
]

ModelKind = Literal["tdg", "clip"]

#: Visitor-chosen models kept loaded at once, unless configured.
DEFAULT_CACHE_SIZE = 2
#: Longest model name accepted from a visitor (Hub ids are at most 96 characters).
MAX_NAME_LENGTH = 256

TDG_MODELS_ENV = "CONCEPT_GROUNDING_TDG_MODEL"
CLIP_MODELS_ENV = "CONCEPT_GROUNDING_CLIP_MODELS"
ALLOW_ANY_ENV = "CONCEPT_GROUNDING_ALLOW_ANY_MODEL"
CACHE_SIZE_ENV = "CONCEPT_GROUNDING_MODEL_CACHE"

_FLAGS = {"tdg": "--tdg-model", "clip": "--clip-model"}
_WHAT = {"tdg": "Flux model", "clip": "CLIP model"}
_TRUE = ("1", "true", "yes", "on")


def split_names(text: str | None) -> tuple[str, ...]:
    """``"a, b,,c "`` -> ``("a", "b", "c")``: a comma-separated list, blanks dropped, order kept.

    >>> split_names(" a, b,,a ")
    ('a', 'b')
    """
    names = [part.strip() for part in (text or "").split(",")]
    return tuple(dict.fromkeys(n for n in names if n))


@dataclass(frozen=True)
class ModelPolicy:
    """The models a visitor may choose, fixed when the Space starts.

    Attributes:
        tdg_models: Flux models offered besides the built-in one (local folders or Hub ids).
        clip_models: CLIP models offered besides the default world CLIP.
        allow_any: accept any name (the dropdowns then take typed values too).
        cache_size: visitor-chosen models kept loaded at once (LRU), >= 1.
    """

    tdg_models: tuple[str, ...] = ()
    clip_models: tuple[str, ...] = ()
    allow_any: bool = False
    cache_size: int = DEFAULT_CACHE_SIZE

    def __post_init__(self) -> None:
        object.__setattr__(self, "tdg_models", tuple(dict.fromkeys(n.strip() for n in self.tdg_models if n.strip())))
        object.__setattr__(self, "clip_models", tuple(dict.fromkeys(n.strip() for n in self.clip_models if n.strip())))
        if isinstance(self.cache_size, bool) or not isinstance(self.cache_size, int) or self.cache_size < 1:
            raise ValueError(f"cache_size must be an integer >= 1, got {self.cache_size!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ModelPolicy:
        """The policy the environment variables describe: ``CONCEPT_GROUNDING_TDG_MODEL`` and
        ``CONCEPT_GROUNDING_CLIP_MODELS`` (extra models, comma-separated),
        ``CONCEPT_GROUNDING_ALLOW_ANY_MODEL=1`` (any name) and ``CONCEPT_GROUNDING_MODEL_CACHE``
        (the cache size, default 2).

        Raises:
            ValueError: ``CONCEPT_GROUNDING_MODEL_CACHE`` is not an integer >= 1.
        """
        env = os.environ if environ is None else environ
        text = env.get(CACHE_SIZE_ENV, "").strip()
        try:
            cache_size = int(text) if text else DEFAULT_CACHE_SIZE
        except ValueError:
            raise ValueError(f"{CACHE_SIZE_ENV} must be an integer >= 1, got {text!r}") from None
        if cache_size < 1:
            raise ValueError(f"{CACHE_SIZE_ENV} must be an integer >= 1, got {text!r}")
        from ..tdg.zerogpu import gpu_tdg_models

        return cls(
            # on a GPU Space (ZeroGPU or CUDA) FLUX.1-dev and FLUX.2 [klein] are offered too; on a CPU nothing changes
            tdg_models=split_names(env.get(TDG_MODELS_ENV)) + gpu_tdg_models(env),
            clip_models=split_names(env.get(CLIP_MODELS_ENV)),
            allow_any=env.get(ALLOW_ANY_ENV, "").strip().lower() in _TRUE,
            cache_size=cache_size,
        )

    def offered(self, kind: ModelKind) -> tuple[str, ...]:
        """The names listed at launch for ``kind`` (``"tdg"`` or ``"clip"``)."""
        if kind not in _FLAGS:
            raise ValueError(f"kind must be 'tdg' or 'clip', got {kind!r}")
        return self.tdg_models if kind == "tdg" else self.clip_models

    def check(self, kind: ModelKind, name: str) -> str:
        """``name`` stripped, if a visitor may load it as a ``kind`` model.

        Raises:
            UserInputError: the name is not offered (and ``allow_any`` is off), or it is
                longer than :data:`MAX_NAME_LENGTH` / contains control characters.
        """
        offered = self.offered(kind)
        clean = (name or "").strip()
        if not clean:
            raise UserInputError(f"Name a {_WHAT[kind]}.")
        if len(clean) > MAX_NAME_LENGTH or any(ord(c) < 32 for c in clean):
            raise UserInputError(f"That {_WHAT[kind]} name is not a valid name.")
        if clean in offered or self.allow_any:
            return clean
        listed = ", ".join(offered) if offered else "none besides the built-in model"
        raise UserInputError(
            f"This Space does not load the {_WHAT[kind]} {clean!r}. Choose one of: {listed} (the operator lists "
            f"models with {_FLAGS[kind]}, or allows any with --allow-any-model)."
        )
