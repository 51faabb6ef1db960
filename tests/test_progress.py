"""The log-line switch commands share (``progress.show_log_lines``)."""

from __future__ import annotations

import io
import logging
import sys

from concept_grounding.progress import show_log_lines


def test_log_lines_follow_the_current_stderr_after_the_one_they_started_with_is_closed(monkeypatch) -> None:
    """A command run in-process (tests, the demo) must not leave a handler bound to a stream that
    is later closed: with ``logging.basicConfig`` the next record printed '--- Logging error ---'
    and a traceback into whatever stderr came next (the cause of a test-order-dependent failure
    of the full-disk ``generate`` test after ``publish`` ran in the same process)."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", root.level)
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    show_log_lines()
    logging.getLogger("concept_grounding.test").info("one")
    first.close()
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    logging.getLogger("concept_grounding.test").info("two")
    assert second.getvalue() == "two\n"
