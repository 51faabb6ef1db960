"""The Space launched as a hosted Space launches it, for the tests of this folder."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from concept_grounding.testing.serving import free_port, stop_server, wait_until_serving

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "spaces" / "concept-grounding" / "app.py"


def _launch(tmp_path_factory, **extra_env: str):
    """Start app.py on a free loopback port; yield (url, start-up seconds until the first
    HTTP 200, log file, its Gradio cache folder, the process)."""
    port = free_port()
    log = tmp_path_factory.mktemp("space") / "server.log"
    cache = tmp_path_factory.mktemp("gradio-cache")
    env = {
        **os.environ,
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
        "GRADIO_TEMP_DIR": str(cache),
        "HF_HUB_OFFLINE": "1",
        "CONCEPT_GROUNDING_ARTIFACTS": str(tmp_path_factory.mktemp("no_artifacts") / "none"),
        "CONCEPT_GROUNDING_SPACE_BUILD": "tiny",
        **extra_env,
    }  # the Space's own model builds at tiny sizes (a second each)
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(APP)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until_serving(proc, url, timeout=120, log=log)
        elapsed = time.perf_counter() - start
        print(f"\nSpace start-up: HTTP 200 after {elapsed:.2f} s")
        yield url, elapsed, log, cache, proc
    finally:
        stop_server(proc, timeout=10)


@pytest.fixture(scope="session")
def launch_space():
    """:func:`_launch`: ``yield from launch_space(tmp_path_factory, **env)`` in a module fixture."""
    return _launch
