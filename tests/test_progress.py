"""The log-line switch commands share (``progress.log_lines``)."""

from __future__ import annotations

import io
import logging
import sys

from concept_grounding.progress import log_lines


def test_log_lines_follow_the_stderr_of_the_moment_and_leave_nothing_behind(monkeypatch) -> None:
    """A command run in-process (tests, the demo) must leave no handler bound to a stream that is
    later closed: with ``logging.basicConfig`` the next record printed '--- Logging error ---' and
    a traceback into whatever stderr came next (the cause of a test-order-dependent failure of the
    full-disk ``generate`` test after ``publish`` ran in the same process)."""
    package = logging.getLogger("concept_grounding")
    handlers, level = list(package.handlers), package.level
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    with log_lines():
        logging.getLogger("concept_grounding.test").info("one")
        second = io.StringIO()
        monkeypatch.setattr(sys, "stderr", second)
        logging.getLogger("concept_grounding.test").info("two")
        logging.getLogger("open_clip").info("another library's INFO line")
    first.close()
    logging.getLogger("concept_grounding.test").info("three")
    assert (first.closed, second.getvalue()) == (True, "two\n")
    assert (package.handlers, package.level) == (handlers, level)
