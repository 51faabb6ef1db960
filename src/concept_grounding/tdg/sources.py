"""What a ``generate`` run samples and from which pairings: Flux models and pairing sources.

A *Flux source* resolves a model's settings without loading torch (a bad name fails
within seconds): :class:`PretrainedFlux`, the world Flux
(:class:`concept_grounding.worldflux.source.WorldFlux`) and the tiny random one of the tests
and the demo (:class:`concept_grounding.tdg.tiny.TinyFlux`). A *pairing source* plans the
pairings: :class:`ClassTablePairings` (from class-level labels: the bird world's, via
:func:`concept_grounding.worldflux.source.world_pairings`, or CUB's, via
:func:`concept_grounding.loaders.class_table.cub_class_table`) or :class:`PairingsFile`.
The sources of other packages live there: ``tdg`` imports no world, loader or test fixture
(the import-linter contracts in ``pyproject.toml``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import UsageError, named
from .plan import Pairing, plan_pairings, read_pairings

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FluxModel", "FluxSource", "PretrainedFlux", "PairingSource", "ClassTablePairings", "PairingsFile"]

#: Denoising steps of a Flux model that declares none (FLUX.1-dev's usual 28).
DEFAULT_STEPS = 28

# ---------------------------------------------------------------------------- models


@dataclass(frozen=True)
class FluxModel:
    """A resolved Flux model: what the manifest records about it, and how to load it.

    Attributes:
        name: recorded as the manifest's ``model`` (a resolved Hub id or folder, ``"world"``, ...).
        dtype: recorded as the manifest's ``dtype`` (``"float32"``, ``"bfloat16"``, ...).
        default_size: image side in pixels when the config gives none.
        max_sequence_length: T5 prompt length in tokens.
        load: builds the :class:`~concept_grounding.tdg.TiedDiffusionPipeline` (torch loads here).
        extra: further keyword arguments of every pipeline call (e.g. true CFG).
        default_steps: denoising steps when the config gives none (the model's own, e.g. its card's).
        uses_guidance: whether the transformer reads ``guidance_scale`` (a guidance embedding,
            FLUX.1 [dev]'s distilled guidance); when not, the manifest does not record it.
    """

    name: str
    dtype: str
    default_size: int
    max_sequence_length: int
    load: Callable[[], Any] = field(compare=False, repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict)
    default_steps: int = DEFAULT_STEPS
    uses_guidance: bool = True

    def call_kwargs(self, size: int) -> dict[str, Any]:
        """The arguments of every call of this model at side ``size``: ``height``, ``width``,
        ``max_sequence_length`` and :attr:`extra`.

        >>> FluxModel("m", "float32", 32, 24, load=lambda: None, extra={"true_cfg_scale": 4.0}).call_kwargs(32)
        {'height': 32, 'width': 32, 'max_sequence_length': 24, 'true_cfg_scale': 4.0}
        """
        return {"height": size, "width": size, "max_sequence_length": self.max_sequence_length, **self.extra}


class FluxSource(Protocol):
    """Resolves a Flux model's settings without loading torch; a bad name raises ``UsageError``."""

    def resolve(self) -> FluxModel: ...


def check_pipeline_class(folder: str, argument: str) -> None:
    """Fail in one line, before torch loads, when ``folder``'s ``model_index.json`` names a pipeline
    class TDG does not support (:data:`~.loading.TIED_PIPELINES`); a Hub id not yet on disk passes
    (its loader checks the same)."""
    import json

    from .loading import TIED_PIPELINES

    index = Path(folder) / "model_index.json"
    if not index.is_file():
        return
    name = json.loads(index.read_text()).get("_class_name")
    if name not in TIED_PIPELINES:
        supported = ", ".join(n for n in TIED_PIPELINES if not n.startswith("Tied"))
        raise UsageError(
            f"{folder} holds a {name}, which TDG does not support",
            argument=argument,
            hint=f"give a folder or Hub id of a {supported}",
        )


@dataclass(frozen=True)
class PretrainedFlux:
    """A FLUX.1, FLUX.2 [dev] or FLUX.2 [klein] checkpoint: Hub id or folder, resolved by
    :func:`concept_grounding.hub.resolve_model_spec` (local, cached, or a clear error within seconds),
    loaded as its family's TDG pipeline (:func:`~.loading.load_flux_pipeline`) in ``dtype``; 1024 px, 512 tokens.

    Args:
        name: e.g. ``"black-forest-labs/FLUX.1-dev"`` or a folder.
        dtype: ``"bfloat16"``, ``"float16"`` or ``"float32"``.
        argument: the argument that errors about ``name`` name.
    """

    name: str
    dtype: str = "bfloat16"
    argument: str = "--model"

    def resolve(self) -> FluxModel:
        from ..hub import resolve_model_spec

        resolved, dtype = resolve_model_spec(self.name, self.argument, family="hub").target, self.dtype
        check_pipeline_class(resolved, self.argument)

        def load() -> Any:
            from .loading import load_flux_pipeline

            return load_flux_pipeline(resolved, dtype)

        return FluxModel(resolved, dtype, 1024, 512, load, uses_guidance=transformer_uses_guidance(resolved))


def transformer_uses_guidance(model: str) -> bool:
    """Whether the transformer of ``model`` (a folder, or a Hub id in the local cache) has a
    guidance embedding (its ``transformer/config.json``'s ``guidance_embeds``); ``True`` when
    that file cannot be read without the network (``guidance_scale`` is then recorded)."""
    import json

    config = Path(model) / "transformer" / "config.json"
    if not config.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(model, "transformer/config.json")
        except Exception:  # noqa: BLE001  (not a Hub id either: the loader says so later)
            cached = None
        if not isinstance(cached, str):
            return True
        config = Path(cached)
    try:
        return bool(json.loads(config.read_text()).get("guidance_embeds", True))
    except (OSError, ValueError):
        return True


# ---------------------------------------------------------------------------- pairings


@dataclass(frozen=True)
class PlannedPairings:
    """What a :class:`PairingSource` planned.

    Attributes:
        pairings: in plan order.
        class_names: the classes ``classes`` may choose from.
        description: how errors name the source (``"the bird world (33 SUB classes)"``).
    """

    pairings: list[Pairing]
    class_names: Sequence[str]
    description: str


class PairingSource(Protocol):
    """Plans the pairings; ``attributes`` (``None``: SUB's 32 substitutions) is the target list
    of a class table (a file lists its own)."""

    def plan(self, attributes: Sequence[str] | None) -> PlannedPairings: ...


class ClassTable(Protocol):
    """``class_names`` (C,) and their (C, 312) 0/1 class-level labels; a
    :class:`~concept_grounding.world.BirdWorld` is one."""

    class_names: Sequence[str]
    class_attributes: np.ndarray


@dataclass(frozen=True)
class ClassTablePairings:
    """Every (class, attribute) whose attribute the class lacks (:func:`~concept_grounding.tdg.plan.plan_pairings`).

    Args:
        load: builds the :class:`ClassTable` (called by :meth:`plan`, so errors come in order).
        description: how errors name the source; ``{num_classes}`` is replaced by C.
    """

    load: Callable[[], ClassTable]
    description: str

    def plan(self, attributes: Sequence[str] | None) -> PlannedPairings:
        table = self.load()
        names = table.class_names
        return PlannedPairings(
            plan_pairings(names, table.class_attributes, attributes),
            names,
            self.description.replace("{num_classes}", str(len(names))),
        )


@dataclass(frozen=True)
class PairingsFile:
    """Pairings listed in a file (see :func:`~concept_grounding.tdg.plan.read_pairings`)."""

    path: Path

    def plan(self, attributes: Sequence[str] | None) -> PlannedPairings:
        pairings = read_pairings(self.path)
        return PlannedPairings(
            pairings, sorted({p.reference_class for p in pairings}), f"the pairings file {self.path}"
        )


def select_pairings(
    planned: PlannedPairings, classes: Sequence[str] | None, attributes: Sequence[str] | None
) -> list[Pairing]:
    """The planned pairings of ``classes`` and ``attributes`` (empty or ``None``: all).

    Raises:
        UsageError: a class is not among the source's, or no pairing is left.
    """
    pairings, names, source = planned.pairings, planned.class_names, planned.description
    if classes:
        known, chosen = set(names), set(classes)
        missing = [c for c in classes if c not in known]
        if missing:
            raise UsageError(
                f"{missing} not among the classes of {source}",
                argument=named("classes"),
                hint=f"choose from {list(names)[:6]}...",
            )
        pairings = [p for p in pairings if p.reference_class in chosen]
    if attributes:
        targets = set(attributes)
        pairings = [p for p in pairings if p.target_attribute in targets]
    if not pairings:
        raise UsageError(
            f"no (class, attribute) pairing is left to generate from {source}: every selected class "
            "already has every selected attribute",
            argument=named("classes", "attributes"),
            hint="choose other classes or attributes",
        )
    return pairings
