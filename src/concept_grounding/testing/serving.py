"""A local server for tests and benchmarks: a free loopback port, waiting for its first HTTP 200, stopping it.

The Space's and the annotation app's browser tests and their benchmarks start the app in a
subprocess and wait until it answers; this is that wait, written once.

>>> 1024 <= free_port() <= 65535
True
"""

from __future__ import annotations

import http.client
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

__all__ = ["free_port", "wait_until_serving", "stop_server", "http_request", "closed_within"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_serving(
    proc: subprocess.Popen, url: str, *, timeout: float = 120.0, log: Path | None = None, poll: float = 0.2
) -> float:
    """Poll ``url`` until it answers HTTP 200; returns the seconds waited.

    Raises:
        RuntimeError: ``proc`` exited first, or ``timeout`` seconds passed (the process is then
            killed); the message ends with the last 3,000 characters of ``log`` when given.
    """
    start = time.perf_counter()
    tail = lambda: f":\n{log.read_text(errors='replace')[-3000:]}" if log is not None and log.exists() else ""  # noqa: E731
    while time.perf_counter() - start < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}{tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return time.perf_counter() - start
        except OSError:
            time.sleep(poll)
    proc.kill()
    raise RuntimeError(f"no HTTP 200 from {url} within {timeout:g} s{tail()}")


def stop_server(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM ``proc`` (the app's own shutdown runs), then SIGKILL it if it is still alive after
    ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


def http_request(
    url: str,
    data: bytes | None = None,
    headers: dict[str, str] | list[tuple[str, str]] | None = None,
    *,
    source: str | None = None,
    chunked: bool = False,
    timeout: float = 60.0,
) -> tuple[int, bytes]:
    """``(status, body)`` of one HTTP request to ``url`` (POST when ``data`` is given, GET
    otherwise), sent from the local address ``source`` (e.g. ``"127.0.0.2"``, another peer
    on the loopback network) when given; ``headers`` as a list may repeat a name; ``chunked``
    sends ``data`` without a ``Content-Length``."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(
        parts.hostname, parts.port, timeout=timeout, source_address=(source, 0) if source else None
    )
    try:
        connection.putrequest(
            "POST" if data is not None else "GET", parts.path + (f"?{parts.query}" if parts.query else "")
        )
        pairs = headers.items() if isinstance(headers, dict) else (headers or [])
        for name, value in pairs:
            connection.putheader(name, value)
        if data is not None:
            connection.putheader(
                "Transfer-Encoding" if chunked else "Content-Length", "chunked" if chunked else str(len(data))
            )
        connection.endheaders()
        if data is not None:
            connection.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data) if chunked else data)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server closed ``sock`` within ``seconds`` (and what it answered first)."""
    sock.settimeout(seconds)
    got = b""
    try:
        while chunk := sock.recv(4096):
            got += chunk
    except TimeoutError:
        return False, got
    return True, got
