"""The running Space in the project's web shell (concept_grounding.web): what tests/web proves on the
annotation app holds here too. One Space, tight limits: read timeouts of 1 s, 2 events per visitor.

* Gradio's ``deep_link`` is off (it wrote a snapshot of any session's components under the cache);
* an unknown ``fn_index`` or event name and an event with too few inputs are refused in one line
  (HTTP 422; they gave HTTP 500 or a traceback with every value received), logged as one line;
* one visitor holds at most their share of the queue (HTTP 429 past it);
* half a header or a trickled body is closed after the timeout;
* the empty ``tmp*`` file an Explain naming an upload leaves is swept at the next join once a minute old.
"""

from __future__ import annotations

import json
import os
import socket
import time

import pytest

from concept_grounding.testing.serving import closed_within, http_request

pytestmark = pytest.mark.slow  # one Space start-up (10-40 s on a loaded machine)

SECRET = "tok-SECRET-space-0123456789"
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def space(tmp_path_factory, launch_space):
    """(url, log, cache folder) of a Space with read timeouts of 1 s and 2 queue events per visitor."""
    for url, _, log, cache, _ in launch_space(
        tmp_path_factory,
        CONCEPT_GROUNDING_LIMIT_HEADER_TIMEOUT_S="1",
        CONCEPT_GROUNDING_LIMIT_BODY_TIMEOUT_S="1",
        CONCEPT_GROUNDING_LIMIT_VISITOR_QUEUE_EVENTS="2",
    ):
        yield url, log, cache


def _post(url: str, path: str, body: object) -> tuple[int, dict]:
    status, answer = http_request(url + path, json.dumps(body).encode(), JSON)
    return status, json.loads(answer)


def test_deep_link_is_off(space):
    url, _, cache = space
    status, answer = http_request(url + "gradio_api/deep_link?session_hash=s1")
    assert status == 404 and json.loads(answer)["error"].startswith("deep_link:")
    assert not (cache / "deep_links").exists()


def test_unknown_or_short_events_are_one_line_without_the_value(space):
    url, log, _ = space
    before = log.read_text()
    unknown = _post(url, "gradio_api/queue/join", {"data": [SECRET], "fn_index": 99, "session_hash": "s2"})
    short = _post(url, "gradio_api/queue/join", {"data": [SECRET], "fn_index": 0, "session_hash": "s2"})
    named = _post(url, "gradio_api/call/no_such_event", {"data": [SECRET]})
    assert unknown == (422, {"error": "event: no such event in this app."})
    assert short[0] == 422 and short[1]["error"].startswith("event: this event takes ")
    assert named == (422, {"error": "event: no such event in this app."})
    time.sleep(0.5)
    new = log.read_text()[len(before) :]
    assert SECRET not in new and "Traceback" not in new and "Received inputs" not in new
    assert sum("refused" in line and "event:" in line for line in new.splitlines()) == 3


def test_one_visitor_holds_at_most_its_share_of_the_queue(space):
    url, _, _ = space
    explain = {"data": [None, 0, "a bird", 3, [], ""]}
    codes = [_post(url, "gradio_api/call/explain", explain)[0] for _ in range(5)]
    assert codes[:2] == [200, 200] and 429 in codes[2:], codes


def test_half_a_header_or_a_trickled_body_is_closed(space):
    url, _, _ = space
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as head:
        head.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        assert closed_within(head, 8)[0]
    with socket.create_connection(("127.0.0.1", port)) as body:
        body.sendall(b"POST /gradio_api/call/explain HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
        body.sendall(b"Content-Length: 1000\r\n\r\n{")
        closed, answer = closed_within(body, 8)
    assert closed and answer.startswith(b"HTTP/1.1 408"), answer[:200]


def test_an_explain_naming_an_upload_leaves_no_temp_file(space):
    import io

    from PIL import Image

    url, _, cache = space
    buffer = io.BytesIO()
    Image.new("RGB", (24, 24), (200, 40, 40)).save(buffer, format="png")
    body = (
        b'--b\r\nContent-Disposition: form-data; name="files"; filename="bird.png"\r\n'
        b"Content-Type: image/png\r\n\r\n" + buffer.getvalue() + b"\r\n--b--\r\n"
    )
    time.sleep(3)  # the share test's events are done
    status, answer = http_request(url + "gradio_api/upload", body, {"Content-Type": "multipart/form-data; boundary=b"})
    assert status == 200, answer
    (path,) = json.loads(answer)
    image = {"path": path, "meta": {"_type": "gradio.FileData"}}
    for _ in range(2):
        status, posted = _post(url, "gradio_api/call/explain", {"data": [image, 0, "a bird", 3, [], ""]})
        assert status == 200, posted
        http_request(f"{url}gradio_api/call/explain/{posted['event_id']}", headers=JSON, timeout=300)

    def strays() -> list:
        return [p for p in cache.glob("tmp*") if p.is_file() and p.stat().st_size == 0]

    assert strays(), "the attack did not happen: no empty tmp file"
    for path in strays():
        os.utime(path, (time.time() - 120, time.time() - 120))  # a minute and more without a write
    _post(url, "gradio_api/call/explain", {"data": [None, 0, "a bird", 3, [], ""]})  # the next join sweeps
    assert strays() == []
