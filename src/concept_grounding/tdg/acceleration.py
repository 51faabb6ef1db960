"""Faster TDG through diffusers' own extension points: transformer caches and ``torch.compile``.

The transformer sees the tied batch ``[references; guides]`` at every step, so diffusers' caches
(``transformer.enable_cache``) and regional compilation apply to TDG unchanged. :class:`Acceleration`
names the two knobs once, from the command line (``--cache NAME[:option=value,...]``, ``--compile``)
to the ``generate`` manifest. Which cache works with TDG, and why: docs/tdg.md.

>>> TransformerCache.parse("first-block:threshold=0.2")
TransformerCache(name='first-block', options=(('threshold', 0.2),))
>>> TransformerCache.parse("first-block").manifest()
{'name': 'first-block', 'threshold': 0.05}
>>> Acceleration().manifest(), Acceleration(compile=True).manifest()
({'cache': None, 'compile': False}, {'cache': None, 'compile': 'compile_repeated_blocks'})
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..errors import UsageError, suggest

__all__ = ["CACHES", "TransformerCache", "Acceleration", "accelerated"]


@dataclass(frozen=True)
class CacheKind:
    """How one of diffusers' cache configs is built for a TDG call.

    Attributes:
        config: the class name in ``diffusers`` (``"FirstBlockCacheConfig"``).
        defaults: options that differ from diffusers' defaults when the user gives none.
        forced: options TDG needs whatever the user gives (with the reason in ``why``).
        timestep_callback: the config reads the running timestep (``current_timestep_callback``).
        steps: the config needs ``num_inference_steps``.
        why: one line on how it serves TDG.
        fails_on: transformer classes whose blocks diffusers' hook for this cache cannot run
            (measured with diffusers 0.42: an error inside the hook at the first step);
            :func:`accelerated` refuses them in one line before any step.
    """

    config: str
    defaults: tuple[tuple[str, Any], ...] = ()
    forced: tuple[tuple[str, Any], ...] = ()
    timestep_callback: bool = False
    steps: bool = False
    why: str = ""
    fails_on: tuple[str, ...] = ()


def _flux_mag_ratios() -> Any:
    from diffusers.hooks.mag_cache import FLUX_MAG_RATIOS

    return FLUX_MAG_RATIOS


#: ``--cache`` name -> how it is built (the table in docs/tdg.md).
CACHES: Mapping[str, CacheKind] = MappingProxyType(
    {
        "first-block": CacheKind(
            "FirstBlockCacheConfig",
            why="skips the remaining blocks while the first block's residual barely moves",
            fails_on=("Flux2Transformer2DModel",),
        ),
        "taylorseer": CacheKind(
            "TaylorSeerCacheConfig", why="forecasts block outputs with a Taylor series between full steps"
        ),
        "pyramid-attention": CacheKind(
            "PyramidAttentionBroadcastConfig",
            defaults=(("spatial_attention_block_skip_range", 2),),
            timestep_callback=True,
            why="reuses attention outputs inside a timestep range",
        ),
        "faster": CacheKind(
            "FasterCacheConfig",
            forced=(("is_guidance_distilled", True),),
            timestep_callback=True,
            why="reuses attention outputs; its CFG-batch split is off (TDG's batch is [references; guides])",
            fails_on=("Flux2Transformer2DModel",),
        ),
        "mag": CacheKind(
            "MagCacheConfig",
            defaults=(("mag_ratios", "FLUX_MAG_RATIOS"),),
            steps=True,
            why="skips blocks by accumulated residual magnitude ratios (default: FLUX.1-dev's)",
        ),
        "text-kv": CacheKind("TextKVCacheConfig", why="computes the text keys and values once per call (lossless)"),
    }
)


def parse_option_value(text: str) -> Any:
    """A ``--cache`` option value: int, float, ``true``/``false``, ``none``, a ``(a, b)``
    pair of numbers, or the string itself.

    >>> [parse_option_value(v) for v in ("2", "0.2", "true", "none", "(100, 800)", "float32")]
    [2, 0.2, True, None, (100, 800), 'float32']
    """
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    if lowered.startswith("(") and lowered.endswith(")"):
        return tuple(parse_option_value(part) for part in lowered[1:-1].split(",") if part.strip())
    for kind in (int, float):
        try:
            return kind(lowered)
        except ValueError:
            pass
    return text.strip()


def _plain(value: Any) -> Any:
    """A config field as a JSON value (dtypes and tensors by name and values)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


@dataclass(frozen=True)
class TransformerCache:
    """One of diffusers' transformer caches, by its ``--cache`` name and options.

    Args:
        name: a key of :data:`CACHES`.
        options: ``(field, value)`` pairs of the diffusers config (``threshold``, ...);
            ``*_dtype`` values are torch dtype names (``"float32"``).
    """

    name: str
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.name not in CACHES:
            raise UsageError(
                f"unknown cache {self.name!r}{suggest(self.name, CACHES)}",
                argument="--cache",
                hint=f"choose from {', '.join(CACHES)}",
            )

    @classmethod
    def parse(cls, text: str) -> TransformerCache:
        """``NAME`` or ``NAME:option=value,option=value`` (``--cache``)."""
        name, _, rest = text.partition(":")
        options = []
        for item in filter(None, (part.strip() for part in _split_options(rest))):
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise UsageError(
                    f"expected option=value, got {item!r}",
                    argument="--cache",
                    hint="e.g. --cache first-block:threshold=0.2",
                )
            options.append((key.strip(), parse_option_value(value)))
        cache = cls(name.strip(), tuple(options))
        cache.resolved_options()  # unknown options fail here, before any model loads
        return cache

    @property
    def kind(self) -> CacheKind:
        return CACHES[self.name]

    def resolved_options(self, num_inference_steps: int | None = None) -> dict[str, Any]:
        """Every public field of the diffusers config this cache builds, as given or defaulted
        (callbacks left out); ``num_inference_steps`` fills the field of caches that need it."""
        import diffusers

        config_cls = getattr(diffusers, self.kind.config)
        fields = {f.name: f for f in dataclasses.fields(config_cls) if not f.name.startswith("_")}
        given = dict(self.options)
        unknown = sorted(set(given) - set(fields))
        if unknown:
            public = sorted(k for k in fields if not k.endswith("callback"))
            raise UsageError(
                f"{self.kind.config} has no option {unknown[0]!r}",
                argument="--cache",
                hint=f"options of {self.name}: {', '.join(public) or '(none)'}",
            )
        forced, defaults = dict(self.kind.forced), dict(self.kind.defaults)
        for key, value in forced.items():
            if key in given and given[key] != value:
                raise UsageError(
                    f"{self.name}: {key} must stay {value!r} under TDG ({self.kind.why})", argument="--cache"
                )
        out: dict[str, Any] = {}
        for key, f in fields.items():
            if key.endswith("callback"):
                continue
            if key in given:
                out[key] = given[key]
            elif key in forced:
                out[key] = forced[key]
            elif key in defaults:
                out[key] = defaults[key]
            elif key == "num_inference_steps" and self.kind.steps and num_inference_steps is not None:
                out[key] = int(num_inference_steps)
            elif f.default is not dataclasses.MISSING:
                out[key] = f.default
            elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
                out[key] = f.default_factory()  # type: ignore[misc]
        return out

    def manifest(self, num_inference_steps: int | None = None) -> dict[str, Any]:
        """The cache as plain JSON values: its name and every resolved option."""
        return {"name": self.name, **{k: _plain(v) for k, v in self.resolved_options(num_inference_steps).items()}}

    def config(self, pipe: Any, num_inference_steps: int | None = None) -> Any:
        """The diffusers config for ``pipe`` (a timestep callback reads ``pipe.current_timestep``)."""
        import diffusers
        import torch

        options = self.resolved_options(num_inference_steps)
        for key, value in options.items():
            if key.endswith("dtype") and isinstance(value, str):
                options[key] = getattr(torch, value.removeprefix("torch."))
        if options.get("mag_ratios") == "FLUX_MAG_RATIOS":
            options["mag_ratios"] = _flux_mag_ratios()
        if self.kind.timestep_callback:
            options["current_timestep_callback"] = lambda: pipe.current_timestep
        return getattr(diffusers, self.kind.config)(**options)


def _split_options(text: str) -> list[str]:
    """Split ``a=1,b=(2, 3)`` at the commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return parts


@dataclass(frozen=True)
class Acceleration:
    """The speed-ups of a TDG run: a transformer cache and/or ``torch.compile``.

    Args:
        cache: a :class:`TransformerCache`, or ``None``.
        compile: compile the transformer's repeated blocks (diffusers' regional compilation).
    """

    cache: TransformerCache | None = None
    compile: bool = False

    def manifest(self, num_inference_steps: int | None = None) -> dict[str, Any]:
        """``{"cache": ..., "compile": ...}`` as the ``generate`` manifest records them."""
        return {
            "cache": self.cache.manifest(num_inference_steps) if self.cache is not None else None,
            "compile": "compile_repeated_blocks" if self.compile else False,
        }

    @property
    def label(self) -> str:
        """``"plain"``, ``"first-block"``, ``"compiled"`` or ``"first-block + compiled"``."""
        parts = ([self.cache.name] if self.cache is not None else []) + (["compiled"] if self.compile else [])
        return " + ".join(parts) or "plain"


@contextlib.contextmanager
def accelerated(pipe: Any, acceleration: Acceleration, num_inference_steps: int | None = None) -> Iterator[Any]:
    """Enable ``acceleration`` on ``pipe.transformer`` for the ``with`` block; yields the pipeline.

    The cache is enabled with ``transformer.enable_cache`` and disabled on exit (an error
    inside the block propagates). Compilation wraps the repeated blocks in place and stays
    (``torch.compile`` keeps its compiled code for later calls of the same shapes).

    Raises:
        ValueError: the transformer already has a cache enabled.
    """
    transformer = pipe.transformer
    if acceleration.compile and not getattr(transformer, "_tdg_compiled", False):
        transformer.compile_repeated_blocks()
        transformer._tdg_compiled = True  # a second ``accelerated`` keeps the compiled blocks
    if acceleration.cache is None:
        yield pipe
        return
    kind, model = acceleration.cache.kind, type(transformer).__name__
    if model in kind.fails_on:
        runs = [name for name, other in CACHES.items() if model not in other.fails_on]
        raise UsageError(
            f"the {acceleration.cache.name} cache does not run on {model} (diffusers' hook fails on its blocks)",
            argument="--cache",
            hint=f"choose from {', '.join(runs)}",
        )
    transformer.enable_cache(acceleration.cache.config(pipe, num_inference_steps))
    try:
        yield pipe
    finally:
        transformer.disable_cache()
