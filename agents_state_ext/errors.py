"""The one exception tree of agents-state-ext.

Every error the library raises on purpose derives from :class:`StateExtError`, and each also
derives from the closest builtin so existing ``except ValueError`` / ``except KeyError`` clauses
keep working. The three the SDK would raise as ``agents.exceptions.UserError`` (a configuration
the SDK itself refuses or cannot honour) derive from it too, so ``except UserError`` around
``Runner`` keeps catching them. Import each from ``agents_state_ext``, or from the subpackage
named in brackets (``server``, ``stores.conformance``, ``testing``)::

    StateExtError
    ├── MixedStateOwnerError          (ValueError, UserError) two owners of one state
    ├── HandoffFilterError            (ValueError, UserError) rewrites server-owned history
    ├── InputFilterError              (TypeError, UserError)  a filter returned a bad shape
    ├── AgentSpecError                (ValueError)  a ``module:attr`` reference names no agent
    ├── StateBlobError                (ValueError)  a malformed, tampered or unsupported envelope
    ├── ContextOverflowError          (ValueError)  asked to send a request over its token budget
    ├── EmptyMessageError             (ValueError)  asked to send a user message with no content
    ├── ConversationForkError                       a branch cannot go on a new server conversation
    ├── RunInProgressError            (RuntimeError) a second run on a state with one in flight
    ├── OpenToolCallsError                          function calls the server holds without output
    ├── PreviousResponseNotFoundError (LookupError) the server no longer knows the chain's cursor
    ├── ConversationLockedError (BadRequestError) another request runs on the server conversation
    ├── IncompleteHistoryError        (ValueError)  items to compact lack part of the history
    ├── TokenizerUnavailableError     (RuntimeError) no exact tokenizer could be loaded
    ├── SDKContractError              (RuntimeError) the installed Agents SDK changed a name we use
    ├── RecordError                   (ValueError)  an attempt record document of the wrong shape
    ├── GraphError                    (ValueError)  an invalid action on a ConversationGraph
    │   ├── MessageContentError       (TypeError)   content is not text or input items
    │   ├── NodeNotFoundError         (KeyError)    an unknown node id
    │   ├── InvalidTargetError                      the action does not apply to that node
    │   └── InvalidTransitionError                  the node's status forbids the action
    │       └── ApprovalPendingError                tool calls of an attempt await a decision
    └── StoreError                                  a conversation store failed
        ├── StoreUnavailableError     (ConnectionError) the backend is unreachable: retry later
        ├── StoreValueError           (ValueError)  a value no backend can keep: nothing written
        ├── StoredDataError                         what the store holds cannot be read back
        │   └── StoreDataLostError                  the backend lost data it had acknowledged
        ├── ConcurrentUpdateError                   a compare-and-set on a branch head lost
        │   ├── ConversationBusyError [server]      another live worker drives the conversation
        │   └── FencedOutError                      the writer lost the lease it wrote under
        │       └── LeaseLostError    [server]      this worker's lease lapsed or was taken over
        ├── ConversationNotFoundError (KeyError)    an unknown conversation id
        └── AttemptNotFoundError      (KeyError)    an unknown attempt id

    Outside the tree (no failure of the library's own):
    HTTPError               [server]    an answer the server gives with a fixed HTTP status
    ConformanceError        [stores.conformance] (AssertionError) a store broke the contract
    ConformanceSkip         [stores.conformance] a check met a store without its capability
    MockServerError         [testing] (RuntimeError) the mock server process failed
    UserWarning
    ├── ReasoningDroppedWarning       reasoning left out of a ``store=False`` request
    ├── NestedHistoryDisabledWarning  ``nest_handoff_history`` turned off (the server owns it)
    └── InterruptedToolCallWarning    an open function call closed before the next request

The root and the store errors are defined in ``_errors_base`` (lowest), every other one here.
"""

from __future__ import annotations

import functools
from typing import Any

from agents.exceptions import UserError
from openai import BadRequestError

from ._errors_base import (
    AttemptNotFoundError,
    ConcurrentUpdateError,
    ConversationNotFoundError,
    FencedOutError,
    StateExtError,
    StoreDataLostError,
    StoredDataError,
    StoreError,
    StoreUnavailableError,
    StoreValueError,
)
from ._errors_base import ConversationBusyError as ConversationBusyError
from ._errors_base import LeaseLostError as LeaseLostError

# Every name here the package root exports too; the classes marked [...] in the tree are
# exported from their subpackage instead, so they are defined or imported here but not listed.
__all__ = [
    "AgentSpecError",
    "ApprovalPendingError",
    "AttemptNotFoundError",
    "ConcurrentUpdateError",
    "ContextOverflowError",
    "ConversationForkError",
    "ConversationLockedError",
    "ConversationNotFoundError",
    "EmptyMessageError",
    "FencedOutError",
    "GraphError",
    "HandoffFilterError",
    "IncompleteHistoryError",
    "InputFilterError",
    "InterruptedToolCallWarning",
    "InvalidTargetError",
    "InvalidTransitionError",
    "MessageContentError",
    "MixedStateOwnerError",
    "NestedHistoryDisabledWarning",
    "NodeNotFoundError",
    "OpenToolCallsError",
    "PreviousResponseNotFoundError",
    "ReasoningDroppedWarning",
    "RecordError",
    "RunInProgressError",
    "SDKContractError",
    "StateBlobError",
    "StateExtError",
    "StoreDataLostError",
    "StoreError",
    "StoreUnavailableError",
    "StoreValueError",
    "StoredDataError",
    "TokenizerUnavailableError",
]


class MixedStateOwnerError(StateExtError, UserError, ValueError):
    """Two owners of one conversation's state were configured; raised before anything is sent."""


class HandoffFilterError(StateExtError, UserError, ValueError):
    """A handoff input filter would rewrite history that the server already owns."""


class InputFilterError(StateExtError, UserError, TypeError):
    """A ``call_model_input_filter`` returned something but ``ModelInputData`` with a list."""


class AgentSpecError(StateExtError, ValueError):
    """A ``module:attr`` agent reference (``--agent``, ``AGENTS_STATE_EXT_AGENT``) names no agent.

    Its message says what was wrong: the form, a module that cannot be imported, a missing
    attribute, or a value that is not an ``agents.Agent`` (nor a function returning one).
    """


class StateBlobError(StateExtError, ValueError):
    """A serialized state envelope is malformed, truncated, tampered with, or of unknown version."""


class ContextOverflowError(StateExtError, ValueError):
    """A request whose required parts alone exceed its token budget was asked to be sent.

    A chat raises it from ``send`` / ``edit`` / ``retry`` before anything is stored or sent:
    the chat is as it was (shorten the message, or raise the budget with ``set_budget``).
    ``required_tokens`` is what the required parts need (the system messages and the user
    message; under ``previous_response`` after a first answer, the message alone),
    ``message_tokens`` the user message's own count, ``budget`` the budget they exceed.
    """

    def __init__(
        self, message: str, *, required_tokens: int, message_tokens: int, budget: int
    ) -> None:
        super().__init__(message)
        self.required_tokens = required_tokens
        self.message_tokens = message_tokens
        self.budget = budget

    def __reduce__(self) -> tuple[Any, ...]:
        # The counts are keyword-only: rebuild with them (default pickling passes args only).
        rebuild = functools.partial(
            type(self),
            required_tokens=self.required_tokens,
            message_tokens=self.message_tokens,
            budget=self.budget,
        )
        return rebuild, self.args

    @classmethod
    def over(cls, required_tokens: int, message_tokens: int, budget: int) -> ContextOverflowError:
        """The error for required parts of ``required_tokens`` over ``budget``, with its text."""
        return cls(
            f"the system messages and active prompt need {required_tokens} tokens (the message "
            f"alone is {message_tokens}), over the budget of {budget}; shorten the message or "
            "raise the budget",
            required_tokens=required_tokens,
            message_tokens=message_tokens,
            budget=budget,
        )


class EmptyMessageError(StateExtError, ValueError):
    """A chat was asked to send (or edit in) a user message with no content: nothing is sent.

    Empty means an empty or whitespace-only string, no items at all, or only message items
    whose text is empty; nothing is added to the graph or the store.
    """


class ConversationForkError(StateExtError):
    """A branch of a conversation strategy chat cannot be put on a new server conversation.

    A server conversation is linear, so a retry, an edit or a switch forks the branch into a
    new one seeded with its history; this is raised, before anything is sent, when forking is
    off or the history holds items that cannot be copied.
    """


class RunInProgressError(StateExtError, RuntimeError):
    """A run was started on a ``ConversationState`` while another of its runs is in flight.

    Raised before any request: two runs at once would both advance one server cursor. Await
    the first run (or cancel it) first, or give each concurrent conversation its own state.
    """


class OpenToolCallsError(StateExtError):
    """The server holds function calls without outputs, and the policy is to ask the app.

    Raised before the next request under ``open_calls="raise"``. ``call_ids`` names the open
    calls; supply their outputs with ``ConversationState.close_tool_calls(outputs)`` and run
    again, or switch to the default policy, which closes them as interrupted.
    """

    def __init__(self, message: str, call_ids: list[str]) -> None:
        super().__init__(message)
        self.call_ids = list(call_ids)


class PreviousResponseNotFoundError(StateExtError, LookupError):
    """The Responses API no longer knows the chain's ``previous_response_id``.

    Stored responses expire after a retention period, ``store=False`` responses are never
    retrievable, and a restarted server forgets them. Nothing was lost on this side: the
    request's input is pending again in the ledger (``pending``). Re-seed a new chain from the
    history the app holds with ``ConversationState.reseed(items)`` and run again; the chat layer
    does this for you from its stored branch.
    """

    def __init__(
        self, message: str, previous_response_id: str, pending: list[dict[str, object]]
    ) -> None:
        super().__init__(message)
        self.previous_response_id = previous_response_id
        self.pending = pending

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConversationLockedError(StateExtError, BadRequestError):
    """The server conversation is locked by another request in flight (``conversation_locked``).

    The Responses API answers ``400 conversation_locked`` to a request on a conversation while
    another request (another worker, another ``ConversationState`` on the same id) is still
    running on it. The Agents SDK retries this code by itself (three times, 1, 2 and 4 s apart,
    unless ``ModelSettings.retry`` sets ``max_retries=0``); this error is what reaches the app
    when those retries are spent. The server processed nothing: the request's input is pending
    again in the ledger (``pending``) and goes out once with the next run, so run again later
    with only the new input (or none) — never the same input twice.

    It is an ``openai.BadRequestError`` too (same ``status_code``, ``code``, ``param``, ``body``
    and ``response``), so ``except openai.BadRequestError`` and the SDK's own retry of this code
    keep working.
    """

    def __init__(
        self,
        message: str,
        *,
        conversation_id: str,
        pending: list[dict[str, object]],
        error: BadRequestError,
    ) -> None:
        body: Any = error.body
        BadRequestError.__init__(self, message, response=error.response, body=body)
        self.conversation_id = conversation_id
        self.pending = pending

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class IncompleteHistoryError(StateExtError, ValueError):
    """Items given to compact a server-owned conversation lack part of the history it holds.

    Raised before anything is sent. ``missing`` lists the server ids of the acknowledged items
    the given items do not carry (user messages the app sent without an id cannot be checked).
    Compact the whole history (for instance through the server chain), or, to start over from
    less on purpose, re-seed with ``ConversationState.reseed(items)``.
    """

    def __init__(self, message: str, missing: list[str]) -> None:
        super().__init__(message)
        self.missing = missing

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class TokenizerUnavailableError(StateExtError, RuntimeError):
    """No exact tokenizer could be loaded for the model, and its counter may not estimate.

    ``TokenCounter(model)`` raises it rather than count approximately; with ``estimate=True``
    (what a chat uses for a model tiktoken does not know) it counts with a fallback encoding and
    says so (``exact`` is false on its selections and attempt records).
    """


class GraphError(StateExtError, ValueError):
    """An action that is not valid on a ConversationGraph; the graph is left unchanged."""


class MessageContentError(GraphError, TypeError):
    """A message's content is neither text nor a list of JSON-shaped Responses input items.

    Raised before anything changes (graph, store, request): for instance a list of numbers,
    an item that is not an object, or a message item whose ``content`` is not text or parts.
    """


class RecordError(StateExtError, ValueError):
    """An attempt record document (``AttemptRecord.from_dict``) has a field of the wrong type."""


class NodeNotFoundError(GraphError, KeyError):
    """A node id that the graph does not hold."""

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message; keep it readable.
        return str(self.args[0]) if self.args else ""


class InvalidTargetError(GraphError):
    """The action does not apply to this node's role or place (e.g. editing a reply)."""


class InvalidTransitionError(GraphError):
    """The node's status does not allow the action (e.g. streaming into a completed attempt)."""


class ApprovalPendingError(InvalidTransitionError):
    """An attempt of the chat is ``awaiting_approval``: its tool calls wait for a decision.

    Raised by ``send``, ``retry`` and ``edit`` while the attempt waits (approve or reject its
    calls and ``resume``, or ``stop`` it), and by ``resume`` while a call is undecided.
    ``call_ids`` names the calls still waiting for a decision.
    """

    def __init__(self, message: str, call_ids: list[str]) -> None:
        super().__init__(message)
        self.call_ids = list(call_ids)


class SDKContractError(StateExtError, RuntimeError):
    """A private Agents SDK name this library relies on is missing or has changed shape.

    Raised at first use, never silently worked around: the message names the installed
    ``openai-agents`` version, the name, and the range of versions this release supports.
    ``name`` is the SDK name (``module.attribute``).
    """

    def __init__(self, message: str, *, name: str) -> None:
        super().__init__(message)
        self.name = name


# -- outside the StateExtError tree --------------------------------------------------------------


class HTTPError(Exception):
    """An error the server answers with a fixed status (not found, unauthorized, busy, ...).

    ``kind`` is the ``type`` of the JSON error body.
    """

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class ConformanceError(AssertionError):
    """A store broke the store contract."""


class ConformanceSkip(Exception):
    """A capability check met a store without that capability: it passes by skipping."""


class MockServerError(RuntimeError):
    """The mock server process did not start, died, or refused an admin call."""


class ReasoningDroppedWarning(UserWarning):
    """Reasoning items left out of a ``store=False`` request: the server could not look them up."""


class NestedHistoryDisabledWarning(UserWarning):
    """``nest_handoff_history`` was turned off because the server owns the history."""


class InterruptedToolCallWarning(UserWarning):
    """A function call the server held without output was closed before the next request."""
