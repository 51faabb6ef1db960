"""The server's folders stay on the server: an alias for Gradio's file cache in every response.

Gradio names every file it serves (an upload, an image a tab returns) by its absolute path
in its cache folder, in the JSON and in the URL (``/gradio_api/file=/tmp/.../image.png``),
so a visitor reads where the server keeps its files. :class:`HideServerPaths` (ASGI
middleware, installed by :func:`concept_grounding.space.launch`) writes :data:`ALIAS`
instead of the cache folder in every text / JSON / event-stream response, and turns the
alias back into the folder where a request names a file: a file URL's path, and the ``path``
of a file object (``{"path": ..., "meta": {"_type": "gradio.FileData"}}``) in a JSON request
body, so Gradio itself only ever sees its real paths. Anything else a visitor writes (a text
that contains ``/space-files/``) reaches Gradio as written.

>>> hide = HideServerPaths(None, "/srv/space/cache")
>>> hide.outgoing(b'{"path": "/srv/space/cache/ab12/image.png"}')
b'{"path": "/space-files/ab12/image.png"}'
>>> hide.incoming(b'{"data": [{"path": "/space-files/ab12/bird.png"}, "see /space-files/x"]}')
b'{"data": [{"path": "/srv/space/cache/ab12/bird.png"}, "see /space-files/x"]}'
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["ALIAS", "HideServerPaths"]

#: What visitors read in place of the cache folder's absolute path.
ALIAS = "/space-files"
#: Response types rewritten (others, such as the served images themselves, pass untouched).
_TEXT_TYPES = (b"application/json", b"text/", b"application/javascript")


class HideServerPaths:
    """ASGI middleware: :data:`ALIAS` for the folder ``root`` (and its resolved form) outbound,
    the folder for the alias inbound (module docstring).

    Args:
        app: the ASGI app (Gradio's).
        root: Gradio's cache folder (``gradio.utils.get_upload_folder()``).
        alias: what the visitor reads instead.
    """

    def __init__(self, app: Any, root: str | os.PathLike[str], alias: str = ALIAS) -> None:
        self.app = app
        self.alias = alias.encode()
        self.root = str(root).rstrip("/").encode()
        roots = {str(root).rstrip("/"), os.path.realpath(str(root)).rstrip("/")}
        self.roots = sorted((r.encode() for r in roots if r), key=len, reverse=True)  # longest first

    def outgoing(self, data: bytes) -> bytes:
        """``data`` with every cache-folder path written as the alias."""
        for root in self.roots:
            data = data.replace(root + b"/", self.alias + b"/")
        return data

    def incoming(self, data: bytes) -> bytes:
        """A JSON request body with the alias written back as the cache folder in the ``path``
        of every file object (a dict whose ``path`` is a string), nothing else; a body that is
        not JSON, or names no aliased file, is returned as is."""
        if self.alias + b"/" not in data:
            return data
        try:
            value = json.loads(data)
        except ValueError:
            return data
        changed = []

        def restore(node: Any) -> Any:
            if isinstance(node, list):
                return [restore(v) for v in node]
            if not isinstance(node, dict):
                return node
            node = {k: restore(v) for k, v in node.items()}
            path = node.get("path")
            if isinstance(path, str) and path.startswith(self.alias.decode() + "/"):
                node["path"] = self._restore_path(path)
                changed.append(True)
            return node

        value = restore(value)
        return json.dumps(value).encode() if changed else data

    def _restore_path(self, path: str) -> str:
        """``/space-files/<rest>`` -> ``<root>/<rest>``."""
        return self.root.decode() + path[len(self.alias) :]

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        scope = self._request_path(scope)
        receive = await self._request_body(scope, receive)
        await self.app(scope, receive, self._response(send))

    def _request_path(self, scope: dict) -> dict:
        path = scope.get("path", "")
        if ("=" + self.alias.decode() + "/") not in path:
            return scope
        marker = "=" + self.alias.decode() + "/"
        scope = dict(scope, path=path.replace(marker, "=" + self.root.decode() + "/", 1))
        if isinstance(scope.get("raw_path"), bytes):
            scope["raw_path"] = scope["raw_path"].replace(marker.encode(), b"=" + self.root + b"/", 1)
        return scope

    async def _request_body(self, scope: dict, receive: Any) -> Any:
        """A ``receive`` whose JSON body has the alias turned back into the folder."""
        headers = dict(scope.get("headers") or [])
        if scope.get("method") != "POST" or not headers.get(b"content-type", b"").startswith(b"application/json"):
            return receive
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return _replaying([message], receive)
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = self.incoming(b"".join(chunks))
        scope["headers"] = [
            (k, str(len(body)).encode() if k == b"content-length" else v) for k, v in scope.get("headers") or []
        ]
        return _replaying([{"type": "http.request", "body": body, "more_body": False}], receive)

    def _response(self, send: Any) -> Any:
        """A ``send`` that rewrites text bodies: chunk by chunk when streamed, whole (with a new
        ``content-length``) otherwise."""
        state: dict[str, Any] = {"rewrite": False, "start": None, "buffer": []}

        async def wrapped(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                kind = headers.get(b"content-type", b"")
                state["rewrite"] = any(kind.startswith(t) for t in _TEXT_TYPES) and b"content-encoding" not in headers
                state["sized"] = b"content-length" in headers
                if state["rewrite"] and state["sized"]:
                    state["start"] = message  # sent with the whole body, its length corrected
                    return
                await send(message)
                return
            if message["type"] != "http.response.body" or not state["rewrite"]:
                await send(message)
                return
            if not state["sized"]:
                await send(dict(message, body=self.outgoing(message.get("body", b""))))
                return
            state["buffer"].append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = self.outgoing(b"".join(state["buffer"]))
            start = state["start"]
            headers = [(k, str(len(body)).encode() if k == b"content-length" else v) for k, v in start["headers"]]
            await send(dict(start, headers=headers))
            await send({"type": "http.response.body", "body": body, "more_body": False})

        return wrapped


def _replaying(messages: list[dict], receive: Any) -> Any:
    """A ``receive`` giving ``messages`` first, then whatever ``receive`` gives (the disconnect)."""
    queue = list(messages)

    async def replay() -> dict:
        return queue.pop(0) if queue else await receive()

    return replay
