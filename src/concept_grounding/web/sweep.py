"""The cache sweep of every web app: every ``sweep_every_s`` seconds, the files Gradio stored for
the app (uploads, the images it served) that are older than ``cache_age_s`` are deleted; all of
them when the server stops. Gradio's file components also leave an empty ``tmp*`` file in the
cache folder for every event that names a file (their ``filepath`` preprocessing opens one and never
uses it): :func:`sweep_stray_temp_files` deletes those once a minute old, at each queue join
(:class:`~.events.EventGate`) and at every sweep, and all of them at shutdown.

Gradio's own sweep (``delete_cache``) stops for good at the first entry it cannot delete (a
folder named as a file: ``IsADirectoryError``), silently, and its shutdown deletion then fails
too. This one is the same schedule as a lifespan of the app (:func:`sweep_lifespan`, installed
by :func:`concept_grounding.space.launch`) that survives anything: an entry that is not a
regular file, or that cannot be deleted, is skipped, dropped from Gradio's lists and named in
one log line per sweep (:func:`sweep`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .visitor_input import redact_paths

__all__ = ["SweepReport", "sweep", "sweep_lifespan", "sweep_stray_temp_files", "STRAY_AGE_S"]

logger = logging.getLogger(__name__)


@dataclass
class SweepReport:
    """What one sweep did: files deleted, and the entries skipped with why."""

    deleted: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def log_line(self) -> str:
        """One line for the log, paths reduced to their last part (:func:`~.inputs.redact_paths`)."""
        line = f"web: cache sweep deleted {self.deleted} file(s)"
        if self.skipped:
            shown = "; ".join(f"{redact_paths(path)}: {why}" for path, why in self.skipped[:5])
            more = f" and {len(self.skipped) - 5} more" if len(self.skipped) > 5 else ""
            line += f", skipped {len(self.skipped)} ({shown}{more})"
        return line


def sweep(blocks: Any, age: float | None, now: Callable[[], float] = time.time) -> SweepReport:
    """Delete the files of ``blocks.temp_file_sets`` (Gradio's record of what it stored) whose
    status changed more than ``age`` seconds ago (all with ``None``), except those a component
    keeps (``keep_in_cache``), and their folders once empty. Never raises for an entry."""
    keep: set[str] = set()
    for component in getattr(blocks, "blocks", {}).values():
        keep.update(getattr(component, "keep_in_cache", set()))
    report = SweepReport()
    for files in getattr(blocks, "temp_file_sets", []):
        done = set()
        for entry in list(files):
            if entry in keep:
                continue
            try:
                info = os.lstat(entry)
                if not stat.S_ISREG(info.st_mode):
                    report.skipped.append((str(entry), "not a regular file"))
                    done.add(entry)
                    continue
                if age is not None and now() - info.st_ctime <= age:
                    continue
                os.remove(entry)
                report.deleted += 1
                done.add(entry)
            except FileNotFoundError:
                done.add(entry)
                continue
            except Exception as err:  # noqa: BLE001 - one entry never stops the sweep
                report.skipped.append((str(entry), type(err).__name__))
                continue
            with contextlib.suppress(OSError):
                Path(entry).parent.rmdir()  # Gradio's per-file hash folder, when empty
        files -= done
    return report


#: An empty ``tmp*`` file younger than this (seconds since it was last written) is left alone: Gradio's
#: upload route writes each upload into such a file before moving it into place.
STRAY_AGE_S = 60.0


def sweep_stray_temp_files(
    folder: str | os.PathLike[str], min_age_s: float | None = STRAY_AGE_S, now: Callable[[], float] = time.time
) -> int:
    """Delete the empty regular files named ``tmp*`` directly in ``folder`` (Gradio's cache folder;
    what its file components' preprocessing leaves) not written for ``min_age_s`` seconds (``None``:
    all, at shutdown); return how many went. Never raises."""
    gone = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith("tmp"):
            continue
        with contextlib.suppress(OSError):
            info = entry.stat(follow_symlinks=False)
            old = min_age_s is None or now() - info.st_mtime > min_age_s
            if stat.S_ISREG(info.st_mode) and info.st_size == 0 and old:
                os.remove(entry.path)
                gone += 1
    return gone


def _sweep_logged(blocks: Any, age: float | None, folder: str | None = None) -> None:
    try:
        report = sweep(blocks, age)
        if folder is not None:
            report.deleted += sweep_stray_temp_files(folder, None if age is None else STRAY_AGE_S)
    except Exception as err:  # noqa: BLE001 - the schedule goes on
        logger.error("web: cache sweep failed: %s", redact_paths(f"{type(err).__name__}: {err}")[:300])
        return
    if report.deleted or report.skipped:
        (logger.warning if report.skipped else logger.info)(report.log_line())


def sweep_lifespan(
    every_s: float, age_s: float, inner: Callable[[Any], Any] | None = None, folder: str | None = None
) -> Callable[[Any], Any]:
    """A Starlette ``lifespan`` for Gradio's app: :func:`sweep` with ``age_s`` every
    ``every_s`` seconds (in a worker thread), and with no age at shutdown; ``inner`` (another
    lifespan, from the caller's ``app_kwargs``) runs inside it. With ``folder`` (Gradio's cache
    folder), each sweep also deletes its stray temp files (:func:`sweep_stray_temp_files`)."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async def schedule() -> None:
            while True:
                await asyncio.sleep(every_s)
                await asyncio.to_thread(_sweep_logged, app.get_blocks(), age_s, folder)

        task = asyncio.create_task(schedule())
        try:
            async with AsyncExitStack() as stack:
                yield (await stack.enter_async_context(inner(app))) if inner is not None else None
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):  # cancelled, as asked
                await task
            _sweep_logged(app.get_blocks(), None, folder)

    return lifespan
