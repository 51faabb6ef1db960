"""The Space and the annotation app against hostile visitors: what they can make them do, store and print.

Launches ``spaces/concept-grounding/app.py`` on 127.0.0.1 only (offline, no artifacts, the
tiny model builds of ``CONCEPT_GROUNDING_SPACE_BUILD=tiny``, the default
:class:`~concept_grounding.web.limits.WebLimits`, 127.0.0.1 its one trusted proxy), then
``--clients`` threads, each one visitor (its own ``X-Forwarded-For`` address, sent through
that proxy), send ``--rounds`` rounds of a fixed list of requests: hostile ones (a 2,000-item
baseline list, a 100 kB string where a choice is expected, NaN, a 3000 x 3000 PNG, a path
outside the upload folder, an empty / right-to-left / many-file upload, uploads past the
per-visitor quota; 50 files behind a second ``boundary=`` or a second Content-Type,
a cache folder or another visitor's upload named as an image, a text holding the
``/space-files/`` alias, a 2 MB API body, and a client on another loopback address rotating
``X-Forwarded-For`` to escape the upload quota) and ordinary ones (a SUB explorer image, an
Explain run, a metric). Bounded: the request list is fixed, every call has a timeout, and
nothing leaves the machine.

Printed: requests sent, refusals (an error answer of one line), crashes (HTTP 5xx, an
answer "Something went wrong", more than one line, or the server gone), bytes the Space
stored under its Gradio cache at the end, answers that name the cache folder (a server path),
the server's RSS before and after (``/proc``), log lines per refused request, the p95 latency
per endpoint, how many of the rotating client's uploads got past its quota, and the files left
in the cache after a SIGTERM (the shutdown sweep).

Both apps then meet the web shell's attacks (:func:`shell_attacks`, docs/guide/web_shell.md): a 20 MB
queue join, 1,000 new sessions from one visitor, a 200-join burst from another, malformed and
unknown-event joins carrying a secret, ``deep_link``, half a header and a trickled body; the annotation
app (``annotate``'s, served in its own process: :func:`annotate_half`) also 30 MB uploads, and a rater's
start is timed before and after. Printed per attack: sent, refused, closed, accepted, 5xx; then the
seconds to close the slow connections, log lines, tracebacks and whether the secret reached the log.
Run from the repository root: ``python benchmarks/bench_space_hostile.py [--app space|annotate|both]``
(about three minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar

import numpy as np

from concept_grounding.testing.serving import free_port, http_request, stop_server, wait_until_serving

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "spaces" / "concept-grounding" / "app.py"
TINY = "tiny (built-in, random weights)"
PAIRING = "017.Cardinal|has_crown_color::black"
#: What a malformed event carries (a log that shows values would show it).
SECRET = "tok-SECRET-hostile-0123456789"


def _rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` (MB) from ``/proc``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _stored_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


class Visitor:
    """One hostile visitor: raw HTTP calls from one ``X-Forwarded-For`` address."""

    #: answers (of every visitor) naming a folder of :data:`HIDDEN` (none expected)
    leaks: ClassVar[list[str]] = []
    #: the server's folders no answer should name (set by :func:`main`: the Gradio cache folder)
    HIDDEN: tuple[str, ...] = ()

    def __init__(self, url: str, address: str, source: str | None = None) -> None:
        self.url, self.headers, self.sent, self.source = url, {"X-Forwarded-For": address}, 0, source

    def _seen(self, api: str, text: str) -> None:
        if any(folder in text for folder in self.HIDDEN):
            Visitor.leaks.append(api)

    def unique(self, content: bytes) -> bytes:
        """``content`` made unique to this visitor and call (Gradio stores equal files once)."""
        self.sent += 1
        tag = f"{self.headers['X-Forwarded-For']}#{self.sent}".encode()
        return tag + content[len(tag) :]

    def call(self, api: str, body: str) -> tuple[str, str]:
        """``("ok" | "refused" | "crash", text)`` of an API call sent as raw JSON."""
        headers = {"Content-Type": "application/json", **self.headers}
        try:
            status, posted = http_request(
                f"{self.url}gradio_api/call/{api}", body.encode(), headers, source=self.source
            )
            if status != 200:
                self._seen(api, posted.decode("utf-8", "replace"))
                bad = status >= 500 or b"\n" in posted.strip()
                return ("crash" if bad else "refused"), f"HTTP {status}: {posted[:200]!r}"
            event = json.loads(posted)["event_id"]
            stream = http_request(
                f"{self.url}gradio_api/call/{api}/{event}", headers=headers, source=self.source, timeout=300
            )[1].decode()
            self._seen(api, posted.decode() + stream)
        except OSError as err:
            return "crash", f"{type(err).__name__}: {err}"
        if "event: error" not in stream:
            return "ok", ""
        data = stream.rsplit("data: ", 1)[1].splitlines()[0]
        message = json.loads(data).get("error") if data.startswith("{") else data
        message = str(message)
        bad = message.startswith("Something went wrong") or "\n" in message or "Traceback" in message
        return ("crash" if bad else "refused"), message

    def upload(
        self, parts: list[tuple[str, bytes]], content_types: tuple[str, ...] = ("boundary=hostile-visitor",)
    ) -> tuple[str, str]:
        """Upload ``parts`` (delimited by ``hostile-visitor``) under each of ``content_types``'
        parameters (several: as many Content-Type headers)."""
        boundary = "hostile-visitor"
        body = (
            b"".join(
                (
                    f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
                    "Content-Type: application/octet-stream\r\n\r\n"
                ).encode()
                + content
                + b"\r\n"
                for name, content in parts
            )
            + f"--{boundary}--\r\n".encode()
        )
        headers = [("Content-Type", f"multipart/form-data; {t}") for t in content_types] + list(self.headers.items())
        try:
            status, answer = http_request(
                f"{self.url}gradio_api/upload", body, headers, source=self.source, timeout=120
            )
        except OSError as err:
            return "crash", f"{type(err).__name__}: {err}"
        text = answer.decode("utf-8", "replace")
        self._seen("upload", text)
        if status == 200:
            return "ok", text
        return ("crash" if status >= 500 or "\n" in text.strip() else "refused"), f"HTTP {status}: {text}"


def _png(side: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("L", (side, side)).save(buffer, format="png")
    return buffer.getvalue()


def _requests(cache: Path) -> list[tuple[str, Callable[[Visitor], tuple[str, str]]]]:
    """``(endpoint, call)`` of one round; the hostile ones first."""
    big_png, quota_chunk = _png(3000), b"\0" * (19 * 2**20)
    huge = "x" * 100_000
    outside = json.dumps({"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}})
    folder = json.dumps({"path": str(cache), "meta": {"_type": "gradio.FileData"}})

    def upload_then_explain(v: Visitor) -> tuple[str, str]:
        kind, text = v.upload([("big.png", big_png)])
        if kind != "ok":
            return kind, text
        path = json.loads(text)[0]
        image = json.dumps({"path": path, "meta": {"_type": "gradio.FileData"}})
        return v.call("explain", f'{{"data": [{image}, 0, "a bird", 3, [], ""]}}')

    def others_upload(v: Visitor) -> tuple[str, str]:
        kind, text = Visitor(v.url, "192.0.2.254").upload([("theirs.png", v.unique(_png(24)))])
        if kind != "ok":
            return "crash", f"the other visitor's upload failed: {text}"
        image = json.dumps({"path": json.loads(text)[0], "meta": {"_type": "gradio.FileData"}})
        return v.call("explain", f'{{"data": [{image}, 0, "a bird", 3, [], ""]}}')

    fifty = [(f"f{i}.txt", b"a") for i in range(50)]
    alias_text = "a bird at /space-files/" + "x" * 177  # 200 characters: once rewritten, too long, naming the cache
    return [
        # multipart tricks, cache folders and aliases, long bodies
        ("upload", lambda v: v.upload(fifty, ("boundary=decoy; boundary=hostile-visitor",))),
        ("upload", lambda v: v.upload(fifty, ("boundary=decoy", "boundary=hostile-visitor"))),
        ("explain", lambda v: v.call("explain", f'{{"data": [{folder}, 0, "a bird", 3, [], ""]}}')),
        ("explain", others_upload),
        ("explain", lambda v: v.call("explain", json.dumps({"data": [None, 0, alias_text, 3, [], ""]}))),
        ("explain", lambda v: v.call("explain", json.dumps({"data": [None, 0, "a bird " * 300_000, 3, [], ""]}))),
        # oversized lists, NaN, huge images, paths, odd uploads
        ("explain", lambda v: v.call("explain", json.dumps({"data": [None, 0, "a bird", 3, ["random"] * 2000, ""]}))),
        ("explain", lambda v: v.call("explain", '{"data": [null, NaN, "a bird", 3, [], ""]}')),
        ("explain", upload_then_explain),
        (
            "tdg_generate",
            lambda v: v.call("tdg_generate", json.dumps({"data": [huge, "has_crown_color::black", TINY, 2, 0]})),
        ),
        (
            "tdg_generate",
            lambda v: v.call(
                "tdg_generate", json.dumps({"data": ["017.Cardinal", "has_crown_color::black", TINY, 51, 0]})
            ),
        ),
        ("sub_explore", lambda v: v.call("sub_explore", json.dumps({"data": [huge, 0]}))),
        ("metrics", lambda v: v.call("metrics", f'{{"data": ["concept_confidence_deviation", {outside}]}}')),
        ("metrics", lambda v: v.call("metrics", f'{{"data": ["concept_confidence_deviation", {folder}]}}')),
        ("upload", lambda v: v.upload([("", b"abc")])),
        ("upload", lambda v: v.upload([("bird\u202egnp.exe", b"abc")])),
        ("upload", lambda v: v.upload([(f"f{i}.txt", b"a") for i in range(50)])),
        ("upload", lambda v: v.upload([("quota.bin", v.unique(quota_chunk))])),
        # ordinary visitors' requests
        ("sub_explore", lambda v: v.call("sub_explore", json.dumps({"data": [PAIRING, 1]}))),
        ("explain", lambda v: v.call("explain", json.dumps({"data": [None, 0, "a bird", 3, ["random"], ""]}))),
        (
            "tdg_generate",
            lambda v: v.call(
                "tdg_generate", json.dumps({"data": ["017.Cardinal", "has_crown_color::black", TINY, 2, 0]})
            ),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=10, help="concurrent visitors")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the request list per visitor")
    parser.add_argument("--app", choices=("space", "annotate", "both"), default="both", help="which app to attack")
    parser.add_argument("--serve-annotate", nargs=2, metavar=("PORT", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_annotate:
        serve_annotate(int(args.serve_annotate[0]), Path(args.serve_annotate[1]))
        return
    if args.app in ("space", "both"):
        space_half(args)
    if args.app in ("annotate", "both"):
        annotate_half()


def space_half(args: argparse.Namespace) -> None:
    """The Space's half: the visitors of the module docstring, the rotating client, the web shell's
    attacks (:func:`shell_attacks`), then SIGTERM."""
    from concept_grounding.web.limits import WebLimits

    port, cache = free_port(), Path(tempfile.mkdtemp(prefix="hostile-cache-"))
    log = Path(tempfile.mkdtemp()) / "server.log"
    env = {
        **os.environ,
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
        "HF_HUB_OFFLINE": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "GRADIO_TEMP_DIR": str(cache),
        "CONCEPT_GROUNDING_SPACE_BUILD": "tiny",
        "CONCEPT_GROUNDING_ARTIFACTS": str(Path(tempfile.mkdtemp()) / "none"),
        "PYTHONPATH": str(ROOT / "src"),
        "CONCEPT_GROUNDING_TRUSTED_PROXIES": "127.0.0.1",
    }  # the visitors' "platform proxy"; 127.0.0.9 is not one
    url = f"http://127.0.0.1:{port}/"
    Visitor.HIDDEN = (str(cache), os.path.realpath(cache))
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(APP)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        try:
            wait_until_serving(proc, url, timeout=180, log=log)
        except RuntimeError as err:
            raise SystemExit(f"the Space did not start: {err}") from None
        # warm: the tabs' models (built at launch) and one request each, so RSS "before" is a served Space
        warm = Visitor(url, "192.0.2.250")
        for api, body in [
            ("sub_explore", json.dumps({"data": [PAIRING, 0]})),
            ("explain", json.dumps({"data": [None, 0, "a bird", 3, [], ""]})),
            ("tdg_generate", json.dumps({"data": ["017.Cardinal", "has_crown_color::black", TINY, 2, 0]})),
        ]:
            warm.call(api, body)
        rss_before, log_before = _rss_mb(proc.pid), len(log.read_text().splitlines())
        plan = _requests(cache)
        latencies: dict[str, list[float]] = defaultdict(list)
        counts = {"ok": 0, "refused": 0, "crash": 0}
        crashes: list[str] = []

        def visit(i: int) -> list[tuple[str, str, str, float]]:
            visitor, done = Visitor(url, f"192.0.2.{i + 1}"), []
            for _ in range(args.rounds):
                for endpoint, call in plan:
                    start = time.perf_counter()
                    kind, text = call(visitor)
                    done.append((endpoint, kind, text, time.perf_counter() - start))
            return done

        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.clients) as pool:
            results = [r for rs in pool.map(visit, range(args.clients)) for r in rs]
        wall = time.perf_counter() - start
        for endpoint, kind, text, seconds in results:
            counts[kind] += 1
            latencies[endpoint].append(seconds)
            if kind == "crash":
                crashes.append(f"{endpoint}: {text[:200]}")
        alive = proc.poll() is None
        rss_after = _rss_mb(proc.pid) if alive else float("nan")
        log_lines = len(log.read_text().splitlines()) - log_before
        escaped = _rotating_client(url)
        config = json.loads(http_request(f"{url}config")[1])
        fn = next(d["id"] for d in config["dependencies"] if d.get("api_name") == "sub_explore")
        shell, log_shell = Tally(), len(log.read_text().splitlines())
        head_s, trickle_s = shell_attacks(url, port, fn, [PAIRING, 0], SECRET, shell)
        shell_lines = log.read_text().splitlines()[log_shell:]
        print(
            f"hostile visitors: {args.clients} clients x {args.rounds} rounds x {len(plan)} requests, {wall:.1f} s wall"
        )
        print(
            f"requests {len(results)}  ok {counts['ok']}  refused {counts['refused']}  crashes {counts['crash']}"
            f"  server alive {alive}"
        )
        print(f"stored bytes in the Gradio cache: {_stored_bytes(cache):,}")
        print(
            f"answers naming the server's cache folder: {len(Visitor.leaks)}"
            + (f" ({', '.join(sorted(set(Visitor.leaks)))})" if Visitor.leaks else "")
        )
        print(f"server RSS: {rss_before:.0f} MB before, {rss_after:.0f} MB after")
        print(
            f"log lines written during the run: {log_lines} ({log_lines / max(1, counts['refused']):.2f} per refusal)"
        )
        print("p95 latency per endpoint (s), 10 concurrent clients:")
        for endpoint, values in sorted(latencies.items()):
            print(
                f"  {endpoint:14s} n={len(values):4d}  median {np.median(values):6.2f}  "
                f"p95 {np.percentile(values, 95):6.2f}"
            )
        print(f"a client on 127.0.0.9 rotating X-Forwarded-For: {escaped} upload(s) past its 64 MB quota")
        for line in crashes[:10]:
            print("  crash:", line)
        limits = WebLimits()
        print("the web shell's attacks on the Space:")
        shell.print()
        print(
            f"half a header: closed after {head_s:.1f} s; a trickled body: closed after {trickle_s:.1f} s"
            f" (limits {limits.header_timeout_s} s / {limits.body_timeout_s} s); log lines "
            f"{len(shell_lines)}, tracebacks {sum('Traceback' in x for x in shell_lines)}, the secret in the log: "
            f"{any(SECRET in x for x in shell_lines)}, 'Received inputs': "
            f"{any('Received inputs' in x for x in shell_lines)};"
            f" deep_links folder written: {(cache / 'deep_links').exists()}"
        )
    finally:
        stop_server(proc, timeout=15)
    left = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())
    print(f"files left in the cache after SIGTERM: {len(left)}" + (f" ({', '.join(left[:5])})" if left else ""))


def _rotating_client(url: str) -> int:
    """19 MB uploads from 127.0.0.9 (not a trusted proxy), each under a new ``X-Forwarded-For``,
    until one is refused; how many were accepted past the per-visitor quota (0: no escape)."""
    from concept_grounding.web.limits import WebLimits

    quota, chunk = WebLimits().visitor_upload_bytes, b"\0" * (19 * 2**20)
    accepted = 0
    for i in range(quota // len(chunk) + 3):
        kind, _ = Visitor(url, f"198.18.0.{i + 1}", source="127.0.0.9").upload([("rotate.bin", os.urandom(64) + chunk)])
        if kind != "ok":
            break
        accepted += 1
    return max(0, accepted - quota // len(chunk))


# ---- the annotation app ----------------------------------------------------------------------------------

#: The annotation app's start event of SUB's study 1 (it takes the annotator's token).
START_API = "sub_1_start"
#: The rater's personal token in the annotate half (what a leaking log would show).
ANNOTATE_TOKEN_NAME = "rater"


def serve_annotate(port: int, folder: Path) -> None:
    """Serve ``annotate``'s app (SUB study 1, 50 images, one rater) on 127.0.0.1:``port`` until SIGTERM;
    the rater's token is written to ``folder / "token"``."""
    import signal

    from PIL import Image

    from concept_grounding.curation.annotate_serve import serve_app
    from concept_grounding.curation.study import SUB_STUDY_1, Record
    from concept_grounding.curation.study_store import StudyStore

    Image.new("RGB", (64, 64), (180, 40, 40)).save(folder / "bird.png")
    store = StudyStore(folder / "a.db", k=3)
    meta = {"plus": "black crown color", "reference": "017.Cardinal"}
    store.add_records(
        SUB_STUDY_1, [Record(f"1:c{i}", "sub-1", {"image": "bird.png"}, metadata=meta) for i in range(50)]
    )
    (folder / "token").write_text(store.issue_token(ANNOTATE_TOKEN_NAME))

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    serve_app(store, lambda record, name: folder / name, port=port, server_name="127.0.0.1", quiet=True)


class Tally:
    """Per attack: sent, refused (an HTTP 4xx of one line), closed (the server closed the connection before
    the client had sent its body: refused unread), accepted, 5xx."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def add(self, attack: str, status: int) -> None:
        row = self.rows[attack]
        row["sent"] += 1
        row[
            "refused" if 400 <= status < 500 else "closed" if status == 0 else "5xx" if status >= 500 else "accepted"
        ] += 1

    def print(self) -> None:
        for attack, row in self.rows.items():
            print(
                f"  {attack:41s} sent {row['sent']:5d}  refused {row['refused']:4d}  closed {row['closed']:2d}"
                f"  accepted {row['accepted']:4d}  5xx {row['5xx']:2d}"
            )


def _post_json(url: str, body: bytes, visitor: str, timeout: float = 60) -> int:
    headers = {"Content-Type": "application/json", "X-Forwarded-For": visitor}
    try:
        return http_request(url, body, headers, timeout=timeout)[0]
    except OSError:
        return 0


def _seconds_to_close(port: int, payload: bytes, limit: float = 60.0) -> float:
    """Seconds until the server closes a connection that sent ``payload`` and nothing more (``inf``: never)."""
    import socket

    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(payload)
        sock.settimeout(limit)
        try:
            while sock.recv(4096):
                pass
        except TimeoutError:
            return float("inf")
    return time.perf_counter() - start


def _rater_seconds(url: str, token: str) -> float:
    """Seconds for the rater's start (``/call/sub_1_start`` and its answer), from its own address."""
    headers = {"Content-Type": "application/json", "X-Forwarded-For": "192.0.2.200"}
    start = time.perf_counter()
    status, posted = http_request(f"{url}gradio_api/call/{START_API}", json.dumps({"data": [token]}).encode(), headers)
    if status == 200:
        http_request(f"{url}gradio_api/call/{START_API}/{json.loads(posted)['event_id']}", headers=headers, timeout=60)
    return time.perf_counter() - start


def shell_attacks(url: str, port: int, fn: int, data: list, secret: str, tally: Tally) -> tuple[float, float]:
    """The web shell's attacks, the same on every app: a 20 MB join, 1,000 new sessions from one visitor,
    a 200-join burst from another, malformed and unknown-event joins carrying ``secret``, 40 ``deep_link``
    calls, half a header and a trickled body. ``fn`` / ``data``: a well-formed event of the app.
    Returns the seconds until the half header's and the trickled body's connections were closed."""
    join = f"{url}gradio_api/queue/join"
    big = json.dumps({"data": ["Z" * (20 * 2**20)], "fn_index": fn, "session_hash": "big"}).encode()
    for _ in range(3):
        tally.add("queue/join of 20 MB", _post_json(join, big, "192.0.2.66"))
    for i in range(1000):
        body = json.dumps({"data": data, "fn_index": fn, "session_hash": f"flood{i}"}).encode()
        tally.add("queue/join, a new session each (x1000)", _post_json(join, body, "192.0.2.67"))
    burst = json.dumps({"data": data, "fn_index": fn, "session_hash": "burst"}).encode()
    with ThreadPoolExecutor(max_workers=20) as pool:
        for status in pool.map(lambda _: _post_json(join, burst, "192.0.2.68"), range(200)):
            tally.add("queue/join burst, one visitor (x200)", status)
    for body in (
        {"data": [], "fn_index": fn, "session_hash": "m1", "note": secret},  # too few inputs
        {"data": [secret], "fn_index": 99, "session_hash": "m2"},  # no such event
        {"data": secret, "fn_index": fn, "session_hash": "m3"},  # not a list
    ):
        for _ in range(10):
            tally.add(
                "malformed / unknown-fn join with a secret", _post_json(join, json.dumps(body).encode(), "192.0.2.69")
            )
    for i in range(40):
        status = http_request(
            f"{url}gradio_api/deep_link?session_hash=flood{i}", headers={"X-Forwarded-For": "192.0.2.70"}
        )[0]
        tally.add("deep_link", status)
    with ThreadPoolExecutor(max_workers=2) as pool:
        head = pool.submit(_seconds_to_close, port, b"GET / HTTP/1.1\r\nHost: x\r\n")
        trickle = pool.submit(
            _seconds_to_close,
            port,
            b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{",
        )
        return head.result(), trickle.result()


def annotate_half() -> None:
    """The issue's attacks on the annotation app (served as ``annotate`` serves it, default limits, 127.0.0.1
    its trusted proxy): uploads, a 20 MB join, 1,000 new sessions and a 200-join burst from one visitor,
    malformed events carrying the rater's token, ``deep_link``, half a header, a trickled body; then SIGTERM.
    Printed: per attack sent / refused / accepted, a rater's start before and after, RSS, log lines and
    tracebacks, whether the token reached the log, files in the cache."""
    from concept_grounding.web.limits import WebLimits

    limits = WebLimits()
    port, folder = free_port(), Path(tempfile.mkdtemp(prefix="hostile-annotate-"))
    cache = folder / "cache"
    cache.mkdir()
    log = folder / "server.log"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "GRADIO_TEMP_DIR": str(cache),
        "PYTHONPATH": str(ROOT / "src"),
        "CONCEPT_GROUNDING_TRUSTED_PROXIES": "127.0.0.1",
    }
    url = f"http://127.0.0.1:{port}/"
    with open(log, "w") as out:
        command = [sys.executable, __file__, "--serve-annotate", str(port), str(folder)]
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    tally = Tally()
    try:
        try:
            wait_until_serving(proc, url, timeout=180, log=log)
        except RuntimeError as err:
            raise SystemExit(f"the annotation app did not start: {err}") from None
        token = (folder / "token").read_text()
        config = json.loads(http_request(f"{url}config")[1])
        fn = next(d["id"] for d in config["dependencies"] if d.get("api_name") == START_API)  # takes the token
        before = [_rater_seconds(url, token) for _ in range(5)]
        rss_before, log_before = _rss_mb(proc.pid), len(log.read_text().splitlines())
        start = time.perf_counter()
        hostile = Visitor(url, "192.0.2.66")
        for _ in range(5):
            kind, _ = hostile.upload([("big.bin", os.urandom(64) + b"\0" * (30 * 2**20))])
            tally.add("upload 30 MB (no token)", {"ok": 200, "refused": 403}.get(kind, 0))
        head_s, trickle_s = shell_attacks(url, port, fn, [""], token, tally)
        wall = time.perf_counter() - start
        after = [_rater_seconds(url, token) for _ in range(5)]
        rss_after, stored = _rss_mb(proc.pid), _stored_bytes(cache)
        text = log.read_text()
        new_lines = text.splitlines()[log_before:]
    finally:
        stop_server(proc, timeout=15)
    left = [p for p in cache.rglob("*") if p.is_file()]
    refused = sum(row["refused"] for row in tally.rows.values())
    print(f"annotation app, hostile visitors ({wall:.1f} s wall):")
    tally.print()
    print(
        f"half a header: closed after {head_s:.1f} s; a trickled body: closed after {trickle_s:.1f} s"
        f" (limits {limits.header_timeout_s} s / {limits.body_timeout_s} s)"
    )
    print(f"a rater's start: median {np.median(before):.2f} s before, {np.median(after):.2f} s after")
    print(f"server RSS: {rss_before:.0f} MB before, {rss_after:.0f} MB after; bytes in the cache: {stored:,}")
    print(
        f"log lines written: {len(new_lines)} ({len(new_lines) / max(1, refused):.2f} per refusal); "
        f"tracebacks {sum('Traceback' in line for line in new_lines)}; the rater's token in the log: {token in text}; "
        f"'Received inputs' in the log: {'Received inputs' in text}"
    )
    written = (cache / "deep_links").exists()
    print(f"deep_links folder written: {written}; files left in the cache after SIGTERM: {len(left)}")


if __name__ == "__main__":
    main()
