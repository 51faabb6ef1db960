"""The Gradio Space under load: start-up, cold first requests, then requests/s and p95
latency at 1, 4 and 10 concurrent clients on the Tied Diffusion and SUB explorer tabs.

Launches ``spaces/concept-grounding/app.py`` on 127.0.0.1 (offline, no artifacts folder,
so each tab builds its small model on first use) and drives it with ``gradio_client``:

1. start-up: seconds to the first HTTP 200, against a 30 s target;
2. cold: ten concurrent ``/sub_explore`` requests before the tab's model exists (it is
   built once, under the store's lock) and one ``/tdg_generate``;
3. load: for each endpoint and each client count ``c``, ``c`` clients (one
   ``gradio_client.Client`` each, made before the clock starts) send
   ``--requests-per-client`` requests back to back. Printed per row: requests that
   succeeded, wall time, requests/s (all requests / wall), median and p95 latency
   (``numpy.percentile``, linear interpolation) and requests/s relative to one client in
   the same run. Every response is checked against the response to the same request
   sent alone before the load rows (identical images): a concurrency bug shows up as a
   failure, not a number.

The Space runs at most ``CONCURRENCY_LIMIT`` (4) requests of an event at once and queues
the rest, so beyond 4 clients latency grows while requests/s stays flat. Run from the
repository root: ``python benchmarks/bench_space.py``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from concept_grounding.testing.serving import free_port, stop_server, wait_until_serving

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "spaces" / "concept-grounding" / "app.py"
TARGET_S = 30.0
TINY_MODEL = "tiny (built-in, random weights)"
PAIRING = "017.Cardinal|has_crown_color::black"


def _launch() -> tuple[subprocess.Popen, str, float | None]:
    port = free_port()
    env = {
        **os.environ,
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
        "HF_HUB_OFFLINE": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "CONCEPT_GROUNDING_ARTIFACTS": str(Path(tempfile.mkdtemp()) / "none"),
        # every client here is this machine, one visitor to the Space's limits: let it run 16 at once
        "CONCEPT_GROUNDING_LIMIT_VISITOR_REQUESTS": "16",
    }
    url = f"http://127.0.0.1:{port}/"
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(APP)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_until_serving(proc, url, timeout=300)
    except RuntimeError:
        return proc, url, None
    return proc, url, time.perf_counter() - start


def _client(url: str) -> Any:
    from gradio_client import Client

    return Client(url, verbose=False, analytics_enabled=False, download_files=tempfile.mkdtemp())


def _fingerprint(out: Any) -> tuple:
    """Pixels of every image in a response (paths are downloaded files), plus the rest as is."""
    from PIL import Image

    items = out if isinstance(out, (list, tuple)) else [out]
    return tuple(
        np.asarray(Image.open(x).convert("RGB")).tobytes() if isinstance(x, str) and os.path.isfile(x) else repr(x)
        for x in items
    )


def _tdg_request(i: int, steps: int) -> tuple[tuple, str]:
    return ("017.Cardinal", "has_crown_color::black", TINY_MODEL, steps, i % 4), "/tdg_generate"


def _sub_request(i: int, steps: int) -> tuple[tuple, str]:
    return (PAIRING, i % 8), "/sub_explore"


def _load(
    url: str,
    request: Callable[[int, int], tuple[tuple, str]],
    clients: int,
    per_client: int,
    steps: int,
    expected: dict[tuple, tuple],
) -> dict[str, float]:
    """``clients`` clients x ``per_client`` requests; latencies, wall time, mismatches."""
    pool_clients = [_client(url) for _ in range(clients)]
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def run_client(c: int) -> None:
        barrier.wait()
        for r in range(per_client):
            args, api_name = request(c * per_client + r, steps)
            t0 = time.perf_counter()
            try:
                out = pool_clients[c].predict(*args, api_name=api_name)
            except Exception as err:  # noqa: BLE001 - counted and shown, not raised
                with lock:
                    failures.append(f"{type(err).__name__}: {err}")
                continue
            elapsed = time.perf_counter() - t0
            same = expected[args] == _fingerprint(out)
            with lock:
                latencies.append(elapsed)
                if not same:
                    failures.append(f"{api_name}{args}: differs from the one-client response")

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(run_client, range(clients)))
    wall = time.perf_counter() - t0
    total = clients * per_client
    return {
        "ok": total - len(failures),
        "total": total,
        "wall": wall,
        "rps": total / wall,
        "p50": float(np.percentile(latencies, 50)) if latencies else float("nan"),
        "p95": float(np.percentile(latencies, 95)) if latencies else float("nan"),
        "failures": failures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,4,10", help="comma-separated client counts (default 1,4,10)")
    parser.add_argument("--requests-per-client", type=int, default=3, help="requests each client sends (default 3)")
    parser.add_argument("--steps", type=int, default=4, help="TDG sampler steps per request (tiny Flux, 32 px)")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.clients.split(",")]

    proc, url, elapsed = _launch()
    try:
        if elapsed is None:
            print("the Space did not answer within 300 s")
            return 1
        print(
            f"start-up: first HTTP 200 after {elapsed:.2f} s (target {TARGET_S:.0f} s, ratio {elapsed / TARGET_S:.2f})"
        )
        cold = [_client(url) for _ in range(10)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=10) as pool:
            list(pool.map(lambda i: cold[i].predict(PAIRING, i % 8, api_name="/sub_explore"), range(10)))
        print(f"cold: 10 concurrent /sub_explore while its model is built once: {time.perf_counter() - t0:.2f} s wall")
        t0 = time.perf_counter()
        cold[0].predict(*_tdg_request(0, args.steps)[0], api_name="/tdg_generate")
        print(f"cold: first /tdg_generate (builds the tiny Flux): {time.perf_counter() - t0:.2f} s")

        print(
            f"\n{'endpoint':<14} {'clients':>7} {'ok':>7} {'wall s':>7} {'req/s':>6} {'p50 s':>6} {'p95 s':>6} "
            f"{'req/s vs 1':>10}"
        )
        status = 0
        for name, request, distinct in (("/tdg_generate", _tdg_request, 4), ("/sub_explore", _sub_request, 8)):
            expected = {}  # every distinct request answered alone first, untimed
            for i in range(distinct):
                request_args, api_name = request(i, args.steps)
                expected[request_args] = _fingerprint(cold[0].predict(*request_args, api_name=api_name))
            base = None
            for c in counts:
                row = _load(url, request, c, args.requests_per_client, args.steps, expected)
                base = base or row["rps"]
                print(
                    f"{name:<14} {c:>7} {row['ok']:>3}/{row['total']:<3} {row['wall']:>7.2f} {row['rps']:>6.2f} "
                    f"{row['p50']:>6.2f} {row['p95']:>6.2f} {row['rps'] / base:>9.2f}x"
                )
                for failure in row["failures"][:3]:
                    print(f"    FAILED {failure}")
                status = status or int(bool(row["failures"]))
        return status
    finally:
        stop_server(proc)


if __name__ == "__main__":
    sys.exit(main())
