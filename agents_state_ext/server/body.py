"""A request's JSON body, read once and checked field by field (a bad field is HTTP 400)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request

from .events import HTTPError

__all__ = ["BODY_TIMEOUT", "MAX_BODY", "MAX_DEPTH", "Body", "read_body"]

MAX_BODY = 256 * 1024
"""The largest body accepted by default, in bytes (``create_app(max_message_bytes=...)``).

A message of a chat, not a file upload: a worker's event loop copies and counts a message
as it is stored and sent, and a 900 kB one stalls every other request of the worker for a
few hundred milliseconds (``python -m bench.bench_server_loop``).
"""

MAX_DEPTH = 32
"""The deepest nesting of arrays and objects a body may have (a message's items need ~6)."""

BODY_TIMEOUT = 30.0
"""Seconds a client gets to send a whole body (``create_app(body_timeout=...)``); then 408.

A client that sends part of a body and then nothing would otherwise hold its request (and
its connection) open for as long as it likes.
"""

_MISSING: Any = object()


def _bad(message: str) -> HTTPError:
    return HTTPError(400, "BadRequest", message)


class Body:
    """The fields of a JSON object body; each getter checks the field's type."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def get(self, name: str, default: Any = None) -> Any:
        """The raw value of ``name`` (``default`` when absent)."""
        return self._data.get(name, default)

    def text(self, name: str, *, default: Any = _MISSING) -> Any:
        """A non-empty text field, required unless ``default`` is given (``null`` is absent)."""
        value = self._data.get(name)
        if value is None:
            if default is _MISSING:
                raise _bad(f"{name!r} is required")
            return default
        if not isinstance(value, str) or not value:
            raise _bad(f"{name!r} must be non-empty text")
        return value

    def flag(self, name: str, default: bool) -> bool:
        """A boolean field."""
        value = self._data.get(name, default)
        if not isinstance(value, bool):
            raise _bad(f"{name!r} must be true or false")
        return value

    def content(self, name: str, *, any_items: bool = False) -> str | list[dict[str, Any]]:
        """A message's content: non-empty text, or a list of Responses input items (objects).

        Unless ``any_items``, each item must be a user message (``role: "user"``): system and
        developer instructions, tool outputs and references come from the operator, not from
        a client.
        """
        value = self._data.get(name)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(i, dict) for i in value):
            if not any_items:
                for item in value:
                    if item.get("role") != "user" or item.get("type", "message") != "message":
                        role = item.get("role", item.get("type"))
                        raise _bad(f"{name!r} may hold user messages only, got {str(role)[:40]!r}")
            return value
        raise _bad(f"{name!r} must be non-empty text or a list of input items")


async def read_body(
    request: Request, *, timeout: float | None = BODY_TIMEOUT, limit: int = MAX_BODY
) -> Body:
    """The request's body as a JSON object (empty: ``{}``); 400 if it is not one, 413 if over
    ``limit`` bytes.

    400 too for a body nested deeper than :data:`MAX_DEPTH` or holding a lone surrogate; 408
    if the whole body has not arrived within ``timeout`` seconds (``None``: no limit).

    A body must be sent as ``application/json`` (415 otherwise).
    """
    try:
        raw = await asyncio.wait_for(_receive(request, limit), timeout)
    except asyncio.TimeoutError:
        raise HTTPError(
            408, "RequestTimeout", f"the body did not arrive within {timeout:g} seconds"
        ) from None
    if not raw.strip():
        return Body({})
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != "application/json":  # a form or a no-cors fetch cannot send this type
        raise HTTPError(415, "UnsupportedMediaType", "a request body must be application/json")
    try:
        data = json.loads(raw)
    except RecursionError:
        raise _bad(f"the body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        raise _bad("the body is not JSON") from None
    _check(data)
    if not isinstance(data, dict):
        raise _bad("the body must be a JSON object")
    return Body(data)


async def _receive(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:  # refused before it is read
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> HTTPError:
    return HTTPError(413, "PayloadTooLarge", f"the body is over {limit} bytes (max_message_bytes)")


def _check(value: Any) -> None:
    """400 unless ``value`` nests at most :data:`MAX_DEPTH` deep and all its text is Unicode.

    JSON may escape a lone surrogate (``"\\ud800"``), which no store can keep: refused here,
    before a route writes anything. Iterative: no recursion to exhaust.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            _check_text(item)
            continue
        if isinstance(item, dict):
            for key in item:
                _check_text(key)
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level > MAX_DEPTH:
            raise _bad(f"the body nests deeper than {MAX_DEPTH} levels")
        stack.extend((child, level + 1) for child in children)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad("the body holds text that is not valid Unicode (a lone surrogate)") from None
