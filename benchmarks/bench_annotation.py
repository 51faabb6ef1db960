"""Time the one annotation store and app under concurrent annotators (SUB's study 1 or ConceptBed's rating study).

``--annotators`` threads (default 10, as a Gradio server serves them), each with its own
SQLite connection to one WAL :class:`~concept_grounding.curation.study_store.StudyStore` of ``--images`` records
(k = 3), loop ``next_record`` -> ``submit`` for ``--seconds``; prints the latency percentiles of
``next_record`` and of ``submit`` (ms), the submits per second, and checks that no record got
more than k answers and no annotator saw a record twice.

``--http`` measures what an annotator waits for instead: the Gradio app
(:func:`~concept_grounding.curation.annotate_app.build_app`) is served on 127.0.0.1 in its own
process (this script with a hidden ``--serve``) and each annotator is a client in its own
process whose submit returns the next image; the figure is that round trip (submit + next
image, the image inline in the reply). The clients start together once all have signed in,
then pause about ``--think`` seconds after each reply (uniform in [0.5, 1.5] ``--think``, the
first submit after a uniform [0, ``--think``) delay: people do not answer in step). The
client is :class:`PageClient` by default, the two requests a Gradio page makes per event
(join the queue, read the session's event stream); ``--gradio-client`` uses
``gradio_client.Client`` instead (its reader polls every 50 ms and it costs ~100 ms of CPU per
submit, which on a small machine competes with the server); ``--in-process`` runs the server
in this process with the clients as threads (the earlier arrangement: the GIL and the
clients' work counted in the server's figure). It prints the p50 / p95 / max round trip, the
CPU seconds of the server and of the clients, and checks the store: every submit stored, no
image over k, no duplicate answer.

``--http --breakdown`` splits one annotator's round trip (sequential submits) into where the
time goes: our handler (store ``next_record`` + ``submit`` + ``next_record``), the rest of Gradio's server-side
processing (``process_api``: pre/post-processing, the image copied into its cache), the
queue + HTTP transport + client (the round trip without the image download), and the image
download (a second HTTP request the client makes, as a browser does), with gradio_client; then
the round trip of the page's own requests (:class:`PageClient`, no 50 ms poll) and the part of
our handler that counts the annotator's progress.

``--study rating`` times ConceptBed's rating study instead (the same app rendering that study, one
1-5 rating per submit, each rater's own shuffled order, a 224 px image with three references
inline): the same arms, ``--images`` rating records; the target is p95 submit -> next item <= 200 ms with 10 raters.

Usage: ``python benchmarks/bench_annotation.py [--annotators 10] [--images 38400] [--seconds 20]
[--study sub|rating] [--http [--think 2] [--gradio-client | --in-process] [--breakdown]]``
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

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=10)
    parser.add_argument("--images", type=int, default=38400)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument(
        "--study",
        choices=("sub", "rating"),
        default="sub",
        help="SUB's study 1 (two questions per image) or ConceptBed's rating study (one 1-5 rating)",
    )
    parser.add_argument("--http", action="store_true", help="time the served app's submit -> next image round trip")
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        help="--http: seconds each annotator pauses after a reply (0: as fast as possible, a stress "
        "test; a person answering two questions takes a few seconds)",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="--http: one annotator, sequential submits, the round trip split by where the time goes",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="--http: serve the app in this process with the clients as threads beside it (the "
        "default: the app and each client in its own process)",
    )
    parser.add_argument(
        "--gradio-client",
        action="store_true",
        help="--http: each annotator a gradio_client.Client (polls its reader every 50 ms; the "
        "default is PageClient, the page's own two requests per event)",
    )
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)  # the --http arm's server process
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve, args.port, args.k, max(40, args.annotators), args.study)
    if args.http:
        return http_main(args)

    db = Path(tempfile.mkdtemp()) / "bench.db"
    store = _open_store(db, args.k)
    t0 = time.perf_counter()
    _add_items(store, args)
    print(f"store: {args.images} {args.study} items added in {time.perf_counter() - t0:.2f} s ({db})")

    next_ms: list[float] = []
    submit_ms: list[float] = []
    lock = threading.Lock()
    stop = time.perf_counter() + args.seconds

    def annotate(name: str) -> None:
        own = _open_store(db, args.k)
        rng = np.random.default_rng(sum(map(ord, name)))
        mine_next, mine_submit = [], []
        study = _study(args.study)
        while time.perf_counter() < stop:
            t = time.perf_counter()
            record = own.next_record(name, study.name)
            mine_next.append(1e3 * (time.perf_counter() - t))
            if record is None:
                break
            t = time.perf_counter()
            try:
                own.submit(name, study.name, record.id, _random_answers(study, rng))
            except Exception as exc:
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
    per_image = _check_store(store, args)
    n, s = np.array(next_ms), np.array(submit_ms)
    print(
        f"{args.study} study: {args.annotators} concurrent annotators, {wall:.1f} s: "
        f"{len(s)} submits ({len(s) / wall:.0f}/s), "
        f"{len(per_image)} records answered"
    )
    print(f"next_record ms: p50 {np.percentile(n, 50):.2f}  p95 {np.percentile(n, 95):.2f}  max {n.max():.2f}")
    print(f"submit      ms: p50 {np.percentile(s, 50):.2f}  p95 {np.percentile(s, 95):.2f}  max {s.max():.2f}")


class PageClient:
    """The requests an annotator's page makes per event, over one keep-alive ``httpx`` connection
    (Gradio's ``sse_v3`` protocol, as its browser front end speaks it): ``POST
    gradio_api/queue/join`` with the event's inputs (``None`` for ``gr.State``, held by the
    server per session), then the session's event stream ``GET gradio_api/queue/data`` read
    until the event's ``process_completed``. Unlike ``gradio_client`` it does not poll its
    reader thread every 50 ms nor download files, so its figure is the server's plus HTTP."""

    def __init__(self, url: str):
        import uuid

        import httpx

        self.http = httpx.Client(base_url=url, timeout=120)
        config = self.http.get("config").json()
        self.fn_index = {d["api_name"]: d["id"] for d in config["dependencies"]}
        states = {c["id"] for c in config["components"] if c.get("type") == "state"}
        self.is_state = {d["api_name"]: [i in states for i in d["inputs"]] for d in config["dependencies"]}
        self.session = uuid.uuid4().hex

    def predict(self, *data, api_name: str) -> list:
        """The event's outputs (a list, ``None`` for states) for ``data``, the inputs other than
        states (as ``gradio_client`` takes them); one line on a failed event."""
        import json

        given = iter(data)
        inputs = [None if state else next(given) for state in self.is_state[api_name.lstrip("/")]]
        body = {
            "data": inputs,
            "fn_index": self.fn_index[api_name.lstrip("/")],
            "session_hash": self.session,
            "event_data": None,
            "trigger_id": None,
        }
        joined = self.http.post("gradio_api/queue/join", json=body)
        joined.raise_for_status()
        event = joined.json()["event_id"]
        with self.http.stream("GET", "gradio_api/queue/data", params={"session_hash": self.session}) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                msg = json.loads(line[5:])
                if msg.get("msg") == "process_completed" and msg.get("event_id") == event:
                    if not msg.get("success"):
                        raise RuntimeError(f"{api_name} failed: {msg.get('output')}")
                    return msg["output"]["data"]
        raise RuntimeError(f"{api_name}: the event stream closed before the event completed")


_BARRIER = None  # a pool process's start line (set by _init_client)
_GRADIO_CLIENT = False  # a pool process's client kind (set by _init_client)


def _http_session(
    job: tuple[str, str, str, float, float], barrier=None, clock=time.thread_time, gradio_client: bool = False
) -> tuple[list[float], float]:
    """One annotator's session (a :class:`PageClient`, or a ``gradio_client.Client``): sign in,
    wait at ``barrier`` (all clients connected), then submit for ``seconds``, pausing about
    ``think`` seconds (untimed) after each reply; the round trips in ms and the CPU seconds
    (``clock``: this thread's) used while submitting.

    People do not answer in step: each pause is drawn uniformly in [0.5, 1.5] ``think`` and
    the first submit comes after a uniform [0, ``think``) delay (seeded by the annotator's
    name), else the ten annotators would submit in bursts of ten at once forever."""
    url, name, token, seconds, think, study = job
    rng = np.random.default_rng(sum(map(ord, name)))
    if gradio_client:
        from gradio_client import Client

        client = Client(url, verbose=False)
    else:
        client = PageClient(url)
    start, submit, answers, at = _api(study)
    shown = client.predict(token, api_name=start)[at]  # the personal link's token; the open record's id
    if barrier is not None:
        barrier.wait()
    cpu0 = clock()
    out = []
    stop = time.perf_counter() + seconds
    time.sleep(think * rng.uniform(0, 1))
    while time.perf_counter() < stop:
        t = time.perf_counter()
        shown = client.predict(token, shown, *answers, api_name=submit)[at]  # the next record's id
        out.append(1e3 * (time.perf_counter() - t))
        time.sleep(think * rng.uniform(0.5, 1.5))
    return out, clock() - cpu0


def _client_process(job: tuple[str, str, str, float, float, str]) -> tuple[list[float], float]:
    """:func:`_http_session` in a pool process; the CPU seconds are the whole process's while
    submitting (gradio_client's reader threads included)."""
    return _http_session(job, _BARRIER, clock=time.process_time, gradio_client=_GRADIO_CLIENT)


def _init_client(barrier, gradio_client: bool) -> None:
    """A pool process's initializer: the shared start line and the client kind kept, the client
    imported before the clock."""
    global _BARRIER, _GRADIO_CLIENT
    import httpx  # noqa: F401

    if gradio_client:
        import gradio_client as _  # noqa: F401
    _BARRIER, _GRADIO_CLIENT = barrier, gradio_client


def _free_port() -> int:
    from concept_grounding.testing.serving import free_port

    return free_port()


def _bench_store(args: argparse.Namespace) -> tuple[Path, Path]:
    """A folder with one 224 px world image and a store of ``--images`` study-1 images."""
    from PIL import Image

    from concept_grounding.world import BirdWorld, WorldConfig

    folder = Path(tempfile.mkdtemp())
    image = folder / "bird.png"
    world = BirdWorld(WorldConfig(image_size=224))
    Image.fromarray(world.sample(0).image).save(image)
    for j in range(1, 4):  # the rating study's three references of the concept
        Image.fromarray(world.sample(j * world.num_classes).image).save(folder / f"ref{j}.png")
    store = _open_store(folder / "bench.db", args.k)
    _add_items(store, args)
    names = [f"annotator{i}" for i in range(args.annotators)] + ["breakdown-True", "breakdown-False", "breakdown-page"]
    TOKENS.update({n: store.issue_token(n) for n in names})  # each annotator's personal link
    store.close()
    return folder, image


#: annotator -> their personal link's token (set by :func:`_bench_store`)
TOKENS: dict[str, str] = {}


def _open_store(path: Path, k: int):
    from concept_grounding.curation.study_store import StudyStore

    return StudyStore(path, k=k, timeout=60)


def _study(name: str):
    """``--study``'s declaration: SUB's study 1 or ConceptBed's rating study."""
    from concept_grounding.curation.study import CONCEPTBED_RATING, SUB_STUDY_1

    return CONCEPTBED_RATING if name == "rating" else SUB_STUDY_1


def _api(name: str) -> tuple[str, str, tuple[str, ...], int]:
    """The study's start and submit API names, the answers every client gives, and where the record id sits in the
    outputs (after the study's fields)."""
    study = _study(name)
    api = study.name.replace("-", "_")
    answers = ("3",) if name == "rating" else ("yes", "no")
    return f"/{api}_start", f"/{api}_submit", answers, len(study.fields)


def _random_answers(study, rng) -> dict[str, str]:
    """A random allowed answer to each of ``study``'s label and rating questions (the benched studies ask no
    choice question)."""
    from concept_grounding.curation.study import Record

    blank = Record("", study.name, {})
    return {q.name: str(rng.choice(q.allowed(blank))) for q in study.questions}


def _add_items(store, args: argparse.Namespace) -> None:
    """``--images`` study-1 records, or rating records (half concept similarity with the three
    references ``ref1-3.png``, half image-text alignment), all showing ``bird.png``."""
    from concept_grounding.curation.study import Record

    study = _study(args.study)
    if args.study == "rating":
        refs = ["ref1.png", "ref2.png", "ref3.png"]
        records = (
            Record(
                f"r-{i:06d}",
                study.name,
                {"image": "bird.png", "references": refs}
                if i % 2
                else {"image": "bird.png", "caption": "V* on a branch"},
                metadata={"question": "How similar is the concept?" if i % 2 else "Does the caption match?"},
            )
            for i in range(args.images)
        )
    else:
        meta = {"plus": "pink crown color", "reference": "Cardinal"}
        records = (Record(f"1:c{i:06d}", study.name, {"image": "bird.png"}, metadata=meta) for i in range(args.images))
    store.add_records(study, records)


def _check_store(store, args: argparse.Namespace) -> dict[str, int]:
    """Answers per record; asserts no record over k and no duplicate answer."""
    responses = store.responses(_study(args.study))
    per_record: dict[str, int] = {}
    for r in responses:
        per_record[r.record] = per_record.get(r.record, 0) + 1
    assert len({(r.annotator, r.record) for r in responses}) == len(responses), "a duplicate answer"
    assert not per_record or max(per_record.values()) <= args.k, "a record got more than k annotators"
    return per_record


def serve(folder: Path, port: int, k: int, max_threads: int, study: str = "sub") -> None:
    """The app over ``folder``'s store on 127.0.0.1:``port`` until killed (the ``--http``
    arm's server process, started by :func:`http_main`)."""
    from concept_grounding.curation.annotate_serve import serve_app

    serve_app(
        _open_store(folder / "bench.db", k),
        lambda record, name: folder / name,
        port=port,
        studies=[_study(study)],
        server_name="127.0.0.1",
        quiet=True,
        max_threads=max_threads,
    )


def _start_server(folder: Path, args: argparse.Namespace):
    """:func:`serve` in a subprocess (this script with the hidden ``--serve``); returns the
    process and the URL once it answers HTTP 200 (within 120 s)."""
    import subprocess
    import sys

    port = _free_port()
    cmd = [
        sys.executable,
        __file__,
        "--serve",
        str(folder),
        "--port",
        str(port),
        "--k",
        str(args.k),
        "--annotators",
        str(args.annotators),
        "--study",
        args.study,
    ]
    with open(folder / "server.log", "w") as log:  # the server writes to its own copy of the handle
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}/"
    from concept_grounding.testing.serving import wait_until_serving

    try:
        wait_until_serving(proc, url, timeout=120, log=folder / "server.log")
    except RuntimeError as err:
        raise SystemExit(f"the app server: {err}") from None
    return proc, url


def _cpu_seconds(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def http_main(args: argparse.Namespace) -> None:
    """``--annotators`` gradio_client sessions against the served app, each submitting for
    ``--seconds``. By default the app runs in its own process and each client in its own
    process (as annotators' browsers would, though here on the same CPUs); ``--in-process``
    serves it in this process with the clients as threads beside it (the GIL and the
    clients' JSON / SSE work then count in the server's figure)."""
    folder, image = _bench_store(args)
    if args.breakdown:
        from concept_grounding.curation.annotate_app import build_app

        store = _open_store(folder / "bench.db", args.k)
        app = build_app(store, [_study(args.study)], lambda record, name: folder / name)
        return breakdown(app, store, image, folder, args)
    jobs = [
        (f"annotator{i}", TOKENS[f"annotator{i}"], args.seconds, args.think, args.study) for i in range(args.annotators)
    ]
    results: list[tuple[list[float], float]] = []
    if args.in_process:
        from concept_grounding.curation.annotate_serve import serve_app

        port = _free_port()
        app = serve_app(
            _open_store(folder / "bench.db", args.k),
            lambda record, name: folder / name,
            studies=[_study(args.study)],
            port=port,
            prevent_thread_lock=True,
            server_name="127.0.0.1",
            quiet=True,
            max_threads=max(40, args.annotators),
        )
        url = f"http://127.0.0.1:{port}/"
        lock = threading.Lock()
        start = threading.Barrier(args.annotators + 1)

        def annotate(job: tuple[str, str, float, float, str]) -> None:
            mine = _http_session((url, *job), start, gradio_client=args.gradio_client)
            with lock:
                results.append(mine)

        threads = [threading.Thread(target=annotate, args=(job,)) for job in jobs]
        for t in threads:
            t.start()
        start.wait()
        cpu0, t0 = time.process_time(), time.perf_counter()
        for t in threads:
            t.join()
        wall, process_cpu = time.perf_counter() - t0, time.process_time() - cpu0
        app.close()
        clients_cpu = sum(c for _, c in results)
        server_cpu = process_cpu - clients_cpu  # the process's CPU less the client threads' own
        where = "server and client threads in one process"
    else:
        import multiprocessing

        proc, url = _start_server(folder, args)
        try:
            ctx = multiprocessing.get_context("spawn")
            start = ctx.Barrier(args.annotators + 1)
            with ctx.Pool(args.annotators, initializer=_init_client, initargs=(start, args.gradio_client)) as pool:
                pending = pool.map_async(_client_process, [(url, *job) for job in jobs])
                start.wait()  # every client connected and signed in
                server0, t0 = _cpu_seconds(proc.pid), time.perf_counter()
                results = pending.get()
                wall, server_cpu = time.perf_counter() - t0, _cpu_seconds(proc.pid) - server0
        finally:
            proc.terminate()
            proc.wait(10)
        clients_cpu = sum(c for _, c in results)
        where = "server and each client in its own process"
    ms = np.array([t for mine, _ in results for t in mine])
    cpus = os.cpu_count() or 1
    kind = "gradio_client" if args.gradio_client else "PageClient"
    print(
        f"{args.study} study: {args.annotators} concurrent annotators over HTTP "
        f"({kind}, {where}, all on this machine), "
        f"{args.seconds:g} s, {args.think:g} s pause after each reply: {len(ms)} submits "
        f"(load average {os.getloadavg()[0]:.1f} on {cpus} CPUs)"
    )
    print(
        f"submit -> next record ms: p50 {np.percentile(ms, 50):.1f}  p95 {np.percentile(ms, 95):.1f}  "
        f"max {ms.max():.1f}"
    )
    print(
        f"CPU over {wall:.1f} s ({cpus * wall:.0f} CPU-s available): server {server_cpu:.1f} s "
        f"({1e3 * server_cpu / max(len(ms), 1):.1f} ms per submit), clients {clients_cpu:.1f} s "
        f"({1e3 * clients_cpu / max(len(ms), 1):.1f} ms per submit)"
    )
    store = _open_store(folder / "bench.db", args.k)
    stored = sum(_check_store(store, args).values())
    assert stored == len(ms), f"{len(ms)} submits but {stored} answers stored"
    print(f"store: {stored} answers stored, {len(ms)} submitted (no record over k, no duplicate)")


def _pcts(ms: list[float]) -> str:
    a = np.array(ms)
    return f"p50 {np.percentile(a, 50):7.1f}  p95 {np.percentile(a, 95):7.1f}"


def breakdown(app, store, image: Path, folder: Path, args: argparse.Namespace, n: int = 40) -> None:
    """One gradio_client session, ``n`` sequential submits with and ``n`` without the image
    download, then ``n`` by a :class:`PageClient`; the server's ``process_api``, our handler
    and the store's progress count (part of the handler) timed inside the server."""
    import socket

    from gradio.blocks import Blocks
    from gradio_client import Client

    from concept_grounding.curation.annotate_app import StudyHandlers
    from concept_grounding.curation.annotate_serve import launch_app

    handlers = StudyHandlers
    start_api, submit_api, answers, at = _api(args.study)
    handler_ms: list[float] = []
    api_ms: list[float] = []
    progress_ms: list[float] = []
    submit = handlers.submit
    progress_name = "progress"
    progress = getattr(type(store), progress_name)

    def timed_progress(self, *a, **k):
        t = time.perf_counter()
        try:
            return progress(self, *a, **k)
        finally:
            progress_ms.append(1e3 * (time.perf_counter() - t))

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

    handlers.submit, Blocks.process_api = timed_submit, timed_api
    setattr(type(store), progress_name, timed_progress)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    launch_app(app, prevent_thread_lock=True, server_port=port, quiet=True)
    url = f"http://127.0.0.1:{port}/"
    rows = {}
    for download in (True, False, "page"):
        client = PageClient(url) if download == "page" else Client(url, verbose=False, download_files=download)
        token = TOKENS[f"breakdown-{download}"]
        shown = client.predict(token, api_name=start_api)[at]
        handler_ms.clear(), api_ms.clear(), progress_ms.clear()
        trip = []
        for _ in range(n):
            t = time.perf_counter()
            shown = client.predict(token, shown, *answers, api_name=submit_api)[at]
            trip.append(1e3 * (time.perf_counter() - t))
        rows[download] = (trip, list(handler_ms), list(api_ms), list(progress_ms))
    app.close()
    trip, handler, api, counted = rows[False]
    print(
        f"{args.study} study: one annotator, {n} sequential submits, ms "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):"
    )
    print(f"  round trip with the image download     {_pcts(rows[True][0])}")
    print(f"  round trip without the download        {_pcts(trip)}")
    print(f"  server process_api (Gradio + handler)  {_pcts(api)}")
    print(f"  our handler (store next, submit, next)  {_pcts(handler)}")
    print(f"  of which the progress count            {_pcts(counted)}")
    print(f"  round trip, PageClient (the page's)    {_pcts(rows['page'][0])}  (handler {_pcts(rows['page'][1])})")
    print(
        f"  so: download {np.median(rows[True][0]) - np.median(trip):.1f}, queue + HTTP + client "
        f"{np.median(trip) - np.median(api):.1f}, Gradio processing {np.median(api) - np.median(handler):.1f}, "
        f"ours {np.median(handler):.1f} (medians)"
    )


if __name__ == "__main__":
    main()
