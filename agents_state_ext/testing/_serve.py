"""Run the mock as an HTTP server in this process (``serve-mock``), on uvicorn.

The socket is bound before the base URL is announced, so a client may connect as soon as it
reads the URL. A custom h11 protocol hands the app a way to close a request's connection,
which an injected drop needs and ASGI lacks.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ._http import CLOSE_CONNECTION, mock_asgi_app
from ._mock_server import MockResponsesAPI
from ._responses import Responder

__all__ = ["serve_mock"]

API_PATH = "/v1"


class _ClosableH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with its connection's ``close`` in every request's state."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # uvicorn copies app_state into each request's scope["state"]: a per-connection copy
        # carries this connection's close to the app.
        self.app_state = {**self.app_state, CLOSE_CONNECTION: transport.close}


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


async def _exit_with_parent(server: uvicorn.Server, parent: int) -> None:
    """Stop serving when the process that started this one is gone (no orphan servers)."""
    while not server.should_exit:
        await asyncio.sleep(0.5)
        if os.getppid() != parent:
            server.should_exit = True


async def _serve(server: uvicorn.Server, sock: socket.socket, parent: int | None) -> None:
    watcher = asyncio.ensure_future(_exit_with_parent(server, parent)) if parent else None
    try:
        await server.serve(sockets=[sock])
    finally:
        if watcher is not None:
            watcher.cancel()


def serve_mock(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    mock_options: Mapping[str, Any] | None = None,
    responder: Responder | None = None,
    log_level: str = "warning",
    parent: int | None = None,
    announce: TextIO | None = None,
) -> None:
    """Serve a fresh mock on ``host:port`` (0: a free port) until SIGINT / SIGTERM.

    The base URL (``http://HOST:PORT/v1``) is printed on ``announce`` (stdout) once the port
    is bound. With ``parent`` (a pid), the server also stops when that process is gone.
    """
    sock = _bind(host, port)
    bound_port = sock.getsockname()[1]
    mock = MockResponsesAPI(f"http://{host}:{bound_port}{API_PATH}", **(mock_options or {}))
    mock.start()
    config = uvicorn.Config(
        mock_asgi_app(mock, responder=responder),
        http=_ClosableH11Protocol,
        lifespan="off",
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    print(mock.base_url, file=announce or sys.stdout, flush=True)
    admin = mock.base_url.removesuffix(API_PATH) + "/__mock__"
    print(f"mock Responses API, pid {os.getpid()}; admin under {admin}", file=sys.stderr)
    try:
        asyncio.run(_serve(server, sock, parent))
    finally:
        sock.close()
        mock.stop()
