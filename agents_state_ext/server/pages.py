"""The browser page: ``GET /`` and its files under ``GET /ui/{name}``, shipped in ``web/``.

The page is hand-written HTML, CSS and JavaScript (ES modules, no build step, nothing fetched
from another host); it talks to the ``/api`` routes beside it with relative URLs, so it works
where the app is mounted (``/chat/`` serves it at ``/chat/``). Only the files shipped in the
``web`` package are served, looked up by exact name: no path from a request reaches the disk.
Neither route needs authentication: the page holds no data, and asks for the token itself.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

__all__ = ["PAGE_ROUTES", "page_routes"]

_PACKAGE = "agents_state_ext.server.web"
_INDEX = "index.html"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
# Everything the page loads comes from this app: scripts and styles from /ui/, data from /api/.
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Cache-Control": "no-cache",  # revalidated each time (ETag): an upgrade shows at once
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": _POLICY,
    "Referrer-Policy": "no-referrer",
}

PAGE_ROUTES: tuple[tuple[str, str], ...] = (("GET", "/"), ("GET", "/ui/{name}"))
"""The page's routes: (method, path); HEAD is answered too."""


@dataclass(frozen=True)
class _Asset:
    body: bytes
    media_type: str
    etag: str


@functools.cache
def _assets() -> dict[str, _Asset]:
    """Every servable file of the ``web`` package by name, read once."""
    found: dict[str, _Asset] = {}
    for entry in resources.files(_PACKAGE).iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if not entry.is_file() or suffix not in _TYPES or entry.name.startswith("."):
            continue
        body = entry.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        found[entry.name] = _Asset(body, _TYPES[suffix], etag)
    return found


def _answer(request: Request, name: str) -> Response:
    asset = _assets().get(name)
    if asset is None:
        raise HTTPException(404, "Not Found")
    headers = {**_HEADERS, "ETag": asset.etag}
    if asset.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


async def _index(request: Request) -> Response:
    return _answer(request, _INDEX)


async def _asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name == _INDEX:  # one address for the page: relative links resolve against "/"
        raise HTTPException(404, "Not Found")
    return _answer(request, name)


def page_routes() -> list[Route]:
    """The routes of the page and its files (see :data:`PAGE_ROUTES`)."""
    endpoints = {"/": _index, "/ui/{name}": _asset}
    return [Route(path, endpoints[path], methods=[method]) for method, path in PAGE_ROUTES]
