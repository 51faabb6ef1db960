"""A Space no request can poison, through the running app (one server, the
loopback peer its trusted proxy) and at the pieces (the multipart parser, the sweep, the alias).

* one multipart parser decides: a Content-Type that repeats a parameter (two ``boundary=``
  once let 50 files past the 4-file and name checks) or a second Content-Type is refused;
* a request may only name files the Space gave that visitor: another visitor's upload, a
  cache folder, a file never served are refused in one line;
* the cache sweep survives anything (a folder in its lists, a file it cannot delete) and logs
  what it skipped; the running Space's sweep deletes an old upload;
* the ``/space-files/`` alias is rewritten in file paths only: a text holding it comes back
  as written and no answer names the cache folder;
* every request body is capped (413), declared or chunked;
* ``X-Forwarded-For`` names the visitor only from the trusted proxy: a client on another
  address rotating it stays one visitor.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from concept_grounding.testing.serving import http_request

#: The Space's sweep in this module: every 2 s, files older than 6 s.
SWEEP_EVERY_S, CACHE_AGE_S = 2, 6


@pytest.fixture(scope="module")
def space(tmp_path_factory, launch_space):
    """(url, log, cache folder) of a Space that trusts the loopback peer as its proxy and sweeps fast."""
    for url, _, log, cache, _ in launch_space(
        tmp_path_factory,
        CONCEPT_GROUNDING_TRUSTED_PROXIES="127.0.0.1",
        CONCEPT_GROUNDING_LIMIT_SWEEP_EVERY_S=str(SWEEP_EVERY_S),
        CONCEPT_GROUNDING_LIMIT_CACHE_AGE_S=str(CACHE_AGE_S),
    ):
        yield url, log, cache


def _multipart(parts: list[tuple[str, bytes]], boundary: str = "trust-test") -> bytes:
    return (
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


def _upload(
    url: str, body: bytes, content_type: str | list[str], visitor: str | None = None, source: str | None = None
) -> tuple[int, str]:
    types = [content_type] if isinstance(content_type, str) else content_type
    headers = [("Content-Type", t) for t in types] + ([("X-Forwarded-For", visitor)] if visitor else [])
    status, answer = http_request(url + "gradio_api/upload", body, headers, source=source)
    return status, answer.decode("utf-8", "replace")


def _call(
    url: str, api: str, data: list, visitor: str | None = None, source: str | None = None
) -> tuple[str, object, str]:
    """``(kind, data or message, the raw answers)`` of an API call; ``kind`` is "complete" or "error"."""
    headers = {"Content-Type": "application/json", **({"X-Forwarded-For": visitor} if visitor else {})}
    status, posted = http_request(
        f"{url}gradio_api/call/{api}", json.dumps({"data": data}).encode(), headers, source=source
    )
    assert status == 200, posted
    stream = http_request(
        f"{url}gradio_api/call/{api}/{json.loads(posted)['event_id']}", headers=headers, source=source, timeout=300
    )[1].decode()
    kind = "error" if "event: error" in stream else "complete"
    last = json.loads(stream.rsplit("data: ", 1)[1].splitlines()[0])
    return kind, (last["error"] if kind == "error" and isinstance(last, dict) else last), posted.decode() + stream


def _file(path: str) -> dict:
    return {"path": path, "meta": {"_type": "gradio.FileData"}}


def _stored(cache: Path) -> set[Path]:
    return {p for p in cache.rglob("*") if p.is_file()}


def _png() -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (24, 24), (200, 40, 40)).save(buffer, format="png")
    return buffer.getvalue()


# ---- the running Space --------------------------------------------------------------------------


def test_an_upload_that_repeats_a_content_type_parameter_is_refused_before_anything_is_stored(space):
    url, _, cache = space
    before = _stored(cache)
    fifty = _multipart([(f"f{i}.txt", b"a") for i in range(50)], boundary="real")
    for content_type, reason in [
        ("multipart/form-data; boundary=decoy; boundary=real", "parameter 'boundary' twice"),
        ('multipart/form-data; boundary=real; Boundary="decoy"', "parameter 'boundary' twice"),
        (
            ["multipart/form-data; boundary=decoy", "multipart/form-data; boundary=real"],
            "one Content-Type header, got 2",
        ),
    ]:
        status, text = _upload(url, fifty, content_type, visitor="198.51.100.1")
        assert status == 400 and json.loads(text)["error"].startswith("files: ") and reason in text, (status, text)
    twice = (
        b'--real\r\nContent-Disposition: form-data; name="files"; filename="ok.txt"\r\n'
        b'Content-Disposition: form-data; name="files"; filename="\xe2\x80\xaeexe.txt"\r\n\r\nx\r\n--real--\r\n'
    )
    status, text = _upload(url, twice, "multipart/form-data; boundary=real", visitor="198.51.100.1")
    assert status == 400 and "Content-Disposition twice" in text, text
    status, text = _upload(url, fifty, "multipart/form-data; boundary=real", visitor="198.51.100.1")
    assert status == 400 and "at most 4 files per upload request, got 50" in text, text
    assert _stored(cache) == before


def test_a_request_may_only_name_files_the_space_gave_that_visitor(space):
    url, _, cache = space
    status, text = _upload(
        url, _multipart([("bird.png", _png())]), "multipart/form-data; boundary=trust-test", visitor="198.51.100.2"
    )
    assert status == 200, text
    (mine,) = json.loads(text)
    explain = lambda image: [image, 0, "a bird", 3, [], ""]  # noqa: E731
    kind, message, _ = _call(url, "explain", explain(_file(mine)), visitor="198.51.100.3")  # someone else's upload
    assert kind == "error" and message == "Image (optional): not a file uploaded here or given to you by this Space.", (
        message
    )
    for foreign in (str(cache), "/space-files/", mine.rsplit("/", 1)[0], "/etc/passwd", mine + "/../../x.png"):
        kind, message, _ = _call(url, "explain", explain(_file(foreign)), visitor="198.51.100.2")
        assert kind == "error" and message.startswith("Image (optional): not a file uploaded here"), (foreign, message)
    kind, data, _ = _call(url, "explain", explain(_file(mine)), visitor="198.51.100.2")  # their own upload
    assert kind == "complete", data
    served = data[0]["path"]  # the input as used: a file the Space gave this visitor
    kind, data, _ = _call(url, "concepts", [_file(served), 0, 3], visitor="198.51.100.2")
    assert kind == "complete", data
    kind, message, _ = _call(url, "concepts", [_file(served), 0, 3], visitor="198.51.100.3")
    assert kind == "error" and message.startswith("Image (optional): not a file uploaded here"), message


def test_the_running_space_sweeps_its_cache_after_a_request_named_a_cache_folder(space):
    url, log, cache = space
    kind, message, _ = _call(
        url, "metrics", ["concept_confidence_deviation", _file(str(cache))], visitor="198.51.100.4"
    )
    assert kind == "error" and message.startswith("Predictions (.csv or .json): not a file uploaded here"), message
    status, text = _upload(
        url,
        _multipart([("old.bin", os.urandom(64))]),
        "multipart/form-data; boundary=trust-test",
        visitor="198.51.100.4",
    )
    assert status == 200, text
    path = cache / json.loads(text)[0][len("/space-files/") :]
    assert path.is_file()
    deadline = time.monotonic() + CACHE_AGE_S + 4 * SWEEP_EVERY_S + 10
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not path.exists() and "web: cache sweep deleted" in log.read_text()
    assert "Traceback" not in log.read_text()


def test_the_alias_is_rewritten_in_file_paths_only(space):
    """A 200-character text (the longest the tab takes) holding the alias: once rewritten into
    the longer cache folder on the way in, it was refused as too long, naming the folder."""
    url, _, cache = space
    head = "a bird at /space-files/"
    text = head + "x" * (200 - len(head))
    assert len(str(cache)) > len("/space-files")
    kind, data, raw = _call(url, "explain", [None, 0, text, 3, [], ""], visitor="198.51.100.5")
    assert kind == "complete", data
    assert {row[0] for row in data[3]["data"]} == {text}  # the table's text column, as written
    assert str(cache) not in raw and os.path.realpath(cache) not in raw


def test_every_request_body_is_capped(space):
    from concept_grounding.web.limits import WebLimits

    url, _, _ = space
    cap = WebLimits().max_request_bytes
    body = json.dumps({"data": [None, 0, "a bird " * (cap // 7 + 1), 3, [], ""]}).encode()
    for chunked in (False, True):
        status, answer = http_request(
            url + "gradio_api/call/explain", body, {"Content-Type": "application/json"}, chunked=chunked
        )
        message = json.loads(answer)["error"]
        assert status == 413 and message.startswith("request: at most 1 MB per request body") and "\n" not in message
    kind, data, _ = _call(url, "explain", [None, 0, "a bird", 3, [], ""], visitor="198.51.100.6")
    assert kind == "complete", data


def test_forwarded_for_names_the_visitor_only_from_the_trusted_proxy(space):
    """From 127.0.0.1 (the trusted proxy) ``X-Forwarded-For`` is the visitor; from 127.0.0.2 it
    is ignored: rotating it keeps the same visitor, who may use their own upload."""
    url, _, _ = space
    status, text = _upload(
        url,
        _multipart([("rotating.png", _png())]),
        "multipart/form-data; boundary=trust-test",
        visitor="203.0.113.1",
        source="127.0.0.2",
    )
    assert status == 200, text
    (path,) = json.loads(text)
    kind, data, _ = _call(
        url, "explain", [_file(path), 0, "a bird", 3, [], ""], visitor="203.0.113.2", source="127.0.0.2"
    )
    assert kind == "complete", data
    kind, message, _ = _call(url, "explain", [_file(path), 0, "a bird", 3, [], ""], visitor="203.0.113.1")
    assert kind == "error" and message.startswith("Image (optional): not a file uploaded here"), message


# ---- the pieces ---------------------------------------------------------------------------------


def test_the_gate_reads_uploads_as_gradio_s_parser_does():
    from concept_grounding.web.middleware import repeated_parameter, upload_names

    kind = [(b"content-type", b"multipart/form-data; boundary=b")]
    body = (
        b'--b\r\nContent-Disposition: form-data; name="files"; filename="a.png"\r\n\r\n--b-not-a-delimiter\r\n'
        b'--b\r\nContent-Disposition: form-data; name="note"\r\n\r\nhi\r\n--b--\r\n'
    )
    assert upload_names(body, kind) == ["a.png", ""]
    assert repeated_parameter('form-data; name="a;name=b"; filename="x"') is None
    assert repeated_parameter("form-data; name=a; filename=x; NAME=b") == "name"
    for headers, reason in [
        ([], "one Content-Type header, got 0"),
        ([(b"content-type", b"application/json")], "expected a multipart/form-data upload"),
        ([(b"content-type", b"multipart/form-data")], "expected a multipart/form-data upload"),
    ]:
        with pytest.raises(ValueError, match=reason):
            upload_names(body, headers)
    with pytest.raises(ValueError, match="not a well-formed"):
        upload_names(b"--b\r\nno colon here\r\n\r\n", kind)


def test_the_sweep_skips_what_it_cannot_delete_and_logs_it(tmp_path, caplog):
    from concept_grounding.web.sweep import _sweep_logged, sweep

    old, young, folder, gone = (
        tmp_path / "ab" / "old.png",
        tmp_path / "cd" / "young.png",
        tmp_path / "ef",
        tmp_path / "x",
    )
    for path in (old, young):
        path.parent.mkdir()
        path.write_bytes(b"x")
    folder.mkdir()
    kept = tmp_path / "kept.png"
    kept.write_bytes(b"k")
    files = {str(old), str(young), str(folder), str(gone), str(kept)}
    blocks = SimpleNamespace(temp_file_sets=[files], blocks={1: SimpleNamespace(keep_in_cache={str(kept)})})
    created = young.stat().st_ctime
    report = sweep(blocks, 10, now=lambda: created + 11)  # both files 11 s old (a ctime cannot be set)
    assert report.deleted == 2 and report.skipped == [(str(folder), "not a regular file")]
    assert not old.exists() and not old.parent.exists() and folder.is_dir() and kept.exists()
    assert files == {str(kept)}
    young.parent.mkdir()
    young.write_bytes(b"x")
    files.add(str(young))
    created = young.stat().st_ctime
    assert sweep(blocks, 10, now=lambda: created + 5).deleted == 0 and young.exists()
    with caplog.at_level(logging.INFO, logger="concept_grounding.web.sweep"):
        files.add(str(folder))
        _sweep_logged(blocks, None)
    assert not young.exists() and kept.exists() and folder.is_dir()
    assert caplog.messages == ["web: cache sweep deleted 1 file(s), skipped 1 (ef: not a regular file)"]


def test_the_alias_goes_back_to_the_folder_in_file_paths_only():
    from concept_grounding.web.paths import HideServerPaths

    hide = HideServerPaths(None, "/srv/cache")
    body = b'{"data": [{"path": "/space-files/a/b.png", "url": "/space-files/a/b.png"}, "/space-files/c", NaN]}'
    assert json.loads(hide.incoming(body)) == json.loads(
        '{"data": [{"path": "/srv/cache/a/b.png", "url": "/space-files/a/b.png"}, "/space-files/c", NaN]}'
    )
    assert (
        hide.incoming(b'"/space-files/x"') == b'"/space-files/x"'
        and hide.incoming(b"{not json /space-files/") == b"{not json /space-files/"
    )
