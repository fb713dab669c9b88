"""The request log of the mock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._faults import Fault

__all__ = ["RecordedRequest"]


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
