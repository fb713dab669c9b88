"""The request log of the mock."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ._faults import Fault

__all__ = ["FrameHook", "RecordedRequest"]


@dataclass
class RecordedRequest:
    """One HTTP request the mock received, and how it answered."""

    method: str
    path: str
    """Relative to the base URL's path, e.g. ``"/responses"``."""
    url: str
    params: dict[str, str]
    json: Any
    """The parsed JSON body, or None when there was none."""
    status: int | None = None
    """The HTTP status answered; None when the client got an exception instead."""
    streamed: bool = False
    response_id: str | None = None
    """The id of the response this ``POST /responses`` produced (even if never stored)."""
    fault: Fault | None = None
    error: str | None = None
    """The error message of an error answer (a rejection or an injected status), else None."""
    events: list[str] = field(default_factory=list)
    """The types of the SSE events sent for a streamed answer, in order (a drop cuts it short)."""
    headers: dict[str, str] = field(default_factory=dict)
    """The request's headers, names lower-cased (``x-client-request-id``, ...); no credentials."""
    request_id: str | None = None
    """The ``x-request-id`` the mock answered with (``req_1``, ``req_2``, ... per request)."""


FrameHook = Callable[[RecordedRequest, int], Awaitable[None]]
"""``MockResponsesAPI.frame_hook``: awaited with the request and how many frames it has sent."""
