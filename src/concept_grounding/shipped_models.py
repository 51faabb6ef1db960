"""The trained models shipped in the package, by the name every command takes (:data:`SHIPPED_MODELS`);
:func:`concept_grounding.hub.resolve_model_spec` resolves a name to its folder. The list:
docs/guide/install.md; the resolution steps: docs/guide/errors.md, "Offline".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError

__all__ = ["SHIPPED_MODELS", "ShippedModel", "shipped_model"]


#: the package's folder of trained models (the model cards: ``assets/<folder>/README.md``)
ASSETS = Path(__file__).resolve().parent / "assets"


@dataclass(frozen=True)
class ShippedModel:
    """A trained model shipped in the package, by the name every command takes.

    Attributes:
        folder: its folder under :data:`ASSETS`.
        kind: ``"clip"``, ``"concept-model"`` (a CBM or post-hoc CBM), ``"judge"`` or ``"flux"``.
        about: one line for messages.
    """

    folder: str
    kind: str
    about: str

    @property
    def path(self) -> Path:
        return ASSETS / self.folder


#: every shipped model by name (docs/guide/install.md lists them); a name resolves to its folder
SHIPPED_MODELS: dict[str, ShippedModel] = {
    "world-clip": ShippedModel("space_world_clip", "clip", "the world CLIP (64 px, trained on the bird world)"),
    "composition-clip": ShippedModel(
        "composition_clip", "clip", "the composition CLIP (32 px, ConceptBed's CLIPScore)"
    ),
    "world-cbm": ShippedModel("space_concept_model", "concept-model", "the Space's concept bottleneck model"),
    "world-posthoc-cbm": ShippedModel("space_posthoc_cbm", "concept-model", "the Space's post-hoc CBM"),
    "world-judge": ShippedModel("world_judge", "judge", "the world judge (species and attributes)"),
    "composition-judge": ShippedModel("composition_judge", "judge", "the composition judge (count, pose, scene)"),
    "world": ShippedModel("world_flux", "flux", "the world Flux (32 px text-to-image)"),
}
#: the shipped kinds each family of model argument loads (a judge goes through its own ``--scorer``)
_SHIPPED_KINDS = {"clip": ("clip", "concept-model"), "hub": ("flux",), "dataset": ()}


def shipped_model(
    name: str, argument: str = "--model", family: str = "clip", kinds: tuple[str, ...] | None = None
) -> ShippedModel | None:
    """The shipped model called ``name`` (``None`` for any other name); ``UsageError`` naming
    ``argument`` when it is of a kind this argument does not load (``kinds``, default by ``family``)."""
    shipped = SHIPPED_MODELS.get(name)
    if shipped is None:
        return None
    kinds = _SHIPPED_KINDS[family] if kinds is None else kinds
    if shipped.kind not in kinds:
        takes = sorted(n for n, m in SHIPPED_MODELS.items() if m.kind in kinds)
        raise UsageError(
            f"{name!r} is {shipped.about}, a {shipped.kind}; the shipped models this takes: "
            f"{', '.join(takes) or 'none'}",
            argument=argument,
        )
    return shipped
