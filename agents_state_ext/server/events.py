"""What the server sends: typed SSE events, and errors as JSON with their HTTP status.

An answer streams as Server-Sent Events, each ``event: <name>`` with one ``data:`` line of
JSON:

==============  ===============================================================
``attempt``     ``{attempt_id, message_id, user_id, status}``: the attempt's start is stored
                (``queued``); again whenever its status changes (``streaming``, ...)
``delta``       ``{text}``: the next piece of the answer's text
``tool_call``   ``{call_id, name, arguments}``: the model called a tool
``tool_result`` ``{call_id, output}``: the tool answered
``record``      the final :class:`~agents_state_ext.AttemptRecord` as a dict (last event)
``error``       ``{type, message, status, attempt_id, record}`` (last event): the attempt
                failed (``record`` is its stored record, ``None`` if nothing was stored)
==============  ===============================================================

The names are defined once, in :mod:`agents_state_ext._event_names`; a test checks the
page's JavaScript against them.

A stream always ends with ``record`` or ``error``. Lines starting with ``:`` are keep-alive
comments. Every other answer is JSON; an error is ``{"error": {"type", "message"}}`` with the
status :func:`error_status` gives (a 422 over the token budget adds ``required_tokens``,
``message_tokens`` and ``budget``). A store that cannot be reached is ``503`` (type
``StoreUnavailableError``, with a ``Retry-After`` header of :data:`RETRY_AFTER` seconds): the
client may send the same request again later. Data the store cannot read back, or lost, is
``500`` (``StoredDataError``, ``StoreDataLostError``); any other failure of the store (a
write it refused, a store closed or misconfigured) is ``500`` of type ``StoreError`` with a
fixed message (its own text goes to the log). A 4xx is only ever about what the client sent:
an unknown conversation, attempt or node (404), a conflict (409), a value no store can keep
(``StoreValueError``, 400).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import openai

from .._event_names import EVENT_NAMES, FINAL_EVENTS, EventName
from ..errors import (
    ApprovalPendingError,
    AttemptNotFoundError,
    ConcurrentUpdateError,
    ContextOverflowError,
    ConversationLockedError,
    ConversationNotFoundError,
    HTTPError,
    InvalidTargetError,
    InvalidTransitionError,
    NodeNotFoundError,
    StateExtError,
    StoredDataError,
    StoreError,
    StoreUnavailableError,
    StoreValueError,
)

__all__ = [
    "EVENT_NAMES",
    "RETRY_AFTER",
    "HTTPError",
    "ServerEvent",
    "error_body",
    "error_status",
    "keep_alive",
]


@dataclass(frozen=True)
class ServerEvent:
    """One SSE event: its name and its JSON data."""

    event: EventName
    data: dict[str, Any]

    def encode(self) -> bytes:
        """The event as SSE bytes (one ``data:`` line: JSON never holds a raw newline).

        A lone surrogate (text no UTF-8 can hold, from a model or a tool) is sent as its JSON
        escape ``\\udXXX``: the stream goes on instead of ending without its last event.
        """
        text = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        # backslashreplace writes a surrogate as \udXXX, which is its escape in a JSON string
        return f"event: {self.event}\ndata: {text}\n\n".encode("utf-8", "backslashreplace")

    @property
    def final(self) -> bool:
        """Whether the stream ends with this event."""
        return self.event in FINAL_EVENTS


def keep_alive() -> bytes:
    """An SSE comment: keeps proxies from closing a stream that waits on a slow model."""
    return b": keep-alive\n\n"


RETRY_AFTER = 2
"""Seconds a client is told to wait (``Retry-After``) before it retries after a 503."""

_UNAVAILABLE = "the conversation store is unavailable; retry later"
_STORE_FAILED = "the conversation store could not do what was asked"

# Checked in order: the first class an error is an instance of gives its status.
_STATUSES: tuple[tuple[type[BaseException], int], ...] = (
    (StoreUnavailableError, 503),  # before every StateExtError: never the client's mistake
    (StoredDataError, 500),
    (ConversationNotFoundError, 404),
    (AttemptNotFoundError, 404),
    (NodeNotFoundError, 404),
    (ContextOverflowError, 422),
    (ConcurrentUpdateError, 409),  # also ConversationBusyError, LeaseLostError
    (ApprovalPendingError, 409),
    (InvalidTransitionError, 409),
    (InvalidTargetError, 400),
    (StoreValueError, 400),  # what the client sent cannot be kept (refused before any write)
    (StoreError, 500),  # any other: the store failed, not the client
    (ConversationLockedError, 409),  # the model's API is busy with this conversation: retry
    (openai.APIError, 502),  # the model's API failed: the server is a gateway to it
    (StateExtError, 400),
    (ValueError, 400),
    (TypeError, 400),
)


def error_status(error: BaseException) -> int:
    """The HTTP status of an error: 404 unknown, 409 busy or conflict, 422 overflow, ...

    500 for what is not a known kind of error.
    """
    if isinstance(error, HTTPError):
        return error.status
    for kind, status in _STATUSES:
        if isinstance(error, kind):
            return status
    return 500


def error_body(error: BaseException) -> dict[str, Any]:
    """``{"error": {"type", "message"}}`` for an error (a 500 says no more than its type).

    A ``ContextOverflowError`` (422: refused before anything was stored) adds its counts:
    ``required_tokens``, ``message_tokens`` and ``budget``.

    A failure of the model's API says only that and its status: the provider's own text (which
    may name the account, the model or the key) stays in the attempt record for the operator.
    """
    kind = error.kind if isinstance(error, HTTPError) else type(error).__name__
    status = error_status(error)
    known = status != 500 or isinstance(error, StoreError)
    message = _message(error) if known else "internal server error"
    body: dict[str, Any] = {"type": kind, "message": message}
    if isinstance(error, ContextOverflowError):
        body["required_tokens"] = error.required_tokens
        body["message_tokens"] = error.message_tokens
        body["budget"] = error.budget
    return {"error": body}


def _message(error: BaseException) -> str:
    if isinstance(error, StoreUnavailableError):  # the driver's text names hosts and ports
        return _UNAVAILABLE
    failed = isinstance(error, StoreError) and not isinstance(error, StoredDataError)
    if failed and error_status(error) == 500:  # its text may name hosts, files, keys
        return _STORE_FAILED
    if isinstance(error, openai.APIError) and not isinstance(error, StateExtError):
        # its text is the provider's: kept in the record only
        status = getattr(error, "status_code", None)
        return f"the model's API failed ({status})" if status else "the model's API failed"
    if isinstance(error, KeyError) and len(error.args) == 1:
        return str(error.args[0])  # str() of a KeyError adds quotes
    return " ".join(str(error).split()) or type(error).__name__
