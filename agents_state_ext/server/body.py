"""A request's JSON body, read once and checked field by field (a bad field is HTTP 400)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request

from .events import HTTPError

__all__ = ["MAX_BODY", "Body", "read_body"]

MAX_BODY = 1 << 20
"""The largest body accepted, in bytes (a message of a chat, not a file upload)."""

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

    def content(self, name: str) -> str | list[dict[str, Any]]:
        """A message's content: non-empty text, or a list of Responses input items (objects)."""
        value = self._data.get(name)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(i, dict) for i in value):
            return value
        raise _bad(f"{name!r} must be non-empty text or a list of input items")


async def read_body(request: Request) -> Body:
    """The request's body as a JSON object (empty: ``{}``); 400 if it is not one, 413 if too big.

    A body must be sent as ``application/json`` (415 otherwise).
    """
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise HTTPError(413, "PayloadTooLarge", f"the body is over {MAX_BODY} bytes")
    if not raw.strip():
        return Body({})
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != "application/json":  # a form or a no-cors fetch cannot send this type
        raise HTTPError(415, "UnsupportedMediaType", "a request body must be application/json")
    try:
        data = json.loads(raw)
    except ValueError:
        raise _bad("the body is not JSON") from None
    if not isinstance(data, dict):
        raise _bad("the body must be a JSON object")
    return Body(data)
