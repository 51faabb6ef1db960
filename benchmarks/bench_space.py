"""Start-up time of the Gradio Space and ten concurrent SUB-explorer requests.

Launches ``spaces/concept-grounding/app.py`` on 127.0.0.1 (offline, no artifacts folder),
times the first HTTP 200 against the 30 s target of issue 7, then sends ten concurrent
``/sub_explore`` requests before the tab's model exists (it is built once, under a lock)
and prints their wall time. Run from the repository root: ``python benchmarks/bench_space.py``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "spaces" / "concept-grounding" / "app.py"
TARGET_S = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    from gradio_client import Client

    port = _free_port()
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port), "HF_HUB_OFFLINE": "1",
           "GRADIO_ANALYTICS_ENABLED": "False", "CONCEPT_GROUNDING_ARTIFACTS": str(Path(tempfile.mkdtemp()) / "none")}
    url = f"http://127.0.0.1:{port}/"
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(APP)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        elapsed = None
        while elapsed is None and time.perf_counter() - start < 120 and proc.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    elapsed = time.perf_counter() - start if response.status == 200 else None
            except OSError:
                time.sleep(0.2)
        if elapsed is None:
            print("the Space did not answer within 120 s")
            return 1
        print(f"start-up: first HTTP 200 after {elapsed:.2f} s (target {TARGET_S:.0f} s, ratio {elapsed / TARGET_S:.2f})")
        client = Client(url, verbose=False, analytics_enabled=False, download_files=False)

        def call(i: int) -> float:
            t0 = time.perf_counter()
            client.predict("017.Cardinal|has_crown_color::black", i % 8, api_name="/sub_explore")
            return time.perf_counter() - t0

        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=10) as pool:
            times = list(pool.map(call, range(10)))
        print(f"10 concurrent /sub_explore (model built on the first): all {len(times)} succeeded in "
              f"{time.perf_counter() - t0:.2f} s wall (slowest {max(times):.2f} s, fastest {min(times):.2f} s)")
        return 0
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
