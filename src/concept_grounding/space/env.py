"""Environment defaults for the Space: offline, no telemetry, bounded threads.

:func:`configure_environment` must run before ``gradio`` or ``huggingface_hub`` is
imported; it only sets variables the user has not set (``os.environ.setdefault``), so
``HF_HUB_OFFLINE=1`` or ``GRADIO_ANALYTICS_ENABLED=True`` given by the user win.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["OFFLINE_DEFAULTS", "configure_environment", "artifacts_dir", "is_offline"]

#: Variables set (unless already set) before Gradio is imported.
OFFLINE_DEFAULTS: dict[str, str] = {
    "GRADIO_ANALYTICS_ENABLED": "False",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
    "GRADIO_SSR_MODE": "False",
}

#: Environment variable naming the artifacts folder written by ``make demo``.
ARTIFACTS_ENV = "CONCEPT_GROUNDING_ARTIFACTS"


def configure_environment() -> dict[str, str]:
    """Apply :data:`OFFLINE_DEFAULTS` with ``setdefault``; return the effective values.

    >>> env = configure_environment()
    >>> env["HF_HUB_DISABLE_TELEMETRY"] in ("0", "1", "true", "True", "false", "False")
    True
    """
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
    return {key: os.environ[key] for key in OFFLINE_DEFAULTS}


def is_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` asks for no Hub access ("1", "true", "yes", "on")."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def artifacts_dir(path: str | os.PathLike | None = None) -> Path | None:
    """The artifacts folder: ``path``, else ``$CONCEPT_GROUNDING_ARTIFACTS``, else
    ``./artifacts``; ``None`` when that folder does not exist."""
    candidate = Path(path) if path else Path(os.environ.get(ARTIFACTS_ENV, "artifacts"))
    return candidate if candidate.is_dir() else None
