"""Find the folders the Hub repos are made from, in a wheel or in a checkout.

One source for each: the ``evaluate`` modules in ``metrics/<name>/``, the custom
pipeline in ``pipelines/tied_diffusion/`` and the Space in ``spaces/concept-grounding/``
live at the repository root (a checkout loads them by path). ``setup.py`` copies them
into the wheel as ``concept_grounding/_hub_sources/`` (with ``docs/screenshots`` as the
Space's ``screenshots/``), so an installed package can publish too. The shipped world
Flux weights live in the package itself, ``concept_grounding/assets/world_flux/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = []

#: the five ``evaluate`` modules, each published as a metric Space of the same name
METRIC_NAMES: tuple[str, ...] = (
    "sub_accuracy",
    "concept_confidence_deviation",
    "concept_global_importance",
    "concept_existence",
    "concept_location",
)

_PACKAGE = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class HubSources:
    """Paths of the repo sources.

    Attributes:
        metrics: folder holding one sub-folder per ``evaluate`` module.
        pipeline: the ``tied_diffusion`` custom pipeline folder (``pipeline.py``, ``README.md``).
        space: the Space folder (``app.py``, ``README.md``).
        screenshots: the Space's screenshots (PNG), or ``None``.
        world_flux: the shipped world Flux (``model_index.json`` + components), or ``None``.
        origin: ``"wheel"`` or ``"checkout"``.
    """

    metrics: Path
    pipeline: Path
    space: Path
    screenshots: Path | None
    world_flux: Path | None
    origin: str


def _world_flux(package: Path) -> Path | None:
    folder = package / "assets" / "world_flux"
    return folder if (folder / "model_index.json").is_file() else None


def find_sources(package: Path = _PACKAGE) -> HubSources:
    """The packaged copy (an installed wheel) if present, else the checkout around ``package``.

    Raises:
        FileNotFoundError: neither has the metric modules (a broken install).
    """
    packaged = package / "_hub_sources"
    if (packaged / "metrics").is_dir():
        space = packaged / "spaces" / "concept-grounding"
        shots = space / "screenshots"
        return HubSources(
            packaged / "metrics",
            packaged / "pipelines" / "tied_diffusion",
            space,
            shots if shots.is_dir() else None,
            _world_flux(package),
            "wheel",
        )
    root = package.parent.parent  # src/concept_grounding -> repository root
    if (root / "metrics").is_dir() and (root / "pipelines" / "tied_diffusion").is_dir():
        shots = root / "docs" / "screenshots"
        return HubSources(
            root / "metrics",
            root / "pipelines" / "tied_diffusion",
            root / "spaces" / "concept-grounding",
            shots if shots.is_dir() else None,
            _world_flux(package),
            "checkout",
        )
    raise FileNotFoundError(
        f"the Hub repo sources are missing: neither {packaged} (a wheel built by setup.py) nor {root / 'metrics'} "
        "(a checkout) exists; reinstall concept-grounding"
    )
