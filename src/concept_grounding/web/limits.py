"""The web apps' limits: one declared policy (:class:`WebLimits`), enforced in one place (:class:`Gate`).

Every limit a visitor can meet (per request, per visitor, in total) is a field of :class:`WebLimits`;
:class:`Gate` holds the running counts, and the handlers, the ASGI middlewares of :mod:`.middleware`
and :mod:`.events` and the Blocks check through it. A refusal is one line naming the field and the
limit (:class:`Refused`). A visitor is the request's address (:func:`visitor_of`); ``X-Forwarded-For``
counts only from a trusted proxy (:func:`trusted_proxies`). Manual: docs/guide/web_shell.md.

>>> gate = Gate(WebLimits(max_list_items=3))
>>> gate.check_items("Baselines", ["random", "random", "saliency"])
['random', 'saliency']
>>> gate.check_items("Baselines", ["a", "b", "c", "d"])
Traceback (most recent call last):
...
concept_grounding.web.limits.Refused: Baselines: at most 3 items per request, got 4.
"""

from __future__ import annotations

import hashlib
import ipaddress
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

from .visitor_input import UserInputError

__all__ = [
    "WebLimits",
    "Refused",
    "Gate",
    "visitor_of",
    "unsafe_name",
    "trusted_proxies",
    "LIMITS_ENV_PREFIX",
    "TRUSTED_PROXIES_ENV",
    "SPACE_PROXIES",
]

logger = logging.getLogger(__name__)

#: ``CONCEPT_GROUNDING_LIMIT_<FIELD>`` (upper case) overrides a field at launch, e.g.
#: ``CONCEPT_GROUNDING_LIMIT_VISITOR_REQUESTS=4``.
LIMITS_ENV_PREFIX = "CONCEPT_GROUNDING_LIMIT_"
#: The proxies whose ``X-Forwarded-For`` names the visitor: comma-separated addresses or
#: networks (``10.0.0.0/8``); empty: none (every peer is the visitor).
TRUSTED_PROXIES_ENV = "CONCEPT_GROUNDING_TRUSTED_PROXIES"
#: The default on a hosted Hugging Face Space (``SPACE_ID`` set): the platform's proxy reaches
#: the container from a private network, and nothing else can reach it.
SPACE_PROXIES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")

_MIB = 2**20


@dataclass(frozen=True)
class WebLimits:
    """What one request, one visitor and the whole app may use (docs/guide/web_shell.md).

    Attributes:
        max_list_items: items in a list field (baselines, texts) per request.
        max_pixels: pixels (width x height) of an uploaded image after decoding; JPEGs are
            decoded at a reduced scale first, so a large photo still fits.
        max_steps: denoising steps of a Tied Diffusion request.
        max_upload_bytes: bytes of one upload request (all its files).
        max_files_per_upload: files in one upload request.
        max_request_bytes: bytes of the body of any other request (API calls, queue joins).
        visitor_requests: requests of one visitor running at once (all tabs together).
        visitor_upload_bytes: upload bytes of one visitor kept in the cache.
        total_upload_bytes: upload bytes of all visitors kept in the cache.
        cache_age_s: seconds a stored file is kept (uploads and served images).
        sweep_every_s: seconds between two sweeps of the cache.
        queue_size: events waiting in the app's queue, all visitors together.
        visitor_queue_events: events of one visitor waiting or running in the queue at once.
        visitor_sessions: page sessions (Gradio session hashes) one visitor may open within ``cache_age_s``.
        header_timeout_s: seconds a connection may take to send a request's headers.
        body_timeout_s: seconds a request may take to send its whole body.
    """

    max_list_items: int = 8
    max_pixels: int = 2048 * 2048
    max_steps: int = 50
    max_upload_bytes: int = 20 * _MIB
    max_files_per_upload: int = 4
    max_request_bytes: int = _MIB
    visitor_requests: int = 2
    visitor_upload_bytes: int = 64 * _MIB
    total_upload_bytes: int = 1024 * _MIB
    cache_age_s: int = 900
    sweep_every_s: int = 300
    queue_size: int = 64
    visitor_queue_events: int = 16
    visitor_sessions: int = 64
    header_timeout_s: int = 10
    body_timeout_s: int = 30

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"WebLimits.{f.name} must be an integer >= 1, got {value!r}")
        if self.sweep_every_s > self.cache_age_s:
            raise ValueError("WebLimits.sweep_every_s must be at most cache_age_s")
        if self.visitor_queue_events > self.queue_size:
            raise ValueError("WebLimits.visitor_queue_events must be at most queue_size")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WebLimits:
        """The defaults, with every ``CONCEPT_GROUNDING_LIMIT_<FIELD>`` set in ``environ``.

        >>> WebLimits.from_env({"CONCEPT_GROUNDING_LIMIT_VISITOR_REQUESTS": "4"}).visitor_requests
        4
        >>> WebLimits.from_env({"CONCEPT_GROUNDING_LIMIT_MAX_PIXELS": "lots"})
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
        return (
            f"Limits: {self.visitor_requests} requests at once per visitor; uploads up to "
            f"{self.max_upload_bytes // _MIB} MB and {self.max_pixels / 1e6:.1f} megapixels, "
            f"{self.visitor_upload_bytes // _MIB} MB per visitor, kept {self.cache_age_s // 60} minutes."
        )


class Refused(UserInputError):
    """A request over one of the :class:`WebLimits`; the message names the field and the limit."""


def visitor_of(client: Any) -> str:
    """Who sent a request: the client address of its ASGI scope (``(host, port)``) or of a
    Starlette / Gradio request (``.host``), ``"unknown"`` when there is none.

    The web server has already replaced the peer by the address in ``X-Forwarded-For`` when,
    and only when, the peer is one of the :func:`trusted_proxies` (uvicorn's proxy-header
    middleware, configured by :func:`concept_grounding.space.launch`); no header is read here.

    >>> visitor_of(("93.184.216.34", 51000))
    '93.184.216.34'
    >>> visitor_of(None)
    'unknown'
    """
    host = client[0] if isinstance(client, (tuple, list)) and client else getattr(client, "host", None)
    return str(host) if host else "unknown"


def trusted_proxies(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The proxies whose ``X-Forwarded-For`` is believed: ``$CONCEPT_GROUNDING_TRUSTED_PROXIES``
    (comma-separated addresses or networks), else :data:`SPACE_PROXIES` on a hosted Space
    (``SPACE_ID`` set), else none.

    >>> trusted_proxies({})
    ()
    >>> trusted_proxies({"SPACE_ID": "you/demo"})
    ('10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16')
    >>> trusted_proxies({"CONCEPT_GROUNDING_TRUSTED_PROXIES": " 127.0.0.1, ::1 "})
    ('127.0.0.1', '::1')
    >>> trusted_proxies({"CONCEPT_GROUNDING_TRUSTED_PROXIES": "*"})
    Traceback (most recent call last):
    ...
    ValueError: CONCEPT_GROUNDING_TRUSTED_PROXIES: '*' is not an IP address or network
    """
    env = os.environ if environ is None else environ
    text = env.get(TRUSTED_PROXIES_ENV)
    if text is None:
        return SPACE_PROXIES if env.get("SPACE_ID") else ()
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    for name in names:
        try:
            ipaddress.ip_network(name, strict=False)
        except ValueError:
            raise ValueError(f"{TRUSTED_PROXIES_ENV}: {name!r} is not an IP address or network") from None
    return names


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
    """Counts what visitors use and refuses what is over :class:`WebLimits` (thread-safe)."""

    def __init__(self, limits: WebLimits | None = None, clock: Any = time.monotonic) -> None:
        self.limits = limits if limits is not None else WebLimits()
        self._clock = clock
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}
        self._uploads: deque[tuple[float, str, int]] = deque()  # (when, visitor, bytes), oldest first
        self._granted: dict[str, dict[str, float]] = {}  # visitor -> {file path: when granted}
        self._grants = 0
        #: refusals so far, by field (the benchmark reads it)
        self.refusals: dict[str, int] = {}

    def now(self) -> float:
        """The gate's clock (seconds)."""
        return self._clock()

    def refuse(self, field: str, reason: str, visitor: str | None = None) -> Refused:
        """A :class:`Refused` ``"<field>: <reason>"``, logged as one line (the visitor as a short hash)."""
        message = f"{field}: {reason}"
        with self._lock:
            self.refusals[field] = self.refusals.get(field, 0) + 1
        logger.warning("web: refused (visitor %s) %s", _tag(visitor) if visitor else "-", message[:300])
        return Refused(message)

    # per request -------------------------------------------------------------------------
    def check_items(self, field: str, values: Iterable[Any] | None, visitor: str | None = None) -> list[Any]:
        """``values`` without repeats (first occurrence kept), if at most ``max_list_items``."""
        unique = list(dict.fromkeys(values or ()))
        if len(unique) > self.limits.max_list_items:
            raise self.refuse(
                field, f"at most {self.limits.max_list_items} items per request, got {len(unique)}.", visitor
            )
        return unique

    def check_pixels(self, field: str, width: int, height: int, visitor: str | None = None) -> None:
        """Refuse an image whose decoded ``width x height`` is over ``max_pixels``."""
        if width * height > self.limits.max_pixels:
            raise self.refuse(
                field, f"at most {self.limits.max_pixels:,} pixels after decoding, got {width} x {height}.", visitor
            )

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
            raise self.refuse(
                field,
                f"at most {self.limits.visitor_requests} requests at once per visitor; wait for one to finish.",
                visitor,
            )
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
            raise self.refuse(
                "files",
                f"at most {limits.max_upload_bytes // _MIB} MB per upload request, got {size / _MIB:.1f} MB.",
                visitor,
            )
        size = size or 0
        if self.stored_bytes(visitor) + size > limits.visitor_upload_bytes:
            raise self.refuse(
                "files",
                f"at most {limits.visitor_upload_bytes // _MIB} MB of uploads per visitor "
                f"within {limits.cache_age_s // 60} minutes.",
                visitor,
            )
        if self.stored_bytes() + size > limits.total_upload_bytes:
            raise self.refuse(
                "files",
                f"this Space keeps at most {limits.total_upload_bytes // _MIB} MB of uploads; try again later.",
                visitor,
            )

    def check_upload_names(self, names: list[str], visitor: str) -> None:
        """Refuse an upload request with more than ``max_files_per_upload`` files or a file
        name :func:`unsafe_name` refuses."""
        if len(names) > self.limits.max_files_per_upload:
            raise self.refuse(
                "files",
                f"at most {self.limits.max_files_per_upload} files per upload request, got {len(names)}.",
                visitor,
            )
        for name in names:
            why = unsafe_name(name)
            if why:
                raise self.refuse("files", f"the file name {why}.", visitor)

    def record_upload(self, visitor: str, size: int) -> None:
        """Count ``size`` stored bytes against ``visitor`` (until the cache sweep drops them)."""
        with self._lock:
            self._uploads.append((self._clock(), visitor, int(size)))

    # files a visitor may name -----------------------------------------------------------
    def grant(self, visitor: str, paths: Iterable[str]) -> None:
        """Let ``visitor`` name the files ``paths`` in later requests (the Space uploaded or
        served them to that visitor) until the cache sweep may have deleted them."""
        now = self._clock()
        with self._lock:
            mine = self._granted.setdefault(visitor, {})
            for path in paths:
                mine[_file_key(path)] = now
                self._grants += 1
            if self._grants % 256 == 0:
                self._forget_expired(now)

    def granted(self, visitor: str, path: str) -> bool:
        """Whether ``visitor`` was given the file ``path`` (:meth:`grant`) and it may still be there."""
        with self._lock:
            when = self._granted.get(visitor, {}).get(_file_key(path))
        return when is not None and self._clock() - when <= self.limits.cache_age_s + self.limits.sweep_every_s

    def _forget_expired(self, now: float) -> None:
        horizon = now - self.limits.cache_age_s - self.limits.sweep_every_s
        for visitor in list(self._granted):
            kept = {p: t for p, t in self._granted[visitor].items() if t >= horizon}
            if kept:
                self._granted[visitor] = kept
            else:
                del self._granted[visitor]


def _file_key(path: str) -> str:
    """One spelling of a file path (absolute, ``..`` and doubled slashes folded, links not followed)."""
    return os.path.normpath(os.path.abspath(str(path)))
