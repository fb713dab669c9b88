"""A tiny in-process HTTP client for an ASGI app that reads a response as it streams.

httpx's ``ASGITransport`` (and Starlette's ``TestClient``) hand back a streamed body only once
the app has finished it; the server tests need each SSE event as it is sent, and a client that
goes away mid-stream. This drives the ASGI interface directly, in the test's event loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any


class Streamed:
    """One request in flight: its status and headers, then its body as it arrives."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self._started = asyncio.Event()
        self._chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._gone = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def started(self) -> Streamed:
        """Wait for the response's status and headers."""
        started = asyncio.ensure_future(self._started.wait())
        assert self.task is not None
        await asyncio.wait({started, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if not self._started.is_set():
            started.cancel()
            self.task.result()  # the app failed before answering: raise it
            raise AssertionError("the app ended without a response")
        return self

    async def chunk(self) -> bytes | None:
        """The next piece of the body as sent (``None``: the body has ended)."""
        return await self._chunks.get()

    async def body(self) -> bytes:
        """The whole body (waits for its end)."""
        parts = []
        while (chunk := await self._chunks.get()) is not None:
            parts.append(chunk)
        return b"".join(parts)

    async def json(self) -> Any:
        """The body as JSON."""
        return json.loads(await self.body())

    async def events(self) -> AsyncIterator[tuple[str, Any]]:
        """The SSE events ``(name, data)`` as they arrive (comments skipped)."""
        buffer = b""
        while (chunk := await self._chunks.get()) is not None:
            buffer += chunk
            while b"\n\n" in buffer:
                frame, buffer = buffer.split(b"\n\n", 1)
                name, data = "message", []
                for line in frame.decode().split("\n"):
                    if line.startswith("event: "):
                        name = line[7:]
                    elif line.startswith("data: "):
                        data.append(line[6:])
                if data:
                    yield name, json.loads("\n".join(data))

    async def all_events(self) -> list[tuple[str, Any]]:
        """Every SSE event, once the stream has ended."""
        return [event async for event in self.events()]

    def disconnect(self) -> None:
        """The client goes away (the app sees ``http.disconnect``)."""
        self._gone.set()


class ASGIClient:
    """Requests to an ASGI app in the same event loop; ``headers`` go with every request."""

    def __init__(self, app: Any, headers: Mapping[str, str] | None = None) -> None:
        self.app = app
        self.headers = dict(headers or {})

    def with_headers(self, **headers: str) -> ASGIClient:
        """A client for the same app with more headers (``x_user_id`` -> ``x-user-id``)."""
        extra = {k.replace("_", "-"): v for k, v in headers.items()}
        return ASGIClient(self.app, {**self.headers, **extra})

    async def open(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        stall: bool = False,
    ) -> Streamed:
        """Send a request; the response once its headers are in (the body may still stream).

        ``stall``: the body is sent as a first part of more to come, which never comes.
        """
        content = raw if raw is not None else b"" if body is None else json.dumps(body).encode()
        path, _, query = path.partition("?")
        sent = {**self.headers, **(headers or {})}
        if body is not None:
            sent.setdefault("content-type", "application/json")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in sent.items()],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }
        response = Streamed()
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": content, "more_body": stall}
            await response._gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                response.status = message["status"]
                response.headers = {k.decode(): v.decode() for k, v in message["headers"]}
                response._started.set()
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    response._chunks.put_nowait(message["body"])
                if not message.get("more_body", False):
                    response._chunks.put_nowait(None)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            finally:
                response._chunks.put_nowait(None)

        response.task = asyncio.get_running_loop().create_task(run())
        return await response.started()

    async def request(
        self, method: str, path: str, body: Any = None, **kwargs: Any
    ) -> tuple[int, Any]:
        """Send a request and read its whole JSON answer: ``(status, json)``."""
        response = await self.open(method, path, body, **kwargs)
        raw = await response.body()
        return response.status, json.loads(raw) if raw else None

    async def get(self, path: str, **kwargs: Any) -> tuple[int, Any]:
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        return await self.request("POST", path, body, **kwargs)
