"""What a ``concept-grounding bench`` run leaves on disk: one typed contract.

The runner writes through :class:`BenchArtifacts`, and the demo and the Space read
through it, so the folder layout lives here and nowhere else::

    <root>/config.json        BenchConfig of the run
    <root>/results.json       every number of the report (seeded: same config -> same bytes)
    <root>/timings.json       wall times, library versions, CPU (differs run to run)
    <root>/report.md          the Markdown report
    <root>/<plot>.png         figures (CGIM histograms, CoAM gallery, s+ / s- bars)
    <root>/models/<slug>/     each trained model (``save_pretrained``); ``slug("CBM (joint)")``
                              is ``cbm-joint``, the post-hoc CBM ``posthoc-cbm``, the world
                              CLIP ``world-clip``
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BenchArtifacts", "POSTHOC_MODEL", "WORLD_CLIP_MODEL", "model_slug"]

#: Model folder of the post-hoc CBM (Yuksekgonul et al.) under ``models/``.
POSTHOC_MODEL = "posthoc-cbm"
#: Model folder of the small CLIP trained on the world (Table 2) under ``models/``.
WORLD_CLIP_MODEL = "world-clip"


def model_slug(name: str) -> str:
    """Folder name of a model: ``"CBM (ind., per-img.)"`` -> ``"cbm-ind-per-img"``.

    >>> model_slug("CBM (ind., per-img.)")
    'cbm-ind-per-img'
    """
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@dataclass(frozen=True)
class BenchArtifacts:
    """Paths and loaders of one bench run's outputs under ``root``.

    >>> a = BenchArtifacts(Path("run"))
    >>> a.results_json.as_posix(), a.model_dir("CBM (joint)").as_posix()
    ('run/results.json', 'run/models/cbm-joint')
    """

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # ------------------------------------------------------------------ paths
    @property
    def config_json(self) -> Path:
        return self.root / "config.json"

    @property
    def results_json(self) -> Path:
        return self.root / "results.json"

    @property
    def timings_json(self) -> Path:
        return self.root / "timings.json"

    @property
    def report_md(self) -> Path:
        return self.root / "report.md"

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    def model_dir(self, name: str) -> Path:
        """Folder of the model ``name`` (a Table 1 variant name or a slug such as
        :data:`POSTHOC_MODEL`)."""
        return self.models_dir / model_slug(name)

    def plot(self, file_name: str) -> Path:
        """A figure of the report, e.g. ``plot("cgim_histograms.png")``."""
        return self.root / file_name

    def breakdown_plot(self, model_name: str, level: str | None = None) -> Path:
        """s+ / s- bars of one model: per substituted attribute, or per ``level``
        (``"group"`` / ``"class"``): ``sub_<slug>[_per_<level>].png``."""
        suffix = f"_per_{level}" if level else ""
        return self.root / f"sub_{model_slug(model_name)}{suffix}.png"

    # ------------------------------------------------------------------ queries
    def exists(self) -> bool:
        """Whether a finished run is here (its ``results.json`` is written last but one)."""
        return self.results_json.is_file() and self.config_json.is_file()

    def has_model(self, name: str) -> bool:
        return (self.model_dir(name) / "config.json").is_file()

    def first_model(self, *names: str) -> str | None:
        """The first of ``names`` whose model was saved, or ``None``."""
        return next((n for n in names if self.has_model(n)), None)

    def find_model_dir(self, *names: str) -> Path | None:
        """The first existing folder ``<root>/<name>`` or ``<root>/models/<name>`` of
        ``names`` (the first form is an older demo layout), or ``None``."""
        for name in names:
            for folder in (self.root / name, self.models_dir / name):
                if folder.is_dir():
                    return folder
        return None

    def saved_models(self) -> list[str]:
        """Slugs of every saved model, sorted."""
        return sorted(p.parent.name for p in self.models_dir.glob("*/config.json"))

    # ------------------------------------------------------------------ loaders
    def load_results(self) -> dict[str, Any]:
        """The run's ``results.json``."""
        return self._json(self.results_json)

    def load_timings(self) -> dict[str, Any]:
        return self._json(self.timings_json)

    def load_config(self) -> Any:
        """The run's :class:`~concept_grounding.bench.config.BenchConfig`."""
        from .config import BenchConfig

        return BenchConfig.from_dict(self._json(self.config_json))

    def image_size(self) -> int:
        """Side (px) the run's models were trained on (``config.json``'s ``image_size``)."""
        return int(self._json(self.config_json)["image_size"])

    def load_model(self, name: str) -> Any:
        """The saved concept model ``name`` in eval mode (a CBM, a CEM or the post-hoc CBM,
        told apart by its ``config.json``: :func:`~concept_grounding.models.loading.load_concept_model`)."""
        folder = self.model_dir(name)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"{folder}: no saved model {name!r} in this bench run (saved: {self.saved_models()})"
            )
        from ..models.loading import load_concept_model

        return load_concept_model(folder).eval()

    @staticmethod
    def _json(path: Path) -> Any:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not found (is this a `concept-grounding bench` output folder?)")
        return json.loads(path.read_text(encoding="utf-8"))
