"""The one exception tree of agents-state-ext.

Every error the library raises on purpose derives from :class:`StateExtError`, and each also
derives from the closest builtin so existing ``except ValueError`` / ``except KeyError`` clauses
keep working. The three the SDK would raise as ``agents.exceptions.UserError`` (a configuration
the SDK itself refuses or cannot honour) derive from it too, so ``except UserError`` around
``Runner`` keeps catching them::

    StateExtError
    ├── MixedStateOwnerError          (ValueError, UserError) two owners of one state
    ├── HandoffFilterError            (ValueError, UserError) rewrites server-owned history
    ├── InputFilterError              (TypeError, UserError)  a filter returned a bad shape
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
        ├── StoredDataError                         what the store holds cannot be read back
        │   └── StoreDataLostError                  the backend lost data it had acknowledged
        ├── ConcurrentUpdateError                   a compare-and-set on a branch head lost
        │   └── FencedOutError                      the writer lost the lease it wrote under
        ├── ConversationNotFoundError (KeyError)    an unknown conversation id
        └── AttemptNotFoundError      (KeyError)    an unknown attempt id
"""

from __future__ import annotations

import functools
from typing import Any

from agents.exceptions import UserError
from openai import BadRequestError

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
    "InvalidTargetError",
    "InvalidTransitionError",
    "MessageContentError",
    "MixedStateOwnerError",
    "NodeNotFoundError",
    "OpenToolCallsError",
    "PreviousResponseNotFoundError",
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


class StateExtError(Exception):
    """Root of every error agents-state-ext raises on purpose."""


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


class StoreError(StateExtError):
    """A conversation store could not do what was asked."""


class StoreUnavailableError(StoreError, ConnectionError):
    """The store's backend could not be reached or did not answer in time: a transient failure.

    A refused or cut connection, a server restarting, a pool with no free connection, a
    statement or socket timeout. What was asked may or may not have been done (a commit cut
    after it was sent): read again before writing again. Retrying later is the remedy; the
    served app answers it as HTTP 503 with ``Retry-After``.
    """


class StoreValueError(StoreError, ValueError):
    """A value given to a store is one no backend can keep: refused before any write.

    Text that is not valid Unicode (a lone surrogate), a NUL character, a value JSON cannot
    hold, an id that is not non-empty text, a limit that is not a positive integer. The
    caller's mistake, not the store's: the served app answers it as HTTP 400 (and an answer of
    the model that holds such text as ``AnswerNotStored``, 502).
    """


class StoredDataError(StoreError):
    """What the store holds cannot be read back as the library wrote it (corrupt or missing).

    Not the caller's mistake and not transient: retrying reads the same data. The served app
    answers it as HTTP 500.
    """


class StoreDataLostError(StoredDataError):
    """The backend lost data it had acknowledged: a conversation it held is gone.

    Raised, for instance, by ``RedisStore`` when a Redis without persistence restarted under a
    running worker: the conversation asked for is missing and so is the mark the store left in
    that namespace when it first used it. The history is gone; nothing starts a new empty one
    under the same id.
    """


class ConcurrentUpdateError(StoreError):
    """A compare-and-set on a branch head lost: another writer moved the head first."""


class FencedOutError(ConcurrentUpdateError):
    """A commit's fence no longer holds: the writer lost the lease it wrote under.

    The ledger record the commit was conditioned on (:class:`~agents_state_ext.stores.Fence`)
    moved past the writer's token (another worker took the conversation over, or the lease was
    released), so nothing of the commit was written. Unlike a lost head compare-and-set, re-reading
    and retrying does not help: the writer must stop driving the conversation.
    """


class ConversationNotFoundError(StoreError, KeyError):
    """A conversation id that the store does not hold."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class AttemptNotFoundError(StoreError, KeyError):
    """An attempt id that the conversation does not hold."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


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
