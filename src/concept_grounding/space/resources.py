"""Lazy, thread-safe model store of the Space.

Nothing heavy is built at start-up: each tab asks the store for what it needs on its
first use (``store.get("world", build_world)``), the store builds it once under a lock
(concurrent first requests wait for the same build instead of racing) and keeps it.
Each build is timed and logged, and :meth:`ResourceStore.status_markdown` tells the
page what is loaded, from where, and how long it took.

The built-in resources (the world, the tiny Flux, the tabs' default models) are few and
kept for the life of the process. Models a visitor chose by name (``evictable=True``)
live in a least-recently-used cache of ``policy.cache_size`` entries: building one more
drops the one used longest ago. A request still using a dropped model keeps its
reference until it finishes; the next request for it builds it again. So memory holds at
most ``cache_size`` visitor models plus those being built or still in use by running
requests (Gradio's queue runs at most ``CONCURRENCY_LIMIT`` per tab). Which names may be
built at all is the store's :class:`~.policy.ModelPolicy`.

Concurrency: every handler only reads the models it gets from the store (eval mode,
no hooks left behind; the TDG pipeline gives each call its own scheduler), so requests run
in parallel threads without a per-model lock; Gradio's queue bounds how many run at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..bench.artifacts import BenchArtifacts
from .builds import SpaceBuild
from .inputs import redact_paths
from .policy import ModelPolicy

__all__ = ["FeatureUnavailable", "ResourceStore"]

logger = logging.getLogger(__name__)


class FeatureUnavailable(RuntimeError):
    """A feature a tab offers cannot run with this install (a baseline it lacks, a pipeline with
    another call signature); the message says which."""


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
        policy: the models visitors may choose and the size of their LRU cache
            (default: nothing beyond the built-in models, 2 cached).
        build: sizes of the models the Space trains itself when the artifacts folder has
            none (default :class:`~.builds.SpaceBuild`; tests inject ``SpaceBuild.tiny()``);
            their training is seeded with ``seed``.
    """

    def __init__(
        self,
        artifacts: Path | None = None,
        image_size: int = 64,
        seed: int = 0,
        policy: ModelPolicy | None = None,
        build: SpaceBuild | None = None,
    ) -> None:
        self.artifacts = artifacts
        #: the bench run in the artifacts folder (paths and loaders), or ``None``
        self.bench = BenchArtifacts(Path(artifacts)) if artifacts is not None else None
        self.image_size = int(image_size)
        self.seed = int(seed)
        self.build = (build if build is not None else SpaceBuild()).seeded(self.seed)
        self.policy = policy if policy is not None else ModelPolicy()
        self._entries: dict[str, _Entry] = {}
        #: true while the tabs' default models are being prepared (``blocks.warm_up``; ``launch`` sets it first)
        self.warming = False
        self._recent: OrderedDict[str, None] = OrderedDict()  # evictable ready entries, least recent first
        self._guard = threading.Lock()

    def _entry(self, name: str) -> _Entry:
        with self._guard:
            return self._entries.setdefault(name, _Entry())

    def find_artifact(self, *names: str) -> Path | None:
        """The first saved model folder of ``names`` in the artifacts folder
        (:meth:`~concept_grounding.bench.artifacts.BenchArtifacts.find_model_dir`)."""
        return self.bench.find_model_dir(*names) if self.bench is not None else None

    def artifact_image_size(self) -> int:
        """Input side (px) of the models found in the artifacts folder: the bench run's
        ``image_size`` when its ``config.json`` is there, else the store's ``image_size``."""
        return (
            self.bench.image_size() if self.bench is not None and self.bench.config_json.is_file() else self.image_size
        )

    def is_ready(self, name: str) -> bool:
        with self._guard:
            entry = self._entries.get(name)
        return entry is not None and entry.ready

    def get(self, name: str, builder: Callable[[ResourceStore], Any], *, evictable: bool = False) -> Any:
        """The resource ``name``, calling ``builder(self)`` the first time.

        ``builder`` may return ``(value, source)`` to say where the value came from
        ("artifacts/world_clip", "built: 2 epochs"); a bare value counts as "built".
        A failed build is not cached: the next call tries again. ``evictable=True`` puts
        the resource in the LRU cache of visitor-chosen models (module docstring).
        """
        entry = self._entry(name)
        if not entry.ready:
            with entry.lock:
                if not entry.ready:
                    logger.info("space: building %s ...", name)
                    start = time.perf_counter()
                    out = builder(self)
                    value, source = (
                        out if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], str) else (out, "built")
                    )
                    entry.value, entry.source = value, source
                    entry.seconds = time.perf_counter() - start
                    entry.ready = True
                    logger.info("space: %s ready in %.1f s (%s)", name, entry.seconds, source)
        if evictable:
            self._touch(name, entry)
        return entry.value

    def _touch(self, name: str, entry: _Entry) -> None:
        """Mark ``name`` most recently used; drop the least recent beyond ``policy.cache_size``."""
        with self._guard:
            if self._entries.get(name) is not entry:
                return  # dropped meanwhile: this request keeps its value, the store does not
            self._recent[name] = None
            self._recent.move_to_end(name)
            while len(self._recent) > self.policy.cache_size:
                old, _ = self._recent.popitem(last=False)
                self._entries.pop(old, None)
                logger.info("space: dropped %s from the model cache (%d kept)", old, self.policy.cache_size)

    def cached_models(self) -> list[str]:
        """The visitor-chosen models loaded now, least recently used first."""
        with self._guard:
            return list(self._recent)

    def status(self) -> dict[str, tuple[str, float]]:
        """name -> (source, seconds) of every resource built so far."""
        with self._guard:
            return {k: (e.source, e.seconds) for k, e in self._entries.items() if e.ready}

    def status_markdown(self) -> str:
        rows = self.status()
        where = f"`{Path(self.artifacts).name}`" if self.artifacts else "none found (models are built at start-up)"
        lines = [f"**Artifacts folder:** {where}", ""]
        if self.warming:
            lines.append("Preparing the tabs' models (started at launch; this line follows them)...")
        elif not rows:
            lines.append("No model loaded yet: each tab loads what it needs on first use.")
        for name, (source, seconds) in sorted(rows.items()):
            lines.append(f"- `{name}`: {redact_paths(source)} ({seconds:.1f} s)")
        cached = self.cached_models()
        if cached:
            lines.append(
                f"\nVisitor-chosen models loaded: {len(cached)} of at most {self.policy.cache_size} "
                "(the least recently used is dropped first)."
            )
        return "\n".join(lines)
