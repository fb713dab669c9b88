"""``Conversation``: the chat-level API an app server uses — send, stop, retry, edit, switch.

It joins a :class:`~agents_state_ext.ConversationGraph` (what was said, on which branch), a
:class:`~agents_state_ext.ConversationStore` (where it is kept; every change is committed with
a compare-and-set on the branch head) and, per attempt, a
:class:`~agents_state_ext.ConversationState` of the chat's strategy (who owns what is sent).
Every attempt writes its :class:`~agents_state_ext.AttemptRecord` when it starts and ends.

An attempt whose run stops for tool approval (``needs_approval``) is parked as
``awaiting_approval``: its run waits in the store beside it, its pending calls are readable
(:meth:`Conversation.pending_approvals`), any handle decides them (:meth:`~Conversation.approve`,
:meth:`~Conversation.reject`) and continues the run (:meth:`~Conversation.resume`); until then the
chat takes no new attempt, and :meth:`~Conversation.stop` cancels the parked one.

Several handles may share one chat (``open_conversation`` twice on one store). A handle whose
compare-and-set loses re-reads the store and raises ``ConcurrentUpdateError``; an attempt that
ends after another handle moved the head is still stored in its final status, off the branch
the other handle made active.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agents import Agent, RunConfig
from agents.models import get_default_model
from agents.result import RunResultBase

from .. import _compat
from ..attempts import AttemptDiff, AttemptRecord, explain
from ..context import ContextIndex
from ..errors import (
    AttemptNotFoundError,
    ConcurrentUpdateError,
    InvalidTransitionError,
    MixedStateOwnerError,
)
from ..graph import ConversationGraph
from ..nodes import Node
from ..state import ConversationState, StrategyName
from ..stores import ConversationStore
from ..tokens import MessageCounter, TokenCounter
from .approvals import PendingApproval, read_approvals
from .attempt import Attempt
from .forks import ServerConversations, place
from .parking import Parking, interruptions, output_items
from .plan import nearest_complete_assistant, plan_request
from .reseed import previous_response_lost
from .session import GraphSession

__all__ = ["Conversation", "check_budget", "load_graph", "model_name"]

_IN_FLIGHT = ("queued", "streaming")
_UNFINISHED = (*_IN_FLIGHT, "awaiting_approval")
_FINAL = ("complete", "cancelled", "failed")
_SETTLE_TRIES = 5  # compare-and-set rounds to store a final attempt against a busy store


def check_budget(budget: object) -> int | None:
    """``budget`` if it is ``None`` or a positive int, else ``ValueError``."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(f"the token budget must be a positive integer, got {budget!r}")
    return budget


def model_name(agent: Agent[Any] | None) -> str:
    """The model name an agent runs on (its ``Model``'s name, or the SDK default)."""
    model = agent.model if agent is not None else None
    if isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    return str(name) if isinstance(name, str) else get_default_model()


def load_graph(
    store: ConversationStore, conversation_id: str, id_factory: Callable[[str], str] | None
) -> ConversationGraph:
    """The stored graph of a chat, making new ids with ``id_factory`` when given."""
    graph = store.load_graph(conversation_id)
    if id_factory is None:
        return graph
    return ConversationGraph.from_dict(graph.to_dict(), id_factory=id_factory)


def _settled(final: Node, stored: Node) -> Node | None:
    """What to store for an attempt that ended as ``final`` while the store holds ``stored``.

    An edit on another handle may have invalidated the attempt meanwhile: it stays invalid
    (with the edit's bookkeeping) and keeps its output. A node another writer already ended
    is left as it is (``None``).
    """
    if stored.status in _UNFINISHED:
        return final
    if stored.status == "invalid" and stored.meta.get("status_before_invalid") in _UNFINISHED:
        node = Node.from_dict(final.to_dict())
        node.status = "invalid"
        for key in ("invalidated_by", "status_before_invalid"):
            if key in stored.meta:
                node.meta[key] = stored.meta[key]
        return node
    return None


def _sampling(agent: Agent[Any]) -> dict[str, Any]:
    settings = agent.model_settings.to_json_dict()
    return {k: v for k, v in settings.items() if isinstance(v, (int, float, str, bool))}


class Conversation:
    """One chat in a store, under one strategy; build it with :func:`open_conversation`.

    Actions start an :class:`Attempt` running in the current event loop and return it at
    once; one attempt runs at a time. ``budget`` (tokens, ``None``: unbounded) bounds what
    each request sends; it can be changed between attempts.
    """

    def __init__(
        self,
        store: ConversationStore,
        graph: ConversationGraph,
        *,
        strategy: StrategyName,
        agent: Agent[Any] | None,
        budget: int | None,
        counter: MessageCounter | None,
        client: Any | None,
        prompt_version: str | None,
        fork: bool,
        runner_kwargs: Mapping[str, Any] | None,
        meta: Mapping[str, Any],
        id_factory: Callable[[str], str] | None = None,
    ) -> None:
        self.store = store
        self.graph = graph
        self.id = graph.conversation_id
        self.strategy: StrategyName = strategy
        self.agent = agent
        self.counter: MessageCounter = counter or TokenCounter(model_name(agent))
        self.client = client
        self._prompt_version = prompt_version
        self.fork = fork
        self.runner_kwargs = dict(runner_kwargs or {})
        self._budget = check_budget(budget)
        self._id_factory = id_factory
        self._index = ContextIndex()
        self._head = graph.active_leaf
        self._in_flight: Attempt | None = None
        self._first_root: str | None = None
        self._parking = Parking(self)
        self._session = GraphSession(self)
        self._servers = ServerConversations.from_dict(meta.get("server_conversations"))
        self._cache_key = str(meta.get("prompt_cache_key") or f"agents-state-ext:{self.id}")

    # -- reading -----------------------------------------------------------------------------

    @property
    def budget(self) -> int | None:
        """The token budget of each request; setting it checks and stores it."""
        return self._budget

    @budget.setter
    def budget(self, value: int | None) -> None:
        self._budget = check_budget(value)
        self.store.update_conversation_meta(self.id, {"budget": self._budget})

    @property
    def prompt_version(self) -> str | None:
        """The prompt version recorded on each attempt; setting it stores it with the chat."""
        return self._prompt_version

    @prompt_version.setter
    def prompt_version(self, value: str | None) -> None:
        if value is not None and not isinstance(value, str):
            raise TypeError(f"prompt_version must be a str or None, got {type(value).__name__}")
        self._prompt_version = value
        self.store.update_conversation_meta(self.id, {"prompt_version": value})

    @property
    def in_flight(self) -> Attempt | None:
        """The attempt still running, if any."""
        return self._in_flight

    @property
    def awaiting_approval(self) -> Attempt | None:
        """The attempt whose tool calls wait for a decision, if any (see :meth:`resume`)."""
        self._session.settle(read=True)
        return self._parking.attempt()

    def pending_approvals(self) -> list[PendingApproval]:
        """The tool calls the attempt ``awaiting_approval`` waits on, with decisions so far.

        Read from the store, so decisions taken by another handle or process show. ``[]`` when
        no attempt waits.
        """
        self._session.settle(read=True)
        node = self._parking.node(fresh=True)
        return read_approvals(node) if node is not None else []

    def active_path(self) -> list[Node]:
        """The active branch, root first."""
        self._session.settle(read=True)
        return self.graph.active_path()

    def node(self, node_id: str) -> Node:
        """One message (``NodeNotFoundError`` if unknown)."""
        self._session.settle(read=True)
        return self.graph.get(node_id)

    def siblings(self, node_id: str) -> list[Node]:
        """The alternatives to a message: earlier attempts, or earlier versions of an edit."""
        self._session.settle(read=True)
        return self.graph.siblings(node_id)

    def branches(self) -> list[str]:
        """The leaf id of every branch, oldest first."""
        self._session.settle(read=True)
        return self.graph.branches()

    def attempts(self, message_id: str | None = None) -> list[AttemptRecord]:
        """The attempt records, in start order (only that assistant message's if given)."""
        self._session.settle(read=True)
        return self.store.list_attempts(self.id, message_id=message_id)

    def record(self, ref: str) -> AttemptRecord:
        """The record of an attempt, by attempt id or by its assistant message's id."""
        self._session.settle(read=True)
        try:
            return self.store.get_attempt(self.id, ref)
        except AttemptNotFoundError:
            node = self.graph.get(ref)
            if node.attempt_id is None:
                raise AttemptNotFoundError(
                    f"{ref} is a {node.role} message, not an attempt"
                ) from None
            return self.store.get_attempt(self.id, node.attempt_id)

    def explain(self, a: str, b: str) -> AttemptDiff:
        """What differed in what two attempts were sent (attempt or message ids)."""
        return explain(self.record(a), self.record(b))

    @property
    def cursor(self) -> str | None:
        """The server cursor the next attempt on the active branch continues from.

        previous_response: the response id of the nearest complete assistant message on the
        branch. conversation: the server conversation holding exactly this branch, or ``None``
        when the next attempt forks a new one. ``None`` for replay and session.
        """
        anchor = nearest_complete_assistant(self.graph.active_path())
        if self.strategy == "previous_response":
            return None if anchor is None else anchor.meta.get("response_id")
        if self.strategy == "conversation":
            tip = anchor.id if anchor is not None else None
            server = (
                self._servers.root if anchor is None else anchor.meta.get("server_conversation")
            )
            known = self._servers.known.get(server) if isinstance(server, str) else None
            return server if known is not None and known.get("tip") == tip else None
        return None

    def session(self) -> GraphSession:
        """An SDK ``Session`` following this chat's active branch (for ``Runner`` yourself).

        Each run through it is one attempt of the chat, with its record; see
        :class:`GraphSession` for how a run's end is known.

        Replay and session chats only: under ``previous_response`` or ``conversation`` the
        server owns the history, so a session would be a second owner (its turns would carry
        no server cursor to continue from) and ``MixedStateOwnerError`` is raised.
        """
        if self.strategy in ("previous_response", "conversation"):
            owner = "Responses" if self.strategy == "previous_response" else "Conversations"
            raise MixedStateOwnerError(
                f"chat {self.id} uses the {self.strategy} strategy: the {owner} API owns its "
                "history, so an SDK session would give it a second owner. Use chat.send / "
                "retry / edit, which run under the chat's own strategy, or open the chat with "
                'strategy="session" (or "replay") to run Runner with chat.session()'
            )
        return self._session

    # -- actions -----------------------------------------------------------------------------

    def send(self, content: str | Sequence[Mapping[str, Any]], *, stream: bool = False) -> Attempt:
        """Add a user message on the active branch and start answering it."""
        self._check_idle("send")
        self.graph.add_user(content)
        return self._start(self.graph.start_attempt(), stream)

    def retry(self, user_id: str | None = None, *, stream: bool = False) -> Attempt:
        """Answer a user message again (default: the active turn's); earlier attempts stay."""
        self._check_idle("retry")
        return self._start(self.graph.retry(user_id), stream)

    def edit(
        self, user_id: str, content: str | Sequence[Mapping[str, Any]], *, stream: bool = False
    ) -> Attempt:
        """Replace a user message by a new version on a new branch, and answer it.

        Everything under the old version turns ``invalid`` and is never sent on this branch.
        """
        self._check_idle("edit")
        self.graph.edit(user_id, content)
        return self._start(self.graph.start_attempt(), stream)

    def switch(self, node_id: str) -> Node:
        """Make ``node_id`` the active leaf (any message); nothing else changes."""
        self._session.settle()
        node = self.graph.switch(node_id)
        self._commit()
        return node

    async def stop(self) -> Attempt | None:
        """Stop the attempt in flight, if any; its partial answer is stored as ``cancelled``.

        An attempt ``awaiting_approval`` is cancelled the same way: its stored run is dropped
        and its pending tool calls are never run (returned as a finished :class:`Attempt`).
        """
        attempt = self._in_flight
        if attempt is not None:
            return await attempt.stop()
        self._session.settle()
        return self._parking.drop()

    # -- tool approvals ----------------------------------------------------------------------

    def approve(self, call_id: str | None = None, *, always: bool = False) -> list[PendingApproval]:
        """Approve a pending tool call (``None``: every undecided one); see :meth:`resume`.

        ``always`` approves later calls of the same tool by the same agent in this run too.
        Decisions are stored at once, so another handle or process may :meth:`resume`. Returns
        the pending calls with their decisions.
        """
        self._session.settle()
        return self._parking.decide(call_id, "approved", always=always)

    def reject(
        self, call_id: str | None = None, *, message: str | None = None, always: bool = False
    ) -> list[PendingApproval]:
        """Reject a pending tool call (``None``: every undecided one); see :meth:`resume`.

        The tool does not run; the model is told ``message`` (default: the SDK's rejection
        text) when the attempt resumes. ``always`` rejects later calls of that tool too.
        """
        self._session.settle()
        return self._parking.decide(call_id, "rejected", message=message, always=always)

    def resume(self, *, stream: bool = False) -> Attempt:
        """Continue the attempt ``awaiting_approval`` from its stored run, with the decisions.

        Every pending call needs a decision first (``ApprovalPendingError`` names those that
        have none). The run goes on where it stopped: approved tools run, rejected ones tell
        the model so, and nothing the run already sent is sent again. The same attempt (same
        ids, same record) then ends ``complete``, ``cancelled`` or ``failed`` — or waits again.
        """
        self._check_idle("resume", paused_ok=True)
        attempt = self._parking.resume(stream=stream)
        self._in_flight = attempt
        return attempt

    # -- attempt lifecycle (called by Attempt) -----------------------------------------------

    def _check_idle(self, action: str, *, paused_ok: bool = False) -> None:
        asyncio.get_running_loop()  # before any change: an attempt runs as a task of this loop
        if self.agent is None:
            raise ValueError(f"cannot {action}: this conversation was opened without an agent")
        if self._in_flight is not None:
            raise InvalidTransitionError(
                f"cannot {action}: attempt {self._in_flight.id} is still running; stop it first"
            )
        self._session.settle()
        if self._session.running:
            raise InvalidTransitionError(
                f"cannot {action}: a run through chat.session() is still in flight"
            )
        if not paused_ok:
            self._parking.refuse(action)

    def _new_record(
        self,
        node: Node,
        included: dict[str, int],
        *,
        overflow: bool = False,
        cursor_before: str | None = None,
    ) -> AttemptRecord:
        """The record of a new attempt ``node`` that sends ``included`` (message id -> tokens)."""
        agent = self.agent
        return AttemptRecord(
            message_id=node.id,
            attempt_id=str(node.attempt_id),
            parent_user_id=node.parent_id,
            request_id=node.request_id,
            model=model_name(agent) if agent is not None else None,
            prompt_version=self.prompt_version,
            sampling=_sampling(agent) if agent is not None else {},
            included=dict(included),
            budget=self._budget,
            used=sum(included.values()),
            overflow=overflow,
            state_owner=self.strategy,
            cursor_before=cursor_before,
            started_at=time.time(),
        )

    def _cache_group(self, node_id: str | None = None) -> str:
        """The chat's id, or with the root of ``node_id``'s branch when it is not the first root.

        Branches under different roots (an edit of the first message of a chat without
        system messages) share no prefix, so their requests get their own prompt cache key.
        """
        graph = self.graph
        path = graph.path_to(node_id) if node_id is not None else graph.active_path()
        if not path:
            return self.id
        if self._first_root is None or self._first_root not in graph:
            self._first_root = graph.nodes()[0].id
        return self.id if path[0].id == self._first_root else f"{self.id}:{path[0].id}"

    def _runner_kwargs(self, attempt: Attempt) -> dict[str, Any]:
        """``runner_kwargs`` for ``attempt``; a replay run is grouped by its branch (cache key)."""
        kwargs = dict(self.runner_kwargs)
        if self.strategy == "replay":
            config = kwargs.get("run_config") or RunConfig()
            if config.group_id is None:
                group = f"agents-state-ext:{self._cache_group(attempt.id)}"
                kwargs["run_config"] = dataclasses.replace(config, group_id=group)
        return kwargs

    def _start(self, node: Node, stream: bool) -> Attempt:
        assert self.agent is not None
        user = self.graph.get(str(node.parent_id))
        path = self.graph.path_to(user.id)
        plan = plan_request(
            self.strategy, path, budget=self._budget, counter=self.counter, index=self._index
        )
        record = self._new_record(
            node,
            {n.id: plan.tokens[n.id] for n in plan.nodes},
            overflow=plan.overflow,
            cursor_before=plan.cursor_before,
        )
        record.budget, record.used = plan.budget, plan.used
        try:
            plan.ensure_sendable()
        except Exception as exc:
            record.cursor_after = record.cursor_before
            self.graph.fail(node.id, str(exc))
            self._write(record, "failed", error=str(exc))
            raise
        self._write(record, "queued")
        attempt = Attempt(self, node, plan, record, agent=self.agent, stream=stream)
        self._in_flight = attempt
        return attempt

    async def _prepare(self, attempt: Attempt) -> tuple[ConversationState, list[dict[str, Any]]]:
        plan, node = attempt.plan, attempt.node
        if self.strategy == "replay":
            return ConversationState.replay(), plan.input
        if self.strategy == "session":
            self._session._bind(node.id, plan.history)
            return ConversationState.session(self._session), plan.input
        if self.strategy == "previous_response":
            state = ConversationState.previous_response(
                plan.cursor_before, prompt_cache_key=self._cache_key
            )
            return state, plan.input
        client = self.client or _compat.inner_openai_client(getattr(attempt.agent, "model", None))
        placed = await place(plan, self._servers, client, fork=self.fork)
        known = self._servers.known[placed.conversation_id]
        sent = plan.nodes
        if placed.created or known.get("system") or plan.anchor is not None:
            sent = [self.graph.get(attempt.user_id)]
        included = {n.id: self.counter.count(n.id, n.items) for n in [*placed.seeded, *sent]}
        record = attempt.record
        record.included, record.used = included, sum(included.values())
        record.cursor_before = placed.conversation_id
        node.meta["server_conversation"] = placed.conversation_id
        if placed.created:
            node.meta["seeded"] = [n.id for n in placed.seeded]
            node.meta["forked_from"] = placed.forked_from
        self._save_servers()
        self._write(record, "queued")
        state = ConversationState.conversation(
            placed.conversation_id, client=client, prompt_cache_key=self._cache_key
        )
        return state, [item for n in sent for item in n.items]

    def _lost_cursor(self, attempt: Attempt, error: BaseException) -> str | None:
        """The cursor ``attempt`` chained from, if ``error`` says the server lost it (once)."""
        record = attempt.record
        cursor = record.cursor_before
        if self.strategy != "previous_response" or cursor is None or record.reseeded_from:
            return None
        return cursor if previous_response_lost(error, cursor) else None

    def _reseed(self, attempt: Attempt, lost: str) -> None:
        """Re-plan ``attempt`` on a new chain: the server lost ``lost``, the branch is here.

        The request carries the branch as the replay strategy builds it (the same selection
        within the same budget) and no ``previous_response_id``; the failed request stored
        nothing on the server, so nothing is sent twice. ``ContextOverflowError`` if it does
        not fit.
        """
        path = self.graph.path_to(attempt.user_id)
        plan = plan_request(
            "replay", path, budget=self._budget, counter=self.counter, index=self._index
        )
        record = attempt.record
        record.included = {n.id: plan.tokens[n.id] for n in plan.nodes}
        record.used, record.overflow = plan.used, plan.overflow
        record.cursor_before, record.reseeded_from = None, lost
        attempt.plan = plan
        plan.ensure_sendable()
        self._write(record, "queued")

    def _complete(self, attempt: Attempt, result: RunResultBase, state: ConversationState) -> None:
        if interruptions(result):
            self._parking.park(attempt, result, state)
            return
        items = output_items(result)
        tracker = state.tracker
        response_id = result.last_response_id
        if tracker is not None and tracker.previous_response_id is not None:
            response_id = tracker.previous_response_id
        usage = result.context_wrapper.usage
        usage_dict = {
            "requests": usage.requests,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
        }
        meta: dict[str, Any] = {"response_id": response_id, "usage": usage_dict}
        if attempt.node.status in _IN_FLIGHT:
            self.graph.complete(attempt.id, items=items or None, meta=meta)
        record = attempt.record
        record.response_id, record.usage = response_id, usage_dict
        if self.strategy == "previous_response":
            record.cursor_after = response_id
        elif self.strategy == "conversation" and tracker is not None:
            record.cursor_after = tracker.conversation_id
            conversation = str(tracker.conversation_id)
            self._servers.completed(conversation, attempt.id, tracker.last_item_id)
            self._save_servers()
        self._finish(attempt, "complete")

    def _fail(self, attempt: Attempt, error: BaseException) -> None:
        message = f"{type(error).__name__}: {error}"
        if attempt.node.status in _IN_FLIGHT:
            self.graph.fail(attempt.id, message)
        self._interrupted(attempt)
        self._finish(attempt, "failed", error=message)

    def _cancelled(self, attempt: Attempt, response_id: str | None) -> None:
        if attempt.node.status in _IN_FLIGHT:
            self.graph.stop(attempt.id)
        self._interrupted(attempt)
        attempt.record.response_id = response_id
        self._finish(attempt, "cancelled")

    def _interrupted(self, attempt: Attempt) -> None:
        attempt.record.cursor_after = attempt.record.cursor_before
        self._interrupted_on_server(attempt.node)

    def _interrupted_on_server(self, node: Node) -> None:
        """An attempt on a server conversation ended unfinished: the server may hold part of it."""
        server = node.meta.get("server_conversation")
        if isinstance(server, str):
            self._servers.interrupted(server)
            self._save_servers()

    def _released(self, attempt: Attempt) -> None:
        if self._in_flight is attempt:
            self._in_flight = None
        self._session._unbind()
        if attempt.resumed and attempt.status != "awaiting_approval":
            self.store.delete_run_state(self.id, attempt.attempt_id)

    def _driving(self, node_id: str) -> bool:
        """Whether ``node_id`` is the attempt this chat is running (the session defers to it)."""
        return self._in_flight is not None and self._in_flight.id == node_id

    # -- persistence -------------------------------------------------------------------------

    def _write(self, record: AttemptRecord, status: str, *, error: str | None = None) -> None:
        record.status = status
        if error is not None:
            record.error = error
        if status in _FINAL:
            record.finished_at = time.time()
        self._commit()
        self.store.put_attempt(self.id, record)

    def _finish(self, attempt: Attempt, status: str, *, error: str | None = None) -> None:
        """Store the attempt's final node and record, whatever another handle did meanwhile.

        When another handle moved the head, the compare-and-set is lost; the attempt is then
        stored over its stored version without moving the head (it stays off the branch the
        other handle made active), this handle re-reads the store, and the attempt's ``error``
        becomes ``ConcurrentUpdateError`` unless it already failed of its own.
        """
        final = attempt.node  # the commit's re-read rebinds attempt.node to the stored version
        try:
            self._write(attempt.record, status, error=error)
            return
        except ConcurrentUpdateError as exc:
            lost = exc
        self._settle(final)
        self.store.put_attempt(self.id, attempt.record)
        if attempt.error is None:
            conflict = ConcurrentUpdateError(
                f"attempt {attempt.id} ended {status} and is stored, but another handle changed "
                f"chat {self.id} meanwhile, so it is not on the active branch (now ending at "
                f"{self._head}); this handle has re-read the store"
            )
            conflict.__cause__ = lost
            attempt.error = conflict

    def _settle(self, final: Node) -> None:
        """Store an ended attempt's node over its stored version, leaving the head where it is."""
        for _ in range(_SETTLE_TRIES):
            head = self.store.get_head(self.id)
            node = _settled(final, self.store.get_node(self.id, final.id))
            try:
                if node is not None:
                    self.store.commit(self.id, [node], expected_head=head, new_head=head)
            except ConcurrentUpdateError:
                continue  # an edit or a new turn landed in between: read again
            break
        else:
            raise ConcurrentUpdateError(
                f"attempt {final.id} ended {final.status}, but chat {self.id} kept changing "
                f"under it in {_SETTLE_TRIES} tries; it could not be stored"
            )
        self._reload()

    def _commit(self) -> None:
        new_head = self.graph.active_leaf
        changes = self.graph.take_changes()
        try:
            self.store.commit(self.id, changes, expected_head=self._head, new_head=new_head)
        except ConcurrentUpdateError as exc:
            expected = self._head
            self._reload()  # the action is dropped: this handle now shows what the store holds
            raise ConcurrentUpdateError(
                f"another handle changed chat {self.id} (its active branch now ends at "
                f"{self._head}, not {expected}); nothing was stored, and this handle has re-read "
                "the store: try again"
            ) from exc
        self._head = new_head

    def _reload(self) -> None:
        """Re-read the graph, its head and the server conversations, which another handle moved."""
        self.graph = load_graph(self.store, self.id, self._id_factory)
        self._head = self.graph.active_leaf
        self._parking.found()
        meta = self.store.get_conversation(self.id).meta
        self._servers = ServerConversations.from_dict(meta.get("server_conversations"))
        attempt = self._in_flight
        if attempt is not None and attempt.id in self.graph:
            attempt.node = self.graph.get(attempt.id)

    def _save_servers(self) -> None:
        self.store.update_conversation_meta(
            self.id, {"server_conversations": self._servers.to_dict()}
        )

    def __repr__(self) -> str:
        return f"Conversation(id={self.id!r}, strategy={self.strategy!r}, nodes={len(self.graph)})"
