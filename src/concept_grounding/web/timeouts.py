"""Read timeouts: a connection that sends half a header, or trickles its body, is closed.

uvicorn (h11) waits for a request's headers and body without a deadline, so one visitor can hold
connections open forever. :func:`header_timeout_protocol` is uvicorn's h11 protocol with a deadline
on the headers (``header_timeout_s`` from the first byte of a request, or from the connection);
:class:`BodyDeadline` (ASGI middleware) gives each request ``body_timeout_s`` to send its whole
body, then answers HTTP 408 with ``Connection: close`` in one line. :func:`timed_server` makes
Gradio's launch use the protocol. Manual: docs/guide/web_shell.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from .limits import Gate, visitor_of
from .middleware import reply

__all__ = ["BodyDeadline", "BodyTimedOut", "header_timeout_protocol", "timed_server"]


class BodyTimedOut(Exception):
    """A request's body did not arrive within its deadline."""


class BodyDeadline:
    """ASGI middleware: a request has ``body_timeout_s`` seconds to send its whole body; past
    that, HTTP 408 (one line, the connection closed). Mounted outermost, so the middlewares that
    buffer a body (:class:`~.middleware.BodyCap`, :class:`~.middleware.UploadGate`) read through it."""

    def __init__(self, app: Any, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or []) if scope.get("type") == "http" else {}
        if b"content-length" not in headers and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # not HTTP, or no body
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.gate.limits.body_timeout_s
        state = {"body_done": False, "started": False}

        async def timed_receive() -> dict:
            if state["body_done"]:
                return await receive()  # after the body: waiting for a disconnect is not timed
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
            except asyncio.TimeoutError:
                raise BodyTimedOut from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                state["body_done"] = True
            return message

        async def watched_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, timed_receive, watched_send)
        except BodyTimedOut:
            limit = self.gate.limits.body_timeout_s
            refusal = self.gate.refuse(
                "request", f"the body must arrive within {limit} s.", visitor_of(scope.get("client"))
            )
            if not state["started"]:
                await reply(send, 408, str(refusal), close=True)


def header_timeout_protocol(seconds: float) -> type:
    """uvicorn's h11 protocol, closing a connection that has not sent a whole request head
    within ``seconds`` of its first byte (or of being opened). Idle connections between
    requests are closed by uvicorn's own keep-alive timeout."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutProtocol(H11Protocol):
        header_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.arm()

        def data_received(self, data: bytes) -> None:
            if self.between_requests():
                self.arm()
            super().data_received(data)
            if not self.between_requests() or self.transport.get_protocol() is not self:
                self.disarm()  # the head arrived (or the connection became a websocket)

        def connection_lost(self, exc: Exception | None) -> None:
            self.disarm()
            super().connection_lost(exc)

        def between_requests(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def arm(self) -> None:
            if self.header_deadline is None:
                self.header_deadline = self.loop.call_later(seconds, self.head_timed_out)

        def disarm(self) -> None:
            if self.header_deadline is not None:
                self.header_deadline.cancel()
                self.header_deadline = None

        def head_timed_out(self) -> None:
            self.header_deadline = None
            if self.between_requests() and not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutProtocol


@contextlib.contextmanager
def timed_server(seconds: float) -> Iterator[None]:
    """Inside, Gradio's launch starts its uvicorn server with :func:`header_timeout_protocol`
    (Gradio builds the server's config itself and offers no setting for it)."""
    from gradio import http_server

    original = http_server.Server

    class TimedServer(original):  # type: ignore[misc, valid-type]
        def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
            config.http = header_timeout_protocol(seconds)
            super().__init__(config, *args, **kwargs)

    http_server.Server = TimedServer
    try:
        yield
    finally:
        http_server.Server = original
