"""The ASGI middlewares in front of Gradio: a cap on every request body, and the upload checks.

* :class:`BodyCap` answers HTTP 413 to any request whose body (declared or sent) is over
  :attr:`~.limits.WebLimits.max_request_bytes`, before a byte of it is kept; the upload
  route is capped by :class:`UploadGate` at ``max_upload_bytes`` instead.
* :class:`UploadGate` reads an upload (at most ``max_upload_bytes``), parses it with the
  parser Gradio's upload route uses (python-multipart's ``MultipartParser`` over the
  boundary that ``parse_options_header`` reads; :func:`upload_names`), refuses anything the
  two could read differently (a second ``Content-Type`` header, a repeated parameter, a part
  with two ``Content-Disposition`` headers), checks the files against the :class:`~.limits.Gate`
  and only then hands the same bytes to Gradio. The files Gradio stored are granted to the
  visitor (:meth:`~.limits.Gate.grant`), the only files a later request of theirs may name.

A refusal is one line of JSON (``{"error": "<field>: <reason>"}``) and one log line.

>>> upload_names(b'--b\\r\\nContent-Disposition: form-data; name="files"; filename="a.png"\\r\\n'
...              b'\\r\\nx\\r\\n--b--\\r\\n',
...              [(b"content-type", b"multipart/form-data; boundary=b")])
['a.png']
>>> repeated_parameter('multipart/form-data; boundary=a; BOUNDARY="b"')
'boundary'
"""

from __future__ import annotations

import json
import re
from typing import Any

from .limits import Gate, Refused, visitor_of

__all__ = [
    "BodyCap",
    "UploadGate",
    "NoUploads",
    "upload_names",
    "repeated_parameter",
    "reply",
    "drain",
    "is_upload",
    "replaying",
    "Watched",
]

_MIB = 2**20
#: ``; name=value`` of a header's parameters, a quoted value taken whole.
_PARAMETER = re.compile(r';\s*([^\s=;]+)\s*=\s*(?:"(?:[^"\\]|\\.)*"|[^;]*)')


def repeated_parameter(header: str) -> str | None:
    """The first parameter name (lower case) that ``header`` gives twice, or ``None``."""
    seen: set[str] = set()
    for match in _PARAMETER.finditer(header):
        name = match.group(1).lower()
        if name in seen:
            return name
        seen.add(name)
    return None


def is_upload(scope: dict) -> bool:
    return scope.get("method") == "POST" and scope.get("path", "").endswith("/upload")


def _size(n: int) -> str:
    return f"{n / _MIB:g} MB" if n >= _MIB else f"{n:,} bytes"


def upload_names(body: bytes, headers: list[tuple[bytes, bytes]]) -> list[str]:
    """The file name of every part of a ``multipart/form-data`` upload (``""`` for a part
    that is a form field, not a file), read as Gradio's upload route reads them.

    Raises:
        ValueError: one sentence: not one ``Content-Type`` header, a repeated parameter, not
            ``multipart/form-data`` with a boundary, a part with two ``Content-Disposition``
            headers, or a body the parser refuses.
    """
    from python_multipart.exceptions import FormParserError
    from python_multipart.multipart import MultipartParser, parse_options_header

    content_types = [v for k, v in headers if k.lower() == b"content-type"]
    if len(content_types) != 1:
        raise ValueError(f"expected one Content-Type header, got {len(content_types)}.")
    content_type = content_types[0].decode("latin-1")
    if repeated := repeated_parameter(content_type):
        raise ValueError(f"the Content-Type gives its parameter {repeated!r} twice.")
    kind, options = parse_options_header(content_type)
    if kind != b"multipart/form-data" or not options.get(b"boundary"):
        raise ValueError("expected a multipart/form-data upload.")
    charset = options.get(b"charset", b"utf-8").decode("latin-1")
    names: list[str] = []
    part: dict[str, Any] = {}

    def header_end() -> None:
        name, value = part.pop("name", b"").lower(), part.pop("value", b"")
        if name == b"content-disposition":
            if "disposition" in part:
                raise ValueError("a part gives its Content-Disposition twice.")
            part["disposition"] = value.decode("latin-1")

    def headers_finished() -> None:
        disposition = part.get("disposition", "")
        if repeated := repeated_parameter(disposition):
            raise ValueError(f"a part's Content-Disposition gives its parameter {repeated!r} twice.")
        filename = parse_options_header(disposition)[1].get(b"filename")
        names.append("" if filename is None else _decode(filename, charset))

    def append(key: str) -> Any:
        return lambda data, start, end: part.__setitem__(key, part.get(key, b"") + data[start:end])

    parser = MultipartParser(
        options[b"boundary"],
        {
            "on_part_begin": part.clear,
            "on_header_field": append("name"),
            "on_header_value": append("value"),
            "on_header_end": header_end,
            "on_headers_finished": headers_finished,
        },
    )
    try:
        parser.write(body)
        parser.finalize()
    except FormParserError:  # the parser's own: a body it cannot read
        raise ValueError("not a well-formed multipart/form-data upload.") from None
    return names


def _decode(value: bytes, charset: str) -> str:
    """``value`` as Gradio decodes a part's name: in ``charset``, else Latin-1."""
    try:
        return value.decode(charset)
    except (UnicodeDecodeError, LookupError):
        return value.decode("latin-1")


class BodyCap:
    """ASGI middleware: HTTP 413 for a request body over ``max_request_bytes`` (the upload
    route excepted: :class:`UploadGate` caps it), before a byte of it is kept."""

    def __init__(self, app: Any, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or is_upload(scope):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length", b"").decode("latin-1").strip()
        if not declared and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body
            return
        limit, visitor = self.gate.limits.max_request_bytes, visitor_of(scope.get("client"))
        refusal = None
        if declared.isdigit() and int(declared) > limit:
            refusal = self.gate.refuse(
                "request", f"at most {_size(limit)} per request body, got {_size(int(declared))}.", visitor
            )
            await drain(receive, self.gate.limits.max_upload_bytes)
        else:
            chunks, total, more = [], 0, True
            while more and refusal is None:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunks.append(message.get("body", b""))
                total += len(chunks[-1])
                more = message.get("more_body", False)
                if total > limit:
                    refusal = self.gate.refuse("request", f"at most {_size(limit)} per request body.", visitor)
                    if more:
                        await drain(receive, self.gate.limits.max_upload_bytes)
        if refusal is not None:
            await reply(send, 413, str(refusal))
            return
        await self.app(scope, replaying(b"".join(chunks), receive), send)


class UploadGate:
    """ASGI middleware: every ``POST …/upload`` passes :class:`~.limits.Gate`'s upload checks
    (:func:`upload_names`) before Gradio stores it; a refusal is an HTTP 413 / 429 / 400 with
    one line of JSON. The stored files are granted to the visitor."""

    def __init__(self, app: Any, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or not is_upload(scope):
            await self.app(scope, receive, send)
            return
        raw = list(scope.get("headers") or [])
        declared = dict(raw).get(b"content-length", b"").decode("latin-1")
        visitor = visitor_of(scope.get("client"))
        body = None
        try:
            self.gate.admit_upload(visitor, int(declared) if declared.isdigit() else None)
            body = await self._read(receive, visitor)
            try:
                names = upload_names(body, raw)
            except ValueError as err:
                raise self.gate.refuse("files", str(err), visitor) from None
            self.gate.check_upload_names(names, visitor)
            self.gate.admit_upload(visitor, len(body))
        except Refused as err:
            if body is None:
                await drain(receive, self.gate.limits.max_upload_bytes)
            await reply(send, _status(str(err)), str(err))
            return
        watch = Watched(send)
        await self.app(scope, replaying(body, receive), watch)
        stored = watch.ok_body()
        if stored is not None:
            self.gate.record_upload(visitor, len(body))
            self.gate.grant(visitor, _stored_paths(stored))

    async def _read(self, receive: Any, visitor: str) -> bytes:
        limit = self.gate.limits.max_upload_bytes
        chunks, total = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise self.gate.refuse("files", "the upload was interrupted.", visitor)
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > limit:
                raise self.gate.refuse("files", f"at most {limit // _MIB} MB per upload request.", visitor)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


class NoUploads:
    """ASGI middleware for an app that takes no files: every ``POST …/upload`` is refused (HTTP 403,
    one line) before a byte of it is stored."""

    def __init__(self, app: Any, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or not is_upload(scope):
            await self.app(scope, receive, send)
            return
        refusal = self.gate.refuse("files", "this app takes no uploads.", visitor_of(scope.get("client")))
        await drain(receive, self.gate.limits.max_request_bytes)
        await reply(send, 403, str(refusal), close=True)  # the rest of the body is never read


def _stored_paths(answer: bytes) -> list[str]:
    """The paths Gradio's upload route answered (a JSON list of strings), ``[]`` otherwise."""
    try:
        paths = json.loads(answer)
    except ValueError:
        return []
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


class Watched:
    """An ASGI ``send`` that passes every message on and keeps the response's status and, when it is 200, its body."""

    def __init__(self, send: Any) -> None:
        self.send = send
        self.code: int | None = None
        self.chunks: list[bytes] = []

    async def __call__(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            self.code = message["status"]
        elif message["type"] == "http.response.body" and self.code == 200:
            self.chunks.append(message.get("body", b""))
        await self.send(message)

    def ok_body(self) -> bytes | None:
        """The body sent so far when the status is 200, else ``None``."""
        return b"".join(self.chunks) if self.code == 200 else None


def replaying(body: bytes, receive: Any) -> Any:
    """A ``receive`` that gives ``body`` whole first, then whatever ``receive`` gives (the disconnect)."""
    sent = []

    async def replay() -> dict:
        if sent:
            return await receive()
        sent.append(True)
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def drain(receive: Any, limit: int) -> None:
    """Read and drop a refused request's body (up to ``limit`` bytes), so that the client,
    still sending, reads the refusal instead of a reset connection."""
    total = 0
    while total <= limit:
        message = await receive()
        total += len(message.get("body", b""))
        if message["type"] == "http.disconnect" or not message.get("more_body", False):
            return


def _status(message: str) -> int:
    if "per visitor" in message or "keeps at most" in message:
        return 429
    if " MB per upload request" in message:
        return 413
    return 400


async def reply(send: Any, status: int, message: str, *, close: bool = False) -> None:
    """Answer one line of JSON, ``{"error": message}``, with ``status`` (and ``Connection: close`` when ``close``)."""
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *([(b"connection", b"close")] if close else []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
