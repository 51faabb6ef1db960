"""Build hook: the wheel carries the Hub repo sources as ``concept_grounding/_hub_sources/``.

Everything else about the package is declared in ``pyproject.toml``. The folders that
``concept-grounding publish`` turns into Hub repos (the ``evaluate`` modules in
``metrics/``, the TDG custom pipelines and Modular Diffusers block in ``pipelines/`` and the Space in
``spaces/concept-grounding/``) live once, at the repository root, where a checkout
loads them by path (``evaluate.load("metrics/sub_accuracy")``). A wheel has no
repository root, so ``build_py`` copies them into the built package;
``concept_grounding.publish.sources`` finds the copy (installed wheel) or the
repository root (editable install). The sdist includes them through ``MANIFEST.in``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
#: repository folder -> folder under ``concept_grounding/_hub_sources/``
HUB_SOURCES = {
    "metrics": "metrics",
    "pipelines/tied_diffusion": "pipelines/tied_diffusion",
    "pipelines/tied_flux2": "pipelines/tied_flux2",
    "pipelines/tied_flux2_klein": "pipelines/tied_flux2_klein",
    "pipelines/tied_diffusion_block": "pipelines/tied_diffusion_block",
    "spaces/concept-grounding": "spaces/concept-grounding",
    "docs/screenshots": "spaces/concept-grounding/screenshots",
}
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


class BuildPyWithHubSources(build_py):
    """``build_py`` that also copies :data:`HUB_SOURCES` into the built package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install finds them in the checkout
            return
        target = Path(self.build_lib) / "concept_grounding" / "_hub_sources"
        for source, dest in HUB_SOURCES.items():
            if not (ROOT / source).is_dir():
                raise FileNotFoundError(f"{source}/ is missing: the wheel needs it for `concept-grounding publish`")
            shutil.copytree(ROOT / source, target / dest, ignore=_IGNORE, dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildPyWithHubSources})
