"""The mock over a real socket: an ASGI app serving a :class:`MockResponsesAPI`.

The API answers exactly as the in-process transport does (same routes, bodies, statuses and
headers); a streamed answer is sent frame by frame as the mock produces it. Transport faults
become what a client sees on a real connection: a timeout holds the request unanswered until
the client gives up, a connect error or a drop closes the connection (mid-stream: after the
frames already sent). A client that disconnects cancels its request, as a cancelled client
task does in process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import httpx2

from ._admin import ADMIN_PREFIX, Admin
from ._items import ApiError
from ._mock_server import MockResponsesAPI
from ._responses import Responder

__all__ = ["CLOSE_CONNECTION", "ASGIApp", "mock_asgi_app"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CLOSE_CONNECTION = "agents_state_ext.close_connection"
"""Key in ``scope["state"]`` of a callable that closes the request's connection.

ASGI has no way to drop a connection before a response starts; the mock's own server
(``python -m agents_state_ext.testing serve-mock``) provides this callable. Under another
server, a drop before the response becomes the server's own error answer (usually a 500).
"""


def mock_asgi_app(mock: MockResponsesAPI, *, responder: Responder | None = None) -> ASGIApp:
    """An ASGI app serving ``mock`` (started by the caller) over HTTP.

    The API is served under the path of the mock's ``base_url`` (``/v1`` for
    ``http://127.0.0.1:8089/v1``) and the private admin routes under ``/__mock__``.
    ``responder`` (default: the mock's own) is set on the mock and restored by an admin reset.
    """
    admin = Admin(mock, responder)
    parts = urlsplit(mock.base_url)
    origin, prefix = f"{parts.scheme}://{parts.netloc}", parts.path

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise RuntimeError(f"the mock serves HTTP only, not {scope['type']}")
        body = await _read_body(receive)
        path: str = scope["path"]
        method: str = scope["method"]
        if path.startswith(ADMIN_PREFIX + "/"):
            status, payload = admin.handle(method, path[len(ADMIN_PREFIX) :], body)
            await _send_json(send, status, payload)
        elif path != prefix and not path.startswith(prefix + "/"):
            error = ApiError(404, f"Invalid URL ({method} {path})")
            await _send_json(send, error.status, error.body())
        else:
            await _serve_api(mock, _request(scope, origin, body), scope, receive, send)

    return app


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _send_json(send: Send, status: int, payload: Any) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _request(scope: Scope, origin: str, body: bytes) -> httpx2.Request:
    """The request as the mock's transport receives it, on the mock's own origin."""
    raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
    query: bytes = scope.get("query_string", b"")
    target = raw_path.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
    headers = [(name, value) for name, value in scope["headers"] if name.lower() != b"host"]
    return httpx2.Request(scope["method"], origin + target, headers=headers, content=body)


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _serve_api(
    mock: MockResponsesAPI, request: httpx2.Request, scope: Scope, receive: Receive, send: Send
) -> None:
    """Answer one API request, cancelling it when the client goes away."""
    disconnected = asyncio.ensure_future(_until_disconnect(receive))
    answering = asyncio.ensure_future(_answer(mock, request, send))
    try:
        await asyncio.wait({disconnected, answering}, return_when=asyncio.FIRST_COMPLETED)
        if not answering.done():
            answering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await answering
            return
        if answering.result():
            await _close_connection(scope, disconnected)
    finally:
        for task in (answering, disconnected):
            task.cancel()


async def _answer(mock: MockResponsesAPI, request: httpx2.Request, send: Send) -> bool:
    """Send the mock's answer; True when the connection must be dropped instead."""
    try:
        response = await mock.transport.handle_async_request(request)
    except httpx2.TimeoutException:
        await asyncio.Event().wait()  # the client's own read timeout ends this request
        raise AssertionError("unreachable") from None
    except httpx2.TransportError:
        return True
    try:
        stream = response.stream
        if not isinstance(stream, httpx2.AsyncByteStream):
            raise TypeError("the mock answered with a synchronous body")
        headers = [(name.lower(), value) for name, value in response.headers.raw]
        await send(
            {"type": "http.response.start", "status": response.status_code, "headers": headers}
        )
        try:
            async for chunk in stream:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx2.TransportError:
            return True
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        await response.aclose()
    return False


async def _close_connection(scope: Scope, disconnected: asyncio.Future[None]) -> None:
    close = (scope.get("state") or {}).get(CLOSE_CONNECTION)
    if close is None:
        raise RuntimeError(
            "the mock drops this connection (an injected fault), which this ASGI server "
            "cannot do; serve the mock with `python -m agents_state_ext.testing serve-mock`"
        )
    close()
    # Returning before the server sees the close would make it answer a 500 of its own.
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(disconnected), 5.0)
