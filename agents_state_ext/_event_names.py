"""The names of an attempt's live events and of the SSE events the server streams, defined once.

A chat :class:`~agents_state_ext.chat.Attempt` emits events of the kinds
:data:`AttemptEventKind` names. The server streams each one as the SSE event
:data:`WIRE_NAMES` gives (a ``status`` as ``attempt``, its data the attempt's ids and status)
and ends every stream with one of :data:`FINAL_EVENTS`: ``record`` (the stored attempt record)
or ``error``. The page (``server/web``) is checked against these names by a test.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, get_args

__all__ = [
    "ATTEMPT_EVENT_KINDS",
    "EVENT_NAMES",
    "FINAL_EVENTS",
    "WIRE_NAMES",
    "AttemptEventKind",
    "EventName",
]

AttemptEventKind = Literal["status", "delta", "tool_call", "tool_result"]
"""What an attempt's live event is about: its status, its text, a tool call, a tool's result."""

EventName = Literal["attempt", "delta", "tool_call", "tool_result", "record", "error"]
"""The ``event:`` name of an SSE event the server sends."""

ATTEMPT_EVENT_KINDS: tuple[AttemptEventKind, ...] = get_args(AttemptEventKind)
EVENT_NAMES: tuple[EventName, ...] = get_args(EventName)

FINAL_EVENTS: tuple[EventName, ...] = ("record", "error")
"""The events a stream ends with, exactly one of them."""

WIRE_NAMES: Mapping[AttemptEventKind, EventName] = MappingProxyType(
    {"status": "attempt", "delta": "delta", "tool_call": "tool_call", "tool_result": "tool_result"}
)
"""The SSE event the server streams an attempt's event of each kind as."""
