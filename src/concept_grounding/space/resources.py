"""Lazy, thread-safe model store of the Space.

Nothing heavy is built at start-up: each tab asks the store for what it needs on its
first use (``store.get("world", build_world)``), the store builds it once under a lock
(concurrent first requests wait for the same build instead of racing) and keeps it.
Each build is timed and logged, and :meth:`ResourceStore.status_markdown` tells the
page what is loaded, from where, and how long it took.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FeatureUnavailable", "ResourceStore", "require"]

logger = logging.getLogger(__name__)


class FeatureUnavailable(RuntimeError):
    """A package piece a tab needs is missing from this install; the message says which."""


def require(module: str, *names: str) -> Any:
    """Import ``module`` (and return it), or raise :class:`FeatureUnavailable` naming it.

    ``names`` are attributes that must exist in the module.

    >>> require("concept_grounding.vocabulary", "load_vocabulary").__name__
    'concept_grounding.vocabulary'
    """
    import importlib

    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        raise FeatureUnavailable(f"This tab needs `{module}`, which this build does not have ({err}).") from None
    missing = [n for n in names if not hasattr(mod, n)]
    if missing:
        raise FeatureUnavailable(f"This tab needs `{module}.{missing[0]}`, which this build does not have.")
    return mod


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    value: Any = None
    ready: bool = False
    seconds: float = 0.0
    source: str = ""


class ResourceStore:
    """Builds each named resource once, on first use.

    Args:
        artifacts: folder written by ``concept-grounding demo`` / ``make demo`` (or
            ``None``); builders look there first and build small models otherwise.
        image_size: side (px) of world images used by the Space's quick builds.
        seed: seed of the world and of every quick build.
    """

    def __init__(self, artifacts: Path | None = None, image_size: int = 64, seed: int = 0) -> None:
        self.artifacts = artifacts
        self.image_size = int(image_size)
        self.seed = int(seed)
        self._entries: dict[str, _Entry] = {}
        self._guard = threading.Lock()

    def _entry(self, name: str) -> _Entry:
        with self._guard:
            return self._entries.setdefault(name, _Entry())

    def find_artifact(self, *names: str) -> Path | None:
        """The first folder ``<artifacts>/<name>`` or ``<artifacts>/models/<name>`` that
        exists (``concept-grounding bench`` saves its models under ``models/<slug>``)."""
        if self.artifacts is None:
            return None
        for name in names:
            for folder in (self.artifacts / name, self.artifacts / "models" / name):
                if folder.is_dir():
                    return folder
        return None

    def is_ready(self, name: str) -> bool:
        return self._entry(name).ready

    def get(self, name: str, builder: Callable[["ResourceStore"], Any]) -> Any:
        """The resource ``name``, calling ``builder(self)`` the first time.

        ``builder`` may return ``(value, source)`` to say where the value came from
        ("artifacts/world_clip", "built: 2 epochs"); a bare value counts as "built".
        A failed build is not cached: the next call tries again.
        """
        entry = self._entry(name)
        if entry.ready:
            return entry.value
        with entry.lock:
            if not entry.ready:
                logger.info("space: building %s ...", name)
                start = time.perf_counter()
                out = builder(self)
                value, source = out if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], str) else (out, "built")
                entry.value, entry.source = value, source
                entry.seconds = time.perf_counter() - start
                entry.ready = True
                logger.info("space: %s ready in %.1f s (%s)", name, entry.seconds, source)
        return entry.value

    def status(self) -> dict[str, tuple[str, float]]:
        """name -> (source, seconds) of every resource built so far."""
        with self._guard:
            return {k: (e.source, e.seconds) for k, e in self._entries.items() if e.ready}

    def status_markdown(self) -> str:
        rows = self.status()
        where = f"`{self.artifacts}`" if self.artifacts else "none found (models are built on first use)"
        lines = [f"**Artifacts folder:** {where}", ""]
        if not rows:
            lines.append("No model loaded yet: each tab loads what it needs on first use.")
        for name, (source, seconds) in sorted(rows.items()):
            lines.append(f"- `{name}`: {source} ({seconds:.1f} s)")
        return "\n".join(lines)
