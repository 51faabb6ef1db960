"""The manual builds: ``mkdocs build --strict`` over ``docs/`` (the design notes, the Hub page and the
API reference mkdocstrings generates from the docstrings) fails on any warning: a page missing from
the nav, a broken link, a docstring mkdocstrings cannot render. Docstring examples themselves run
as doctests (``--doctest-modules``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MISSING = [
    m
    for m in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
    if importlib.util.find_spec(m.split(".")[0]) is None
    or (m == "mkdocstrings_handlers.python" and importlib.util.find_spec("mkdocstrings_handlers") is None)
]


@pytest.mark.skipif(
    bool(MISSING),
    reason=f"the docs tools are not installed ({', '.join(MISSING)}): "
    "pip install -e '.[dev]' installs mkdocs, mkdocs-material, mkdocstrings",
)
def test_the_manual_builds_strictly_and_fast(tmp_path):
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-3000:]
    assert seconds < 60, f"the docs took {seconds:.0f} s"
    api = (tmp_path / "site" / "api" / "tdg" / "index.html").read_text()
    assert "TiedFlux2AutoBlocks" in api and "own_custom_pipeline_module" in api  # generated from the docstrings
    assert (tmp_path / "site" / "overview" / "index.html").is_file()
