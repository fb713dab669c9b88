"""One request of a run: marked sent, then acknowledged or rewound exactly once.

:class:`RequestCall` is the bookkeeping both model paths (streamed and not) share; it works on
a :class:`RequestLog` (the run lifecycle: the ledger, the request log, the filter's decision),
and names a lost chain or a busy server conversation precisely. :class:`SentRequest` is one
request as sent, :class:`PartialOutput` what a stream produced before it ended.
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

from openai import BadRequestError

from . import _compat
from ._items import item_to_dict
from ._tracker import ServerConversationTracker
from .errors import ConversationLockedError, PreviousResponseNotFoundError

__all__ = [
    "REQUEST_HISTORY",
    "PartialOutput",
    "RequestCall",
    "RequestLog",
    "RunProgress",
    "SentRequest",
]

REQUEST_HISTORY = 100
"""How many of a conversation's newest requests ``ConversationState.requests`` keeps."""


@dataclass
class PartialOutput:
    """What a streamed attempt produced before it ended: its response id and text so far."""

    response_id: str | None = None
    text: str = ""
    completed: bool = False


@dataclass
class SentRequest:
    """One request exactly as the wrapper sent it (for attempt records and tests)."""

    input: list[dict[str, Any]]
    previous_response_id: str | None
    conversation_id: str | None
    streamed: bool
    response_id: str | None = None
    error: str | None = None


@dataclass
class RunProgress:
    """What one run started by ``ConversationState`` has done so far."""

    input: list[Any]
    sent: bool = False
    resumed: set[str] | None = None
    """For a resumed RunState: the ids of the items it has already processed."""
    unheard: bool = False
    """A request of this run failed after the server may have accepted it."""
    calls: int = 0
    """Model calls this run has made (sent or answered from the ledger)."""
    uncommitted: frozenset[str] = frozenset()
    """For a resumed RunState: the call ids of tools it ran without committing an output."""


class RequestLog(Protocol):
    """What a request settles against: the run lifecycle."""

    tracker: ServerConversationTracker
    requests: deque[SentRequest]

    def decided(self) -> None:
        """The filter's batch went out; a later request decides afresh."""

    async def checkpoint(self) -> None:
        """Save the ledger (before a request goes out, and after it is acknowledged)."""


class RequestCall:
    """The bookkeeping of one request: mark sent, then acknowledge or rewind exactly once."""

    def __init__(
        self,
        lifecycle: RequestLog,
        items: list[Any],
        streamed: bool,
        *,
        replaced: list[Any],
        hidden_retries: bool,
        run: RunProgress | None = None,
    ) -> None:
        tracker = lifecycle.tracker
        self.run = run
        # A stateful request is never resent blindly by the openai client's own retries; when
        # the client makes none anyway, the SDK need not copy it per request to turn them off.
        self.hidden_retries = hidden_retries
        self.lifecycle = lifecycle
        self.items = items
        self.replaced = replaced
        self.previous_response_id = tracker.previous_response_id
        self.conversation_id = tracker.conversation_id
        self.done = False
        self._retries: contextlib.AbstractContextManager[None] | None = None
        self.record = SentRequest(
            input=[i if type(i) is dict else item_to_dict(i) for i in items],
            previous_response_id=self.previous_response_id,
            conversation_id=self.conversation_id,
            streamed=streamed,
        )
        self._batch = tracker.mark_sent(items, replacing=replaced)
        lifecycle.requests.append(self.record)

    def succeed(self, response_id: str | None, output: list[Any]) -> None:
        """The server answered: its input and ``output`` are acknowledged.

        The caller then tells the lifecycle (``decided()``): a later request decides afresh.
        """
        if self.done:
            return
        self.done = True
        self.record.response_id = response_id
        self.lifecycle.tracker.acknowledge(response_id, output, consumed=self.replaced)

    def withdraw(self, error: BaseException) -> None:
        """The request never went out (a checkpoint before it failed): rewind it, unlogged."""
        if self.done:
            return
        self.done = True
        self.record.error = f"not sent: {type(error).__name__}"
        with contextlib.suppress(ValueError):
            self.lifecycle.requests.remove(self.record)
        self.lifecycle.tracker.rewind(self._batch)

    def fail(self, error: BaseException | None) -> None:
        """The request failed or was cancelled: rewind it, or hold it as maybe accepted."""
        if self.done:
            return
        self.done = True
        self.record.error = type(error).__name__ if error is not None else "stream ended early"
        tracker = self.lifecycle.tracker
        if tracker.conversation_id is not None and not _never_reached(error):
            # The server may have accepted it: evidence decides before anything is re-sent.
            tracker.mark_uncertain(self._batch)
            if self.run is not None:
                self.run.unheard = True
        else:
            tracker.rewind(self._batch)

    def guard(self) -> RequestCall:
        """Settle the request as failed on any exception; name a lost chain precisely.

        The call itself is the context manager (one object less per request), entered once.
        """
        return self

    def __enter__(self) -> None:
        if self.hidden_retries:
            retries = _compat.provider_retries_disabled()
            retries.__enter__()
            self._retries = retries

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: Any
    ) -> bool:
        retries, self._retries = self._retries, None
        if retries is not None:
            # As a nested ``with`` would: what it swallows is not seen, what it raises is.
            try:
                if retries.__exit__(kind, error, tb):
                    return True
            except BaseException as raised:
                self._settle(raised)
                raise
        if error is not None:
            self._settle(error)
        return False

    def _settle(self, error: BaseException) -> None:
        self.fail(error)
        named = self.lost(error) or self.locked(error)
        if named is not None:
            raise named from error

    def lost(self, error: BaseException) -> PreviousResponseNotFoundError | None:
        """The error to raise instead of ``error`` when it says the chain's cursor is gone."""
        if self.previous_response_id is None or not _previous_response_lost(error):
            return None
        return PreviousResponseNotFoundError(
            f"the server no longer knows response {self.previous_response_id!r} (expired, "
            "stored with store=False, or a restarted server); nothing was lost: the "
            "request's input is pending. Re-seed the chain with "
            "ConversationState.reseed(items) and run again",
            self.previous_response_id,
            self.lifecycle.tracker.pending,
        )

    def locked(self, error: BaseException) -> ConversationLockedError | None:
        """The error to raise instead of ``error`` when another request holds the conversation."""
        if (
            self.conversation_id is None
            or not isinstance(error, BadRequestError)
            or isinstance(error, ConversationLockedError)
            or error.code != "conversation_locked"
        ):
            return None
        return ConversationLockedError(
            f"server conversation {self.conversation_id!r} is busy with another request "
            "(conversation_locked); nothing was lost: the request's input is pending and goes "
            "out once with the next run",
            conversation_id=self.conversation_id,
            pending=self.lifecycle.tracker.pending,
            error=error,
        )


def _previous_response_lost(error: BaseException) -> bool:
    code = getattr(error, "code", None)
    param = getattr(error, "param", None)
    status = getattr(error, "status_code", None)
    if code == "previous_response_not_found":
        return True
    return status in (400, 404) and param == "previous_response_id"


def _never_reached(error: BaseException | None) -> bool:
    """Whether the server certainly did not process the request (an answer that rejects it)."""
    return getattr(error, "status_code", None) in (400, 401, 403, 404, 422)
