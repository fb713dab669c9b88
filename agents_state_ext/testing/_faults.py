"""Injected failures (:class:`Fault`) for ``POST /responses`` requests."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args

__all__ = ["IN_STREAM_KINDS", "Fault", "FaultKind"]

FaultKind = Literal[
    "status",
    "timeout",
    "connect_error",
    "drop_mid_stream",
    "delay",
    "stream_error",
    "response_failed",
]
IN_STREAM_KINDS = ("stream_error", "response_failed")
"""Kinds that fail inside a 200 stream: the server does not store or append anything."""


@dataclass(frozen=True)
class Fault:
    """One failure, consumed by one ``POST /responses`` request (see ``MockResponsesAPI.inject``).

    With ``commit=False`` the server never processes the request: nothing is stored and no reply
    is consumed. With ``commit=True`` it processes the request completely first (stores the
    response, appends to the conversation, consumes a reply) and only then does the client see the
    failure: "the server accepted it but the client never heard". A commit fault on a request the
    server would reject still shows the fault, not the rejection.
    """

    kind: FaultKind
    commit: bool = False
    status_code: int = 500
    message: str = "boom"
    error_type: str | None = None
    """The error body's ``type``; None: ``server_error`` for 5xx, else ``invalid_request_error``."""
    error_code: str | None = None
    error_param: str | None = None
    """The error body's ``param`` (``conversation`` for ``conversation_locked``)."""
    headers: Mapping[str, str] | None = None
    after_events: int = 0
    seconds: float = 0.0
    failed_body: bool = False
    """``response_failed`` on a non-streamed request: a 200 ``status: failed`` body, not a 500."""

    @classmethod
    def status(
        cls,
        code: int,
        message: str = "boom",
        *,
        headers: Mapping[str, str] | None = None,
        error_type: str | None = None,
        error_code: str | None = None,
        commit: bool = False,
    ) -> Fault:
        """An HTTP error status with an OpenAI error JSON body."""
        return cls(
            "status",
            commit=commit,
            status_code=code,
            message=message,
            headers=headers,
            error_type=error_type,
            error_code=error_code,
        )

    @classmethod
    def rate_limit(
        cls,
        message: str = "Rate limit reached. Please try again later.",
        *,
        retry_after: float | None = None,
        commit: bool = False,
    ) -> Fault:
        """HTTP 429 ``rate_limit_exceeded``, with a ``retry-after`` header when given.

        The header holds whole seconds, as HTTP's ``Retry-After`` delay-seconds does [doc: RFC
        9110 section 10.2.3]: a fractional ``retry_after`` is rounded up (1.2 sends ``2``), so
        a client never retries sooner than asked. ``ValueError`` for a negative one.
        """
        if retry_after is not None and retry_after < 0:
            raise ValueError("retry_after must be >= 0")
        seconds = math.ceil(retry_after) if retry_after is not None else None
        headers = {"retry-after": str(seconds)} if seconds is not None else None
        return cls.status(
            429,
            message,
            headers=headers,
            error_type="requests",
            error_code="rate_limit_exceeded",
            commit=commit,
        )

    @classmethod
    def timeout(cls, *, after: float = 0.0, commit: bool = False) -> Fault:
        """``httpx2.ReadTimeout`` raised after ``after`` seconds (openai: ``APITimeoutError``)."""
        return cls("timeout", commit=commit, seconds=after)

    @classmethod
    def connect_error(cls, *, commit: bool = False) -> Fault:
        """``httpx2.ConnectError`` before any response (openai: ``APIConnectionError``)."""
        return cls("connect_error", commit=commit)

    @classmethod
    def drop_mid_stream(cls, after_events: int, *, commit: bool = False) -> Fault:
        """The connection drops (``httpx2.RemoteProtocolError``) after ``after_events`` SSE frames.

        A non-streaming request gets the same error instead of its response body. Without
        ``commit``, a stream that got as far as producing ``response.completed`` is still stored.
        """
        if after_events < 0:
            raise ValueError("after_events must be >= 0")
        return cls("drop_mid_stream", commit=commit, after_events=after_events)

    @classmethod
    def stream_error(
        cls,
        after_events: int,
        message: str = "An error occurred while processing your request.",
        *,
        code: str | None = "server_error",
    ) -> Fault:
        """A 200 stream that sends ``after_events`` frames, then an ``error`` event, then ends.

        The frame is ``event: error`` with ``{"type": "error", "code", "message", "param",
        "sequence_number"}`` [doc: openai ``ResponseErrorEvent``]. Nothing is stored and no
        reply is consumed [inf]. The terminal event is never among the frames sent. A
        non-streamed request gets a 500 ``server_error`` instead. The Agents SDK 0.24 raises
        ``ModelBehaviorError`` for it (``agents/models/_response_terminal.py``), so its
        retry policies see a non-HTTP error; openai's ``AsyncStream`` yields it as an event
        (it raises ``APIError`` only for a payload with an ``error`` key).
        """
        if after_events < 0:
            raise ValueError("after_events must be >= 0")
        return cls("stream_error", message=message, error_code=code, after_events=after_events)

    @classmethod
    def response_failed(
        cls,
        after_events: int,
        message: str = "The model failed to generate a response.",
        *,
        code: str = "server_error",
        body: bool = False,
    ) -> Fault:
        """A 200 stream that sends ``after_events`` frames, then ``response.failed``, then ends.

        The failed response has ``status: "failed"``, ``error: {code, message}`` (``code`` must
        be one of openai's ``ResponseError.code`` values) and the output items already done
        [doc: ``ResponseFailedEvent``]. Nothing is stored or appended [inf: "after this
        response completes"]. A non-streamed request gets a 500 ``server_error`` [inf: a
        synchronous request that fails is answered with an error status]; with ``body=True``
        it gets a 200 body with ``status: "failed"``, the ``error`` and no output instead, the
        shape a background response ends in [obs: openai/openai-python#3212] and one the Agents
        SDK 0.24 also raises ``ModelBehaviorError`` for. The SDK raises ``ModelBehaviorError``
        for ``response.failed``.
        """
        if after_events < 0:
            raise ValueError("after_events must be >= 0")
        return cls(
            "response_failed",
            message=message,
            error_code=code,
            after_events=after_events,
            failed_body=body,
        )

    @classmethod
    def conversation_locked(cls) -> Fault:
        """``400 conversation_locked`` (param ``conversation``): another request holds it.

        What the real API answers while another request runs on the same conversation (see the
        mock's ``lock_conversations``), injected for one request without a second writer. The
        server processed nothing (never ``commit``); the Agents SDK resends this code by itself,
        a second later.
        """
        return cls(
            "status",
            status_code=400,
            message="Another process is currently operating on this conversation. Please retry "
            "in a few seconds.",
            error_type="invalid_request_error",
            error_code="conversation_locked",
            error_param="conversation",
        )

    @classmethod
    def delay(cls, seconds: float, *, commit: bool = False) -> Fault:
        """Answer normally, ``seconds`` later (``commit`` changes nothing: the answer arrives)."""
        return cls("delay", commit=commit, seconds=seconds)

    def to_dict(self) -> dict[str, Any]:
        """This fault as JSON-ready data, e.g. for ``MockServer``; :meth:`from_dict` reads it."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["headers"] = dict(self.headers) if self.headers is not None else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fault:
        """The fault that :meth:`to_dict` wrote; ``ValueError`` on an unknown kind or field."""
        if data.get("kind") not in get_args(FaultKind):
            raise ValueError(f"unknown fault kind {data.get('kind')!r}")
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown fault fields: {sorted(unknown)}")
        return cls(**data)

    def resolved_error_type(self) -> str:
        """The ``type`` of the error body for a status fault."""
        if self.error_type is not None:
            return self.error_type
        return "server_error" if self.status_code >= 500 else "invalid_request_error"
