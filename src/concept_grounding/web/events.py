"""The queue's door: every event a visitor sends to a Gradio app is checked before Gradio reads it.

:class:`EventGate` (ASGI middleware, mounted by :func:`~.shell.launch_blocks`) reads the JSON of
``POST …/queue/join`` and refuses, in one line of JSON and one log line that never carries the
values sent (docs/guide/web_shell.md):

* an event that is not a JSON object, names no known ``fn_index`` (or, on Gradio's API routes
  ``…/call/<name>``, ``…/run/<name>``, ``…/api/<name>``, no known event name), or sends fewer inputs
  than the event takes (HTTP 422; Gradio would log its traceback with every value received, or
  answer 500);
* a visitor with ``visitor_queue_events`` events already waiting or running (HTTP 429), so that one
  visitor cannot fill the queue that all visitors share;
* a visitor opening more than ``visitor_sessions`` page sessions within ``cache_age_s`` (HTTP 429):
  Gradio keeps the state of every session hash it is sent.

Each join also deletes the empty temp files earlier events left in the cache folder
(:func:`~.sweep.sweep_stray_temp_files`). ``GET …/deep_link`` (Gradio's snapshot of a session's
components, written to a file under the cache and served to anyone holding its name) is answered
HTTP 404 in every app.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import OrderedDict
from typing import Any

from .limits import Gate, Refused, visitor_of
from .middleware import Watched, replaying, reply
from .sweep import sweep_stray_temp_files

__all__ = ["EventGate", "is_join", "is_deep_link", "api_call"]

#: The refusals that are a visitor's quota (HTTP 429); the others are a malformed event (HTTP 422).
_QUOTA_FIELDS = ("queue:", "session:")
#: ``…/call/<name>``, ``…/run/<name>`` and ``…/api/<name>``: Gradio's API routes, by event name.
_API_CALL = re.compile(r"/(?:call|run|api)/([^/]+)/?$")


def is_join(scope: dict) -> bool:
    """Whether the request joins Gradio's queue (``POST …/queue/join``)."""
    return scope.get("method") == "POST" and scope.get("path", "").rstrip("/").endswith("/queue/join")


def api_call(scope: dict) -> str | None:
    """The event name of a ``POST …/call/<name>``, ``…/run/<name>`` or ``…/api/<name>`` (Gradio's API routes;
    the page's unqueued events post to ``…/run/predict`` with a ``fn_index``), else ``None``."""
    if scope.get("method") != "POST":
        return None
    match = _API_CALL.search(scope.get("path", ""))
    return match.group(1) if match else None


def is_deep_link(scope: dict) -> bool:
    """Whether the request asks Gradio to write a session's snapshot (``…/deep_link``)."""
    return scope.get("path", "").rstrip("/").endswith("/deep_link")


class EventGate:
    """ASGI middleware: the checks of the module docstring on every queue join of ``blocks``.

    Args:
        app: the ASGI app (Gradio's).
        gate: the app's :class:`~.limits.Gate` (its limits and its one-line refusals).
        blocks: the ``gr.Blocks`` served (its events, and its queue's live events).
        folder: Gradio's cache folder, whose stray temp files each join deletes (``None``: none).
    """

    def __init__(self, app: Any, gate: Gate, blocks: Any, folder: str | None = None) -> None:
        self.app = app
        self.folder = folder
        self.gate = gate
        self.blocks = blocks
        self._lock = threading.Lock()
        self._events: dict[str, set[str]] = {}  # visitor -> event ids the queue answered
        self._joining: dict[str, int] = {}  # visitor -> joins being answered now
        self._sessions: dict[str, OrderedDict[str, float]] = {}  # visitor -> {session hash: last join}
        self._joins = 0

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        visitor = visitor_of(scope.get("client"))
        named = api_call(scope)
        if is_deep_link(scope):
            await reply(send, 404, str(self.gate.refuse("deep_link", "this app keeps no session snapshots.", visitor)))
        elif named is not None or is_join(scope):
            await self._event(scope, receive, send, visitor, named)
        else:
            await self.app(scope, receive, send)

    async def _event(self, scope: dict, receive: Any, send: Any, visitor: str, named: str | None) -> None:
        """One event: checked, counted against the visitor while Gradio answers, its event id kept."""
        body = await _read_all(receive)
        if self.folder is not None:
            await asyncio.to_thread(sweep_stray_temp_files, self.folder)
        try:
            by_index = _by_index(named, body)
            session = self.check_event(body, visitor) if by_index else self.check_name(str(named), body, visitor)
            self.admit(visitor, session)
        except Refused as err:
            await reply(send, 429 if str(err).startswith(_QUOTA_FIELDS) else 422, str(err))
            return
        watch = Watched(send)
        try:
            await self.app(scope, replaying(body, receive), watch)
        finally:
            joined = watch.ok_body()
            self.release(visitor, _event_id(joined) if joined is not None else None)

    def check_event(self, body: bytes, visitor: str) -> str:
        """The session hash of a well-formed join for one of the app's events (else :class:`Refused`)."""
        event = self._object(body, visitor)
        fn_index = event.get("fn_index")
        fns = getattr(self.blocks, "fns", {})
        if isinstance(fn_index, bool) or not isinstance(fn_index, int) or fn_index not in fns:
            raise self.gate.refuse("event", "no such event in this app.", visitor)
        self._check_inputs(fns[fn_index], event.get("data"), visitor)
        session = event.get("session_hash")
        return session if isinstance(session, str) else ""

    def check_name(self, name: str, body: bytes, visitor: str) -> str:
        """``""`` (no session) for a well-formed call of the app's event called ``name`` (else :class:`Refused`)."""
        event = self._object(body, visitor)
        fn = next((f for f in getattr(self.blocks, "fns", {}).values() if getattr(f, "api_name", None) == name), None)
        if fn is None:
            raise self.gate.refuse("event", "no such event in this app.", visitor)
        self._check_inputs(fn, event.get("data"), visitor)
        return ""

    def _object(self, body: bytes, visitor: str) -> dict:
        try:
            event = json.loads(body)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            raise self.gate.refuse("event", "not a JSON object.", visitor)
        return event

    def _check_inputs(self, fn: Any, data: Any, visitor: str) -> None:
        """Refuse ``data`` unless it is a list of at least as many values as ``fn`` takes inputs."""
        wanted = len(getattr(fn, "inputs", ()) or ())
        if not isinstance(data, list):
            raise self.gate.refuse("event", f"this event takes a list of {wanted} inputs.", visitor)
        if len(data) < wanted:
            raise self.gate.refuse("event", f"this event takes {wanted} inputs, got {len(data)}.", visitor)

    def admit(self, visitor: str, session: str) -> None:
        """Count a join of ``visitor`` in ``session`` (``""``: none), or refuse it over their share."""
        limits = self.gate.limits
        now = self.gate.now()
        with self._lock:
            self._joins += 1
            if self._joins % 256 == 0:
                self._forget(now)
            live = self._live(visitor) + self._joining.get(visitor, 0)
            full = live >= limits.visitor_queue_events
            sessions = self._sessions.setdefault(visitor, OrderedDict())
            while sessions and now - next(iter(sessions.values())) > limits.cache_age_s:
                sessions.popitem(last=False)
            new_session = bool(session) and session not in sessions
            too_many = new_session and len(sessions) >= limits.visitor_sessions
            if not full and not too_many:
                self._joining[visitor] = self._joining.get(visitor, 0) + 1
                if session:
                    sessions[session] = now
                    sessions.move_to_end(session)
        if full:
            raise self.gate.refuse(
                "queue",
                f"at most {limits.visitor_queue_events} events per visitor in the queue; wait for one.",
                visitor,
            )
        if too_many:
            raise self.gate.refuse(
                "session",
                f"at most {limits.visitor_sessions} page sessions per visitor within {limits.cache_age_s // 60} "
                "minutes.",
                visitor,
            )

    def release(self, visitor: str, event_id: str | None) -> None:
        """A join of ``visitor`` was answered; ``event_id`` (the queue's, when it took the event) counts
        against them until the queue lets it go."""
        with self._lock:
            left = self._joining.get(visitor, 1) - 1
            if left:
                self._joining[visitor] = left
            else:
                self._joining.pop(visitor, None)
            if event_id:
                self._events.setdefault(visitor, set()).add(event_id)

    def _forget(self, now: float) -> None:
        """Drop the visitors whose sessions all expired and whose events all ended (under the lock)."""
        for visitor in list(self._sessions):
            sessions = self._sessions[visitor]
            if all(now - seen > self.gate.limits.cache_age_s for seen in sessions.values()):
                del self._sessions[visitor]
        for visitor in list(self._events):
            self._live(visitor)

    def _live(self, visitor: str) -> int:
        """The visitor's events the queue still holds (waiting or running); forgets the others."""
        mine = self._events.get(visitor)
        if not mine:
            return 0
        queue = getattr(self.blocks, "_queue", None)  # Gradio's queue: no public view of its live events
        live_ids = getattr(queue, "event_ids_to_events", {})
        mine &= set(live_ids)
        if not mine:
            del self._events[visitor]
        return len(mine)

    def queued(self, visitor: str) -> int:
        """The visitor's events waiting or running now (the tests and the benchmark read it)."""
        with self._lock:
            return self._live(visitor)


def _event_id(answer: bytes) -> str | None:
    try:
        value = json.loads(answer)
    except ValueError:
        return None
    event_id = value.get("event_id") if isinstance(value, dict) else None
    return event_id if isinstance(event_id, str) else None


def _by_index(name: str | None, body: bytes) -> bool:
    """Whether Gradio finds the event by the body's ``fn_index`` (a queue join, or an API route's body
    that gives one: Gradio then ignores the name), not by ``name``."""
    if name is None:
        return True
    if b'"fn_index"' not in body:
        return False
    try:
        event = json.loads(body)
    except ValueError:
        return True  # refused as not a JSON object
    return not isinstance(event, dict) or event.get("fn_index") is not None


async def _read_all(receive: Any) -> bytes:
    """The whole request body (already capped by :class:`~.middleware.BodyCap`)."""
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)
