"""The web shell (concept_grounding.web) through running apps on loopback: the annotation app as
``annotate`` serves it, and a tiny app launched by the shell for what needs a slow event.

The Space in its own process: tests/space/test_space_shell.py.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path

import pytest

from concept_grounding.testing.serving import closed_within

pytest.importorskip("gradio")
httpx = pytest.importorskip("httpx")

SECRET = "tok-SECRET-0123456789"


@pytest.fixture
def annotate(tmp_path):
    """The annotation app of ``annotate`` (one study-1 image, one annotator); yields (url, app)."""
    from PIL import Image

    from concept_grounding.curation.annotate_serve import serve_app
    from concept_grounding.curation.study import SUB_STUDY_1, Record
    from concept_grounding.curation.study_store import StudyStore
    from concept_grounding.testing.serving import free_port

    Image.new("RGB", (8, 8)).save(tmp_path / "bird.png")
    store = StudyStore(tmp_path / "a.db", k=2)
    meta = {"plus": "pink crown color", "reference": "017.Cardinal"}
    store.add_records(SUB_STUDY_1, [Record("1:c0", "sub-1", {"image": "bird.png"}, metadata=meta)])
    store.issue_token("ann")
    port = free_port()
    app = serve_app(store, lambda record, name: tmp_path / name, port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        app.close()


def _start_fn(app) -> int:
    """The fn_index of the app's first study's start event (it takes the annotator's token)."""
    return next(i for i, fn in app.fns.items() if str(fn.api_name).endswith("_start"))


def _join(url: str, body: object, **kw) -> httpx.Response:
    headers = {"content-type": "application/json"}
    return httpx.post(f"{url}/gradio_api/queue/join", content=json.dumps(body), headers=headers, timeout=30, **kw)


def test_annotate_takes_no_upload(annotate):
    url, _ = annotate
    files = {"files": ("bird.png", b"x" * 200_000, "image/png")}
    response = httpx.post(f"{url}/gradio_api/upload", files=files, timeout=30)
    assert response.status_code == 403
    assert response.json() == {"error": "files: this app takes no uploads."}


def test_annotate_caps_a_huge_join_and_keeps_no_deep_link(annotate):
    url, app = annotate
    huge = {"data": ["Z" * 3_000_000], "fn_index": _start_fn(app), "session_hash": "s1"}
    response = _join(url, huge)
    assert response.status_code == 413 and "per request body" in response.json()["error"]
    link = httpx.get(f"{url}/gradio_api/deep_link", params={"session_hash": "s1"}, timeout=30)
    assert link.status_code == 404 and link.json()["error"].startswith("deep_link:")


def test_annotate_malformed_events_are_one_line_without_the_value(annotate, caplog, capfd):
    url, app = annotate
    fn = _start_fn(app)
    with caplog.at_level(logging.WARNING, logger="concept_grounding.web.limits"):
        unknown = _join(url, {"data": [SECRET], "fn_index": 99, "session_hash": "s2"})
        short = _join(url, {"data": [], "fn_index": fn, "session_hash": "s2"})
        not_json = httpx.post(f"{url}/gradio_api/queue/join", content=b"[" + SECRET.encode(), timeout=30)
    assert unknown.status_code == 422 and unknown.json() == {"error": "event: no such event in this app."}
    assert short.status_code == 422 and short.json() == {"error": "event: this event takes 1 inputs, got 0."}
    assert not_json.status_code == 422
    lines = [r.getMessage() for r in caplog.records if r.name == "concept_grounding.web.limits"]
    assert len(lines) == 3 and all(line.startswith("web: refused (visitor ") for line in lines)
    out, err = capfd.readouterr()
    assert SECRET not in out + err + "".join(lines) and "Traceback" not in out + err
    assert "Received inputs" not in out + err
    headers = {"content-type": "application/json"}
    start = app.fns[fn].api_name
    for route in ("call", "run"):  # Gradio's API routes, by event name
        named = httpx.post(f"{url}/gradio_api/{route}/{start}", content='{"data": []}', headers=headers, timeout=30)
        assert named.status_code == 422 and named.json() == {"error": "event: this event takes 1 inputs, got 0."}
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "Received inputs" not in out + err
    ok = _join(url, {"data": [""], "fn_index": fn, "session_hash": "s3"})  # a well-formed event still joins
    assert ok.status_code == 200 and "event_id" in ok.json(), ok.text


@pytest.fixture
def slow_app(monkeypatch):
    """A tiny app in the shell: one event that sleeps (concurrency 1), one that reads an uploaded
    file; tight limits. Yields (url, blocks)."""
    import gradio as gr

    from concept_grounding.testing.serving import free_port
    from concept_grounding.web.limits import Gate, WebLimits
    from concept_grounding.web.shell import launch_blocks

    def nap(seconds: float) -> str:
        time.sleep(float(seconds))
        return "ok"

    def size(path: str | None) -> str:
        return str(os.path.getsize(path)) if path else "none"

    with gr.Blocks() as blocks:
        seconds, out, file = gr.Number(value=0), gr.Textbox(), gr.File(type="filepath")
        gr.Button().click(nap, seconds, out, api_name="nap")
        gr.Button().click(size, file, out, api_name="size")
        gr.Button().click(lambda: "hi", None, out, api_name="hello", queue=False)  # the page posts to run/predict
    limits = WebLimits(visitor_queue_events=2, visitor_sessions=3, header_timeout_s=1, body_timeout_s=1, queue_size=16)
    port = free_port()
    launch_blocks(
        blocks,
        gate=Gate(limits),
        takes_uploads=True,
        concurrency_limit=1,
        server_name="127.0.0.1",
        server_port=port,
        prevent_thread_lock=True,
        quiet=True,
    )
    try:
        yield f"http://127.0.0.1:{port}", blocks
    finally:
        blocks.close()


def _fn(blocks, name: str) -> int:
    return next(i for i, fn in blocks.fns.items() if fn.api_name == name)


def test_one_visitor_holds_at_most_its_share_of_the_queue(slow_app):
    url, blocks = slow_app
    nap = _fn(blocks, "nap")
    codes = [_join(url, {"data": [3], "fn_index": nap, "session_hash": "q1"}).status_code for _ in range(4)]
    assert codes == [200, 200, 429, 429]
    refused = _join(url, {"data": [0], "fn_index": nap, "session_hash": "q1"})
    assert refused.json()["error"] == "queue: at most 2 events per visitor in the queue; wait for one."


def test_one_visitor_opens_a_bounded_number_of_sessions(slow_app):
    url, blocks = slow_app
    nap = _fn(blocks, "nap")
    codes = []
    for i in range(5):
        codes.append(_join(url, {"data": [0], "fn_index": nap, "session_hash": f"sess{i}"}).status_code)
        time.sleep(0.3)  # each event done before the next join
    assert codes == [200, 200, 200, 429, 429]
    again = _join(url, {"data": [0], "fn_index": nap, "session_hash": "sess0"})  # a known session goes on
    assert again.status_code == 200


def test_an_unqueued_event_is_checked_by_its_fn_index(slow_app):
    url, blocks = slow_app
    headers = {"content-type": "application/json"}
    predict = f"{url}/gradio_api/run/predict"
    good = {"data": [], "fn_index": _fn(blocks, "hello"), "session_hash": "u1"}
    answer = httpx.post(predict, content=json.dumps(good), headers=headers, timeout=30)
    assert answer.status_code == 200 and answer.json()["data"] == ["hi"]
    bad = httpx.post(predict, content=json.dumps(dict(good, fn_index=99)), headers=headers, timeout=30)
    assert bad.status_code == 422 and bad.json() == {"error": "event: no such event in this app."}
    unknown = httpx.post(f"{url}/gradio_api/call/nothing", content='{"data": []}', headers=headers, timeout=30)
    assert unknown.status_code == 422


def test_half_a_header_or_a_trickled_body_is_closed(slow_app):
    url, _ = slow_app
    port = int(url.rsplit(":", 1)[1])
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as head:
        head.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        closed, _ = closed_within(head, 6)
    assert closed and time.perf_counter() - start < 5
    with socket.create_connection(("127.0.0.1", port)) as body:
        body.sendall(b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
        body.sendall(b"Content-Length: 1000\r\n\r\n{")
        closed, answer = closed_within(body, 6)
    assert closed and answer.startswith(b"HTTP/1.1 408") and b"within 1 s" in answer
    with socket.create_connection(("127.0.0.1", port)) as silent:  # opened, nothing sent
        closed, _ = closed_within(silent, 6)
    assert closed


def test_a_file_event_leaves_no_temp_file(slow_app):
    from gradio.utils import get_upload_folder

    url, blocks = slow_app
    files = {"files": ("notes.txt", b"hello", "text/plain")}
    stored = httpx.post(f"{url}/gradio_api/upload", files=files, timeout=30).json()[0]
    value = {"path": stored, "orig_name": "notes.txt", "meta": {"_type": "gradio.FileData"}}
    folder = Path(get_upload_folder())

    def strays() -> set[str]:
        return {p.name for p in folder.glob("tmp*") if p.is_file() and p.stat().st_size == 0}

    before = strays()
    assert _join(url, {"data": [value], "fn_index": _fn(blocks, "size"), "session_hash": "f1"}).is_success
    deadline = time.perf_counter() + 10
    while not strays() - before and time.perf_counter() < deadline:
        time.sleep(0.1)  # the event runs: gr.File's preprocessing opens an empty tmp file and leaves it
    left = strays() - before
    assert left, "the attack did not happen: no empty tmp file"
    young = folder / "tmp-an-upload-being-written"
    young.touch()  # Gradio's upload route writes each upload into such a file first: a young one stays
    for name in left:
        os.utime(folder / name, (time.time() - 120, time.time() - 120))  # a minute and more without a write
    assert _join(url, {"data": [0], "fn_index": _fn(blocks, "nap"), "session_hash": "f2"}).is_success
    assert not left & strays() and young.exists()  # the next join swept the old ones
    young.unlink()
