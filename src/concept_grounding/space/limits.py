"""The Space's limits: one declared policy, enforced in one place (:class:`Gate`).

Every limit a visitor can meet is a field of :class:`SpaceLimits`:

* per request: items in any list a visitor sends (``max_list_items``), pixels of an
  uploaded image after decoding (``max_pixels``), denoising steps (``max_steps``), bytes
  and files of one upload request (``max_upload_bytes``, ``max_files_per_upload``);
* per visitor: requests running at once (``visitor_requests``), upload bytes kept in the
  cache (``visitor_upload_bytes``);
* in total: upload bytes kept in the cache (``total_upload_bytes``) and how long the cache
  keeps a file (``cache_age_s``, swept every ``sweep_every_s``).

:class:`Gate` holds the running counts and checks them: the handlers ask it for a slot
(:meth:`Gate.slot`) and check their lists and images through it, and the ASGI middleware
:class:`UploadGate` (added by :func:`concept_grounding.space.launch`) checks every upload
before Gradio stores a byte of it. A refusal is one line naming the field and the limit
(:class:`Refused`), and the log gets one line per refused request.

A visitor is the address the request came from (:func:`visitor_of`); behind a proxy (a
hosted Space) the address the proxy appended to ``X-Forwarded-For``.

>>> gate = Gate(SpaceLimits(max_list_items=3))
>>> gate.check_items("Baselines", ["random", "random", "saliency"])
['random', 'saliency']
>>> gate.check_items("Baselines", ["a", "b", "c", "d"])
Traceback (most recent call last):
...
concept_grounding.space.limits.Refused: Baselines: at most 3 items per request, got 4.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import os
import threading
import time
import unicodedata
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

from .inputs import UserInputError

__all__ = ["SpaceLimits", "Refused", "Gate", "UploadGate", "visitor_of", "unsafe_name", "LIMITS_ENV_PREFIX"]

logger = logging.getLogger(__name__)

#: ``CONCEPT_GROUNDING_LIMIT_<FIELD>`` (upper case) overrides a field at launch, e.g.
#: ``CONCEPT_GROUNDING_LIMIT_VISITOR_REQUESTS=4``.
LIMITS_ENV_PREFIX = "CONCEPT_GROUNDING_LIMIT_"

_MIB = 2**20


@dataclass(frozen=True)
class SpaceLimits:
    """What one request, one visitor and the whole Space may use (module docstring).

    Attributes:
        max_list_items: items in a list field (baselines, texts) per request.
        max_pixels: pixels (width x height) of an uploaded image after decoding; JPEGs are
            decoded at a reduced scale first, so a large photo still fits.
        max_steps: denoising steps of a Tied Diffusion request.
        max_upload_bytes: bytes of one upload request (all its files).
        max_files_per_upload: files in one upload request.
        visitor_requests: requests of one visitor running at once (all tabs together).
        visitor_upload_bytes: upload bytes of one visitor kept in the cache.
        total_upload_bytes: upload bytes of all visitors kept in the cache.
        cache_age_s: seconds a stored file is kept (uploads and served images).
        sweep_every_s: seconds between two sweeps of the cache.
    """

    max_list_items: int = 8
    max_pixels: int = 2048 * 2048
    max_steps: int = 50
    max_upload_bytes: int = 20 * _MIB
    max_files_per_upload: int = 4
    visitor_requests: int = 2
    visitor_upload_bytes: int = 64 * _MIB
    total_upload_bytes: int = 1024 * _MIB
    cache_age_s: int = 900
    sweep_every_s: int = 300

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"SpaceLimits.{f.name} must be an integer >= 1, got {value!r}")
        if self.sweep_every_s > self.cache_age_s:
            raise ValueError("SpaceLimits.sweep_every_s must be at most cache_age_s")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SpaceLimits:
        """The defaults, with every ``CONCEPT_GROUNDING_LIMIT_<FIELD>`` set in ``environ``.

        >>> SpaceLimits.from_env({"CONCEPT_GROUNDING_LIMIT_VISITOR_REQUESTS": "4"}).visitor_requests
        4
        >>> SpaceLimits.from_env({"CONCEPT_GROUNDING_LIMIT_MAX_PIXELS": "lots"})
        Traceback (most recent call last):
        ...
        ValueError: CONCEPT_GROUNDING_LIMIT_MAX_PIXELS must be an integer >= 1, got 'lots'
        """
        env = os.environ if environ is None else environ
        values = {}
        for f in fields(cls):
            key = LIMITS_ENV_PREFIX + f.name.upper()
            text = env.get(key, "").strip()
            if text:
                try:
                    values[f.name] = int(text)
                except ValueError:
                    raise ValueError(f"{key} must be an integer >= 1, got {text!r}") from None
        return cls(**values)

    @property
    def delete_cache(self) -> tuple[int, int]:
        """Gradio's ``delete_cache``: ``(sweep_every_s, cache_age_s)``."""
        return (self.sweep_every_s, self.cache_age_s)

    def markdown(self) -> str:
        """The limits as one sentence for the page."""
        return (f"Limits: {self.visitor_requests} requests at once per visitor; uploads up to "
                f"{self.max_upload_bytes // _MIB} MB and {self.max_pixels / 1e6:.1f} megapixels, "
                f"{self.visitor_upload_bytes // _MIB} MB per visitor, kept {self.cache_age_s // 60} minutes.")


class Refused(UserInputError):
    """A request over one of the :class:`SpaceLimits`; the message names the field and the limit."""


def visitor_of(host: str | None, forwarded_for: str | None = None) -> str:
    """Who sent a request: the peer address ``host``, or, when that peer is a proxy (a
    private or loopback address) and says whom it forwards, the last address of
    ``X-Forwarded-For`` (the one the proxy appended; those before it the client wrote).

    >>> visitor_of("93.184.216.34", "10.0.0.1")
    '93.184.216.34'
    >>> visitor_of("10.1.2.3", "1.2.3.4, 93.184.216.35")
    '93.184.216.35'
    """
    host = host or "unknown"
    if forwarded_for:
        try:
            behind_proxy = ipaddress.ip_address(host).is_private
        except ValueError:
            behind_proxy = False
        last = forwarded_for.split(",")[-1].strip()
        if behind_proxy and last:
            return last
    return host


def _tag(visitor: str) -> str:
    """A short, stable tag of a visitor for the log (no address in the log)."""
    return hashlib.sha256(visitor.encode()).hexdigest()[:8]


def unsafe_name(name: str) -> str | None:
    """Why a file name may not be stored or shown (empty, a path, control or bidirectional
    formatting characters such as U+202E), or ``None`` when it is fine.

    >>> unsafe_name("bird.png") is None
    True
    >>> unsafe_name("gnp.\\u202eevil.exe")
    'contains control or bidirectional formatting characters'
    """
    if not name.strip():
        return "is empty"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name):
        return "contains control or bidirectional formatting characters"
    if "/" in name or "\\" in name or name in (".", ".."):
        return "is a path, not a file name"
    if len(name.encode("utf-8", "replace")) > 255:
        return "is longer than 255 bytes"
    return None


class Gate:
    """Counts what visitors use and refuses what is over :class:`SpaceLimits` (thread-safe)."""

    def __init__(self, limits: SpaceLimits | None = None, clock: Any = time.monotonic) -> None:
        self.limits = limits if limits is not None else SpaceLimits()
        self._clock = clock
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}
        self._uploads: deque[tuple[float, str, int]] = deque()  # (when, visitor, bytes), oldest first
        #: refusals so far, by field (the benchmark reads it)
        self.refusals: dict[str, int] = {}

    def refuse(self, field: str, reason: str, visitor: str | None = None) -> Refused:
        """A :class:`Refused` ``"<field>: <reason>"``, logged as one line."""
        message = f"{field}: {reason}"
        with self._lock:
            self.refusals[field] = self.refusals.get(field, 0) + 1
        logger.warning("space: refused (visitor %s) %s", _tag(visitor) if visitor else "-", message[:300])
        return Refused(message)

    # per request -------------------------------------------------------------------------
    def check_items(self, field: str, values: Iterable[Any] | None, visitor: str | None = None) -> list[Any]:
        """``values`` without repeats (first occurrence kept), if at most ``max_list_items``."""
        unique = list(dict.fromkeys(values or ()))
        if len(unique) > self.limits.max_list_items:
            raise self.refuse(field, f"at most {self.limits.max_list_items} items per request, got {len(unique)}.", visitor)
        return unique

    def check_pixels(self, field: str, width: int, height: int, visitor: str | None = None) -> None:
        """Refuse an image whose decoded ``width x height`` is over ``max_pixels``."""
        if width * height > self.limits.max_pixels:
            raise self.refuse(field, f"at most {self.limits.max_pixels:,} pixels after decoding, got "
                                     f"{width} x {height}.", visitor)

    # per visitor -------------------------------------------------------------------------
    @contextmanager
    def slot(self, visitor: str, field: str = "Requests") -> Iterator[None]:
        """Hold one of the visitor's ``visitor_requests`` running requests while inside."""
        with self._lock:
            running = self._running.get(visitor, 0)
            full = running >= self.limits.visitor_requests
            if not full:
                self._running[visitor] = running + 1
        if full:
            raise self.refuse(field, f"at most {self.limits.visitor_requests} requests at once per visitor; "
                                     "wait for one to finish.", visitor)
        try:
            yield
        finally:
            with self._lock:
                left = self._running[visitor] - 1
                if left:
                    self._running[visitor] = left
                else:
                    del self._running[visitor]

    def running(self, visitor: str) -> int:
        with self._lock:
            return self._running.get(visitor, 0)

    # uploads -----------------------------------------------------------------------------
    def _expire(self) -> None:
        horizon = self._clock() - self.limits.cache_age_s - self.limits.sweep_every_s
        while self._uploads and self._uploads[0][0] < horizon:
            self._uploads.popleft()

    def stored_bytes(self, visitor: str | None = None) -> int:
        """Upload bytes still in the cache: of ``visitor``, or of everyone."""
        with self._lock:
            self._expire()
            return sum(n for _, v, n in self._uploads if visitor is None or v == visitor)

    def admit_upload(self, visitor: str, size: int | None) -> None:
        """Refuse an upload request of ``size`` bytes (``None``: not declared) over the
        per-request, per-visitor or total upload limit."""
        limits = self.limits
        if size is not None and size > limits.max_upload_bytes:
            raise self.refuse("files", f"at most {limits.max_upload_bytes // _MIB} MB per upload request, got "
                                       f"{size / _MIB:.1f} MB.", visitor)
        size = size or 0
        if self.stored_bytes(visitor) + size > limits.visitor_upload_bytes:
            raise self.refuse("files", f"at most {limits.visitor_upload_bytes // _MIB} MB of uploads per visitor "
                                       f"within {limits.cache_age_s // 60} minutes.", visitor)
        if self.stored_bytes() + size > limits.total_upload_bytes:
            raise self.refuse("files", f"this Space keeps at most {limits.total_upload_bytes // _MIB} MB of uploads; "
                                       "try again later.", visitor)

    def check_upload_names(self, names: list[str], visitor: str) -> None:
        """Refuse an upload request with more than ``max_files_per_upload`` files or a file
        name :func:`unsafe_name` refuses."""
        if len(names) > self.limits.max_files_per_upload:
            raise self.refuse("files", f"at most {self.limits.max_files_per_upload} files per upload request, "
                                       f"got {len(names)}.", visitor)
        for name in names:
            why = unsafe_name(name)
            if why:
                raise self.refuse("files", f"the file name {why}.", visitor)

    def record_upload(self, visitor: str, size: int) -> None:
        """Count ``size`` stored bytes against ``visitor`` (until the cache sweep drops them)."""
        with self._lock:
            self._uploads.append((self._clock(), visitor, int(size)))


def _part_names(body: bytes, content_type: str) -> list[str] | None:
    """The ``filename`` of every part of a ``multipart/form-data`` body (``""`` for a file
    part whose name is empty), or ``None`` when the body is not one."""
    boundary = next((p.split("=", 1)[1].strip().strip('"') for p in content_type.split(";")
                     if p.strip().lower().startswith("boundary=")), "")
    if not boundary:
        return None
    names = []
    for part in body.split(b"--" + boundary.encode("latin-1"))[1:]:
        head = part.split(b"\r\n\r\n", 1)[0]
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-disposition:"):
                text = line.decode("utf-8", "replace")
                key = 'filename="'
                if key in text:
                    names.append(text.split(key, 1)[1].rsplit('"', 1)[0])
                elif "name=" in text:
                    names.append("")  # a form field where a file was expected
    return names


class UploadGate:
    """ASGI middleware: every ``POST …/upload`` passes :class:`Gate`'s upload checks before
    Gradio stores it; a refusal is an HTTP 413 / 429 / 400 with one line of JSON."""

    def __init__(self, app: Any, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or not scope.get("path", "").endswith("/upload"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        visitor = visitor_of((scope.get("client") or ("unknown", 0))[0], headers.get("x-forwarded-for"))
        declared = headers.get("content-length")
        body = None
        try:
            self.gate.admit_upload(visitor, int(declared) if declared and declared.isdigit() else None)
            body = await self._read(receive, visitor)
            names = _part_names(body, headers.get("content-type", ""))
            if names is None:
                raise self.gate.refuse("files", "expected a multipart/form-data upload.", visitor)
            self.gate.check_upload_names(names, visitor)
            self.gate.admit_upload(visitor, len(body))
        except Refused as err:
            if body is None:
                await _drain(receive, self.gate.limits.max_upload_bytes)
            await _reply(send, _status(str(err)), str(err))
            return
        size, status = len(body), {}

        sent = []

        async def replay() -> dict:
            if sent:
                return await receive()  # after the body: the disconnect, when it comes
            sent.append(True)
            return {"type": "http.request", "body": body, "more_body": False}

        async def watch(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        await self.app(scope, replay, watch)
        if status.get("code") == 200:
            self.gate.record_upload(visitor, size)

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


async def _drain(receive: Any, limit: int) -> None:
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


async def _reply(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
