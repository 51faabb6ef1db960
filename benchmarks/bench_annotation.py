"""Time the annotation store under concurrent annotators (SUB's human studies, issue 33).

``--annotators`` threads (default 10, as a Gradio server serves them), each with its own
SQLite connection to one WAL store of ``--images`` study-1 images (k = 3), loop
``next_image`` -> ``submit`` for ``--seconds``; prints the latency percentiles of
``next_image`` and of ``submit`` (ms), the submits per second, and checks that no image got
more than k answers and no annotator saw an image twice.

``--http`` measures what an annotator waits for instead: the Gradio app
(:func:`~concept_grounding.curation.annotate_app.build_app`) is served locally and each
annotator is a ``gradio_client`` session whose submit returns the next image; the figure is
that round trip (submit + next image + the image file served).

``--http --breakdown`` splits one annotator's round trip (sequential submits) into where the
time goes: our handler (store ``submit`` + ``next_image``), the rest of Gradio's server-side
processing (``process_api``: pre/post-processing, the image copied into its cache), the
queue + HTTP transport + client (the round trip without the image download), and the image
download (a second HTTP request the client makes, as a browser does).

Usage: ``python benchmarks/bench_annotation.py [--annotators 10] [--images 38400] [--seconds 20] [--http [--breakdown]]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np


def main() -> None:
    from concept_grounding.curation.annotations import AnnotationStore, study1_item

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=10)
    parser.add_argument("--images", type=int, default=38400)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--http", action="store_true", help="time the served app's submit -> next image round trip")
    parser.add_argument("--think", type=float, default=0.0,
                        help="--http: seconds each annotator pauses after a reply (0: as fast as possible, a stress "
                             "test; a person answering two questions takes a few seconds)")
    parser.add_argument("--breakdown", action="store_true",
                        help="--http: one annotator, sequential submits, the round trip split by where the time goes")
    parser.add_argument("--client-processes", action="store_true",
                        help="--http: run each annotator's client in its own process (not threads beside the server)")
    args = parser.parse_args()
    if args.http:
        return http_main(args)

    db = Path(tempfile.mkdtemp()) / "bench.db"
    store = AnnotationStore(db, k=args.k, timeout=60)
    t0 = time.perf_counter()
    store.add_images(study1_item(f"1:c{i:06d}", "017.Cardinal", "has_crown_color::pink", candidate=f"c{i:06d}")
                     for i in range(args.images))
    print(f"store: {args.images} images added in {time.perf_counter() - t0:.2f} s ({db})")

    next_ms: list[float] = []
    submit_ms: list[float] = []
    lock = threading.Lock()
    stop = time.perf_counter() + args.seconds

    def annotate(name: str) -> None:
        own = AnnotationStore(db, k=args.k, timeout=60)
        rng = np.random.default_rng(sum(map(ord, name)))
        mine_next, mine_submit = [], []
        while time.perf_counter() < stop:
            t = time.perf_counter()
            item = own.next_image(name, 1)
            mine_next.append(1e3 * (time.perf_counter() - t))
            if item is None:
                break
            t = time.perf_counter()
            try:
                own.submit(name, item.image, {"q1": ("yes", "somewhat", "no")[int(rng.integers(3))], "q2": "no"})
            except Exception as exc:  # noqa: BLE001 - an image filled by others between next and submit
                if "already has its" not in str(exc):
                    raise
            mine_submit.append(1e3 * (time.perf_counter() - t))
        with lock:
            next_ms.extend(mine_next)
            submit_ms.extend(mine_submit)

    threads = [threading.Thread(target=annotate, args=(f"annotator{i}",)) for i in range(args.annotators)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    rows = store.rows()
    per_image: dict[str, int] = {}
    for ann, image, _study, q, _a in rows:
        if q == "q1":
            per_image[image] = per_image.get(image, 0) + 1
    assert max(per_image.values()) <= args.k, "an image got more than k annotators"
    assert len({(r[0], r[1], r[3]) for r in rows}) == len(rows), "a duplicate answer"
    n, s = np.array(next_ms), np.array(submit_ms)
    print(f"{args.annotators} concurrent annotators, {wall:.1f} s: {len(s)} submits ({len(s) / wall:.0f}/s), "
          f"{len(per_image)} images answered")
    print(f"next_image ms: p50 {np.percentile(n, 50):.2f}  p95 {np.percentile(n, 95):.2f}  max {n.max():.2f}")
    print(f"submit     ms: p50 {np.percentile(s, 50):.2f}  p95 {np.percentile(s, 95):.2f}  max {s.max():.2f}")


def _http_session(job: tuple[str, str, float, float]) -> list[float]:
    """One annotator's gradio_client session: sign in, then submit for ``seconds``, pausing
    ``think`` seconds (untimed) after each reply; the round trips in ms."""
    from gradio_client import Client

    url, name, seconds, think = job
    client = Client(url, verbose=False)
    client.predict(name, api_name="/on_start")
    out = []
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop:
        t = time.perf_counter()
        client.predict("yes", "no", api_name="/on_submit")
        out.append(1e3 * (time.perf_counter() - t))
        time.sleep(think)
    return out


def http_main(args: argparse.Namespace) -> None:
    """``--annotators`` gradio_client sessions against the served app, each submitting for ``--seconds``."""
    import socket

    from PIL import Image

    from concept_grounding.curation.annotate_app import build_app, launch_app
    from concept_grounding.curation.annotations import AnnotationStore, study1_item
    from concept_grounding.world import BirdWorld, WorldConfig

    folder = Path(tempfile.mkdtemp())
    image = folder / "bird.png"
    Image.fromarray(BirdWorld(WorldConfig(image_size=224)).sample(0).image).save(image)
    store = AnnotationStore(folder / "bench.db", k=args.k, timeout=60)
    store.add_images(study1_item(f"1:c{i:06d}", "017.Cardinal", "has_crown_color::pink") for i in range(args.images))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = build_app(store, lambda item: str(image))
    if args.breakdown:
        return breakdown(app, store, image, folder, args)
    launch_app(app, prevent_thread_lock=True, server_port=port, allowed_paths=[str(folder)], quiet=True,
               max_threads=max(40, args.annotators))
    url = f"http://127.0.0.1:{port}/"
    times: list[float] = []
    lock = threading.Lock()

    if args.client_processes:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(args.annotators) as pool:
            for mine in pool.map(_http_session, [(url, f"annotator{i}", args.seconds, args.think) for i in range(args.annotators)]):
                times.extend(mine)
    else:
        def annotate(name: str) -> None:
            mine = _http_session((url, name, args.seconds, args.think))
            with lock:
                times.extend(mine)

        threads = [threading.Thread(target=annotate, args=(f"annotator{i}",)) for i in range(args.annotators)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    app.close()
    ms = np.array(times)
    where = "processes" if args.client_processes else "threads of the server's process"
    print(f"{args.annotators} concurrent annotators over HTTP (gradio_client {where}, on this machine too), "
          f"{args.seconds:g} s, {args.think:g} s pause after each reply: {len(ms)} submits "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"submit -> next image ms: p50 {np.percentile(ms, 50):.1f}  p95 {np.percentile(ms, 95):.1f}  "
          f"max {ms.max():.1f}")
    print(f"store: {len(store.rows()) // 2} answers stored, {len(ms)} submitted")


def _pcts(ms: list[float]) -> str:
    a = np.array(ms)
    return f"p50 {np.percentile(a, 50):7.1f}  p95 {np.percentile(a, 95):7.1f}"


def breakdown(app, store, image: Path, folder: Path, args: argparse.Namespace, n: int = 40) -> None:
    """One gradio_client session, ``n`` sequential submits with and ``n`` without the image
    download; the server's ``process_api`` and our handler timed inside the server."""
    import socket

    from gradio.blocks import Blocks
    from gradio_client import Client

    from concept_grounding.curation.annotate_app import AnnotationHandlers, launch_app

    handler_ms: list[float] = []
    api_ms: list[float] = []
    submit = AnnotationHandlers.submit

    def timed_submit(self, *a, **k):
        t = time.perf_counter()
        try:
            return submit(self, *a, **k)
        finally:
            handler_ms.append(1e3 * (time.perf_counter() - t))

    process_api = Blocks.process_api

    async def timed_api(self, *a, **k):
        t = time.perf_counter()
        try:
            return await process_api(self, *a, **k)
        finally:
            api_ms.append(1e3 * (time.perf_counter() - t))

    AnnotationHandlers.submit, Blocks.process_api = timed_submit, timed_api
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    launch_app(app, prevent_thread_lock=True, server_port=port, allowed_paths=[str(folder)], quiet=True)
    url = f"http://127.0.0.1:{port}/"
    rows = {}
    for download in (True, False):
        client = Client(url, verbose=False, download_files=download)
        client.predict(f"breakdown-{download}", api_name="/on_start")
        handler_ms.clear(), api_ms.clear()
        trip = []
        for _ in range(n):
            t = time.perf_counter()
            client.predict("yes", "no", api_name="/on_submit")
            trip.append(1e3 * (time.perf_counter() - t))
        rows[download] = (trip, list(handler_ms), list(api_ms))
    app.close()
    trip, handler, api = rows[False]
    print(f"one annotator, {n} sequential submits, ms (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):")
    print(f"  round trip with the image download     {_pcts(rows[True][0])}")
    print(f"  round trip without the download        {_pcts(trip)}")
    print(f"  server process_api (Gradio + handler)  {_pcts(api)}")
    print(f"  our handler (store submit + next)      {_pcts(handler)}")
    print(f"  so: download {np.median(rows[True][0]) - np.median(trip):.1f}, queue + HTTP + client "
          f"{np.median(trip) - np.median(api):.1f}, Gradio processing {np.median(api) - np.median(handler):.1f}, "
          f"ours {np.median(handler):.1f} (medians)")


if __name__ == "__main__":
    main()
