"""``Conversation``: the chat-level API an app server uses — send, stop, retry, edit, switch.

It joins a :class:`~agents_state_ext.ConversationGraph` (what was said, on which branch, in
memory), a :class:`~agents_state_ext.ConversationStore` (where it is kept; every change is one
commit with a compare-and-set on the branch head, see :mod:`.writes`) and, per attempt, a
:class:`~agents_state_ext.ConversationState` of the chat's strategy (who owns what is sent).
An attempt's nodes and its :class:`~agents_state_ext.AttemptRecord` are written together, in one
commit, when it starts and when it ends.

What differs between the strategies — what a request carries, the ``ConversationState`` it
runs under, how a completion is recorded, what the cursor is — is asked of one strategy object
(:mod:`.strategies`); this module has no strategy switch.

The server cursor has one owner: the chat's graph. Each complete assistant node carries the
response id it ended with (``meta["response_id"]``) and, under the conversation strategy, the
server conversation it was sent on (``meta["server_conversation"]``); the chat's
``server_conversations`` metadata says what each server conversation holds. An attempt's
``ConversationState`` is built from them for that one attempt and thrown away once its
completion is recorded back into the graph (a paused attempt's run, stored beside it, carries
that attempt's state until it resumes). :attr:`Conversation.cursor` reads it.

The store is async. ``send`` / ``retry`` / ``edit`` / ``resume`` stay synchronous and return
the :class:`Attempt` at once: its task stores the start, then calls the model, and raises what
went wrong when it is awaited. Reads of the graph in memory are synchronous
(:meth:`~Conversation.active_path`, :meth:`~Conversation.node`, :attr:`~Conversation.cursor`,
...); everything that reads or writes the store is a coroutine.

An attempt whose run stops for tool approval (``needs_approval``) is parked as
``awaiting_approval``: its run waits in the store beside it, its pending calls are readable
(:meth:`Conversation.pending_approvals`), any handle decides them (:meth:`~Conversation.approve`,
:meth:`~Conversation.reject`) and continues the run (:meth:`~Conversation.resume`); until then the
chat takes no new attempt, and :meth:`~Conversation.stop` cancels the parked one.

Several handles may share one chat (``open_conversation`` twice on one store). A handle whose
compare-and-set loses re-reads the store and raises ``ConcurrentUpdateError``; an attempt that
ends after another handle moved the head is still stored in its final status, off the branch
the other handle made active. :meth:`Conversation.refresh` re-reads the store on demand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agents import Agent, ModelSettings
from agents.result import RunResultBase
from openai import AsyncOpenAI

from .._attempts import AttemptDiff, AttemptRecord
from .._content import check_content
from .._context import ContextIndex
from .._graph import ConversationGraph
from .._nodes import Node
from .._run_config import as_run_config
from .._state import ConversationState, StrategyName
from .._status import FINAL
from .._status import IN_FLIGHT as _IN_FLIGHT
from .._tokens import MessageCounter, TokenCounter, counts_exactly
from ..errors import (
    AttemptNotFoundError,
    ConcurrentUpdateError,
    InvalidTransitionError,
    StoreUnavailableError,
)
from ..stores import ConversationStore
from .approvals import PendingApproval, read_approvals
from .attempt import Attempt
from .counts import save_counts
from .guard import WriteGuard
from .parking import Parking, interruptions, output_items
from .plan import Replay, start_replay
from .records import (
    check_budget,
    check_prompt_version,
    explained,
    invalidations,
    model_name,
    new_record,
    read_part,
    reasoning,
    response_id,
    usage,
)
from .session import GraphSession
from .strategies import ChatStrategy, strategy_for
from .writes import Writes

__all__ = ["Conversation"]


class Conversation:
    """One chat in a store, under one strategy; build it with ``await open_conversation(...)``.

    Actions start an :class:`Attempt` running in the current event loop and return it at
    once; one attempt runs at a time. ``budget`` (tokens, ``None``: unbounded) bounds what
    each request sends; change it between attempts with :meth:`set_budget`.
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
        client: AsyncOpenAI | None,
        prompt_version: str | None,
        fork: bool,
        runner_kwargs: Mapping[str, Any] | None,
        meta: Mapping[str, Any],
        id_factory: Callable[[str], str] | None = None,
    ) -> None:
        self.store = store
        self.graph = graph
        self.id = graph.conversation_id
        self.agent = agent
        self.counter: MessageCounter = counter or TokenCounter(model_name(agent), estimate=True)
        self.client = client
        self._prompt_version = prompt_version
        self.fork = fork
        self.runner_kwargs = dict(runner_kwargs or {})
        if "run_config" in self.runner_kwargs:
            self.runner_kwargs["run_config"] = as_run_config(self.runner_kwargs["run_config"])
        self._budget = check_budget(budget)
        self._id_factory = id_factory
        self._index = ContextIndex()
        self.guard: WriteGuard | None = None
        """Fences every commit and vets every request of this handle (see ``WriteGuard``):
        ``agents-state-ext serve`` sets its lease here. ``None``: no fence."""
        self._in_flight: Attempt | None = None
        self._first_root: str | None = None
        self._writes = Writes(self)
        self._parking = Parking(self)
        self._session = GraphSession(self)
        self._strategy: ChatStrategy = strategy_for(strategy, self, meta)

    # -- settings ----------------------------------------------------------------------------

    @property
    def strategy(self) -> StrategyName:
        """The strategy's name: who owns the history (``replay``, ``previous_response``, ...)."""
        return self._strategy.name

    @property
    def budget(self) -> int | None:
        """The token budget of each request (``None``: unbounded); see :meth:`set_budget`."""
        return self._budget

    @budget.setter
    def budget(self, value: int | None) -> None:
        raise AttributeError(
            f"the budget is stored with the chat: await chat.set_budget({value!r})"
        )

    async def set_budget(self, value: int | None) -> None:
        """Check and store a new token budget for the next attempts (``ValueError`` if invalid)."""
        budget = check_budget(value)
        await self.store.update_conversation_meta(self.id, {"budget": budget})
        self._budget = budget

    @property
    def prompt_version(self) -> str | None:
        """The prompt version recorded on each attempt; see :meth:`set_prompt_version`."""
        return self._prompt_version

    @prompt_version.setter
    def prompt_version(self, value: str | None) -> None:
        raise AttributeError(
            f"the prompt version is stored with the chat: await chat.set_prompt_version({value!r})"
        )

    async def set_prompt_version(self, value: str | None) -> None:
        """Store a new prompt version, recorded on the next attempts (``TypeError`` if not text)."""
        version = check_prompt_version(value)
        await self.store.update_conversation_meta(self.id, {"prompt_version": version})
        self._prompt_version = version

    # -- reading from memory -----------------------------------------------------------------

    @property
    def in_flight(self) -> Attempt | None:
        """The attempt still running, if any."""
        return self._in_flight

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

    @property
    def cursor(self) -> str | None:
        """The server cursor the next attempt on the active branch continues from.

        previous_response: the response id of the nearest complete assistant message on the
        branch. conversation: the server conversation holding exactly this branch, or ``None``
        when the next attempt forks a new one. ``None`` for replay and session.
        """
        return self._strategy.cursor(self.graph.active_path())

    def session(self) -> GraphSession:
        """An SDK ``Session`` following this chat's active branch (for ``Runner`` yourself).

        Each run through it is one attempt of the chat, with its record; see
        :class:`GraphSession` for how a run's end is known.

        Replay and session chats only: under ``previous_response`` or ``conversation`` the
        server owns the history, so a session would be a second owner (its turns would carry
        no server cursor to continue from) and ``MixedStateOwnerError`` is raised.
        """
        self._strategy.check_session()
        return self._session

    # -- reading from the store --------------------------------------------------------------

    async def _ready(self, *, read: bool = False) -> None:
        """File a finished ``chat.session()`` run and wait for this handle's pending writes."""
        self._session.settle(read=read)
        await self._writes.sync()

    async def refresh(self) -> None:
        """Re-read the graph, its head and the chat's settings from the store.

        Shows what another handle or process changed. ``InvalidTransitionError`` while an
        attempt runs in this handle (await or stop it first).
        """
        await self._ready(read=True)
        if self._in_flight is not None:
            raise InvalidTransitionError(
                f"cannot refresh: attempt {self._in_flight.id} is still running; await or stop it"
            )
        await self._writes.reload()

    async def awaiting_approval(self) -> Attempt | None:
        """The attempt whose tool calls wait for a decision, if any (see :meth:`resume`).

        Read from the store, so a pause or a decision of another handle or process shows.
        """
        await self._ready(read=True)
        return await self._parking.attempt()

    async def pending_approvals(self) -> list[PendingApproval]:
        """The tool calls the attempt ``awaiting_approval`` waits on, with decisions so far.

        Read from the store, so decisions taken by another handle or process show. ``[]`` when
        no attempt waits.
        """
        await self._ready(read=True)
        node = await self._parking.fresh()
        return read_approvals(node) if node is not None else []

    async def attempts(self, message_id: str | None = None) -> list[AttemptRecord]:
        """The attempt records, in start order (only that assistant message's if given)."""
        await self._ready(read=True)
        return await self.store.list_attempts(self.id, message_id=message_id)

    async def record(self, ref: str) -> AttemptRecord:
        """The record of an attempt, by attempt id or by its assistant message's id."""
        await self._ready(read=True)
        try:
            return await self.store.get_attempt(self.id, ref)
        except AttemptNotFoundError:
            node = self.graph.get(ref)
            if node.attempt_id is None:
                raise AttemptNotFoundError(
                    f"{ref} is a {node.role} message, not an attempt"
                ) from None
            return await self.store.get_attempt(self.id, node.attempt_id)

    async def explain(self, a: str, b: str) -> AttemptDiff:
        """What differed in what two attempts sent (attempt or message ids); inputs only.

        Beyond :func:`~agents_state_ext.explain`, the diff's ``texts`` show the changed text:
        the two user messages of an edit pair (``prompt``) and changed instructions.
        """
        first, second = await self.record(a), await self.record(b)
        return await explained(self, first, second)

    async def request_part(self, digest: str) -> Any:
        """The instructions text or tool definitions an attempt record names by ``digest``.

        ``KeyError`` if this chat keeps no part with that digest.
        """
        await self._ready(read=True)
        return await read_part(self, digest)

    async def replay(
        self,
        ref: str,
        *,
        model: str | None = None,
        model_settings: ModelSettings | None = None,
        instructions: str | None = None,
        stream: bool = False,
    ) -> Replay:
        """Send again exactly the request attempt ``ref`` made, as a new sibling attempt.

        The same model, settings, instructions, context and (where the strategy allows) server
        cursor as recorded; ``model`` / ``model_settings`` / ``instructions`` override them
        (the A/B case). Returns a :class:`~agents_state_ext.chat.plan.Replay` at once (its
        ``attempt`` runs); ``await replay.report()`` waits for it and says whether the rebuilt
        request was byte-identical to the recorded one, and if not, why. Works on a chat
        reopened from its store in another process.
        """
        self._check_idle("replay")
        original = await self.record(ref)
        self._check_idle("replay")
        return await start_replay(
            self,
            original,
            model=model,
            model_settings=model_settings,
            instructions=instructions,
            stream=stream,
        )

    # -- actions -----------------------------------------------------------------------------

    def send(self, content: str | Sequence[Mapping[str, Any]], *, stream: bool = False) -> Attempt:
        """Add a user message on the active branch and start answering it.

        An empty message raises ``EmptyMessageError``, content that is neither text nor input
        items ``MessageContentError``, and a message whose request would be over the token
        budget ``ContextOverflowError`` (with the counts): nothing is added, stored or sent.
        """
        check_content(content, "send")
        self._check_idle("send")
        leaf = self.graph.active_leaf
        user = self.graph.add_user(content)
        return self._start(self.graph.start_attempt(), stream, added=(user,), leaf=leaf)

    def retry(self, user_id: str | None = None, *, stream: bool = False) -> Attempt:
        """Answer a user message again (default: the active turn's); earlier attempts stay.

        ``ContextOverflowError`` when the request would be over the token budget (nothing is
        added, stored or sent: raise the budget with :meth:`set_budget` first).
        """
        self._check_idle("retry")
        leaf = self.graph.active_leaf
        return self._start(self.graph.retry(user_id), stream, leaf=leaf)

    def edit(
        self, user_id: str, content: str | Sequence[Mapping[str, Any]], *, stream: bool = False
    ) -> Attempt:
        """Replace a user message by a new version on a new branch, and answer it.

        Everything under the old version turns ``invalid`` and is never sent on this branch.
        An empty new version raises ``EmptyMessageError``, a malformed one
        ``MessageContentError``, one whose request would be over the token budget
        ``ContextOverflowError`` (nothing changes: the old version stays valid).
        """
        check_content(content, "edit")
        self._check_idle("edit")
        leaf = self.graph.active_leaf
        user = self.graph.edit(user_id, content)
        return self._start(self.graph.start_attempt(), stream, added=(user,), leaf=leaf)

    async def switch(self, node_id: str) -> Node:
        """Make ``node_id`` the active leaf (any message) and store it; nothing else changes."""
        await self._ready()
        node = self.graph.switch(node_id)
        await self._writes.commit()
        return node

    async def stop(self) -> Attempt | None:
        """Stop the attempt in flight, if any; its partial answer is stored as ``cancelled``.

        An attempt ``awaiting_approval`` is cancelled the same way: its stored run is dropped
        and its pending tool calls are never run (returned as a finished :class:`Attempt`).
        """
        attempt = self._in_flight
        if attempt is not None:
            return await attempt.stop()
        await self._ready()
        return await self._parking.drop()

    # -- tool approvals ----------------------------------------------------------------------

    async def approve(
        self, call_id: str | None = None, *, always: bool = False
    ) -> list[PendingApproval]:
        """Approve a pending tool call (``None``: every undecided one); see :meth:`resume`.

        ``always`` approves later calls of the same tool by the same agent in this run too.
        Decisions are stored at once, so another handle or process may :meth:`resume`. Returns
        the pending calls with their decisions.
        """
        await self._ready()
        return await self._parking.decide(call_id, "approved", always=always)

    async def reject(
        self, call_id: str | None = None, *, message: str | None = None, always: bool = False
    ) -> list[PendingApproval]:
        """Reject a pending tool call (``None``: every undecided one); see :meth:`resume`.

        The tool does not run; the model is told ``message`` (default: the SDK's rejection
        text) when the attempt resumes. ``always`` rejects later calls of that tool too.
        """
        await self._ready()
        return await self._parking.decide(call_id, "rejected", message=message, always=always)

    def resume(self, *, stream: bool = False) -> Attempt:
        """Continue the attempt ``awaiting_approval`` from its stored run, with the decisions.

        Every pending call needs a decision first (``ApprovalPendingError`` names those that
        have none, as this handle last read them: :meth:`pending_approvals` re-reads). The run
        goes on where it stopped: approved tools run, rejected ones tell the model so, and
        nothing the run already sent is sent again. The same attempt (same ids, same record)
        then ends ``complete``, ``cancelled`` or ``failed`` — or waits again. What the store
        says at the attempt's start (another handle stopped it, or the run is not the chat's)
        is raised when the attempt is awaited.
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
        record = new_record(
            node,
            included,
            prompt_version=self._prompt_version,
            budget=self._budget,
            state_owner=self.strategy,
            overflow=overflow,
            cursor_before=cursor_before,
        )
        record.exact = counts_exactly(self.counter)
        return record

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

    def _start(
        self,
        node: Node,
        stream: bool,
        *,
        added: Sequence[Node] = (),
        leaf: str | None,
        agent: Agent[Any] | None = None,
        budget: int | bool | None = False,
    ) -> Attempt:
        """Plan the new attempt ``node`` in memory and start its task (which stores it first).

        A plan that cannot be sent (over the budget) is refused here, before anything is
        stored: ``node`` and the nodes the action ``added`` for it are withdrawn from the graph
        and ``leaf`` is active again, so the chat is as it was. ``agent`` answers instead of
        the chat's; ``budget`` (unless ``False``) plans within that budget instead of the
        chat's (a replay's recorded one).
        """
        assert self.agent is not None
        kept = self._budget
        if budget is not False:
            self._budget = None if budget is None or budget is True else budget
        try:
            plan = self._strategy.plan(str(node.parent_id)).ensure_sendable()
        except BaseException:
            self._withdraw([node, *reversed(added)], leaf)
            raise
        finally:
            self._budget = kept
        record = self._new_record(
            node,
            {n.id: plan.tokens[n.id] for n in plan.nodes},
            overflow=plan.overflow,
            cursor_before=plan.cursor_before,
        )
        record.budget, record.used = plan.budget, plan.used
        record.reasoning = reasoning(plan)
        generation = self._writes.hold(record)
        attempt = Attempt(
            self, node, plan, record, agent=agent or self.agent, stream=stream,
            generation=generation,
        )  # fmt: skip
        self._in_flight = attempt
        return attempt

    def _withdraw(self, nodes: Sequence[Node], leaf: str | None) -> None:
        """Take ``nodes`` (newest first) back out of the graph, ``leaf`` active again."""
        last = len(nodes) - 1
        for i, node in enumerate(nodes):
            self.graph.withdraw(node.id, active_leaf=leaf if i == last else None)

    async def _begin(self, attempt: Attempt) -> None:
        """Store the attempt's start (node and record, one commit) before anything is sent."""
        if attempt.resumed:
            await self._parking.begin(attempt)
            return
        records = [attempt.record, *await invalidations(self, attempt, self._writes.queued)]
        try:
            await self._writes.commit(records, since=attempt.generation)
        except ConcurrentUpdateError as exc:
            node = attempt.node  # no longer in the graph, which was re-read
            node.status, node.meta["error"] = "failed", f"{type(exc).__name__}: {exc}"
            raise
        except Exception as exc:
            # The store failed and nothing of the start was stored; nothing was sent either.
            # The attempt ends failed in memory, and the handle's next commit stores it with
            # its user message, so the chat goes on (send the message again, or retry it).
            message = f"{type(exc).__name__}: {exc}"
            if attempt.node.status in _IN_FLIGHT:
                self.graph.fail(attempt.id, message)
            if attempt.record.status in FINAL:
                self._writes.hold(attempt.record, keep=True)
            else:
                self._writes.ended(attempt, "failed", error=message)
            if isinstance(exc, StoreUnavailableError):  # cut in flight: it may be stored
                self._writes.retry_ended()
            raise
        attempt.stored = True

    async def _complete(
        self, attempt: Attempt, result: RunResultBase, state: ConversationState
    ) -> None:
        if interruptions(result):
            await self._parking.park(attempt, result, state)
            return
        items = output_items(result)
        ended_on, used = response_id(result, state), usage(result)
        if attempt.node.status in _IN_FLIGHT:
            meta = {"response_id": ended_on, "usage": used}
            self.graph.complete(attempt.id, items=items or None, meta=meta)
        record = attempt.record
        record.response_id, record.usage = ended_on, used
        record.cursor_after = self._strategy.completed(attempt, state, ended_on)
        generation = self._writes.ended(attempt, "complete")
        await self._writes.end(attempt, generation)
        await save_counts(self.store, self.id, self.counter, [*attempt.plan.nodes, attempt.node])

    async def _fail(self, attempt: Attempt, error: BaseException) -> None:
        if not attempt.stored or attempt.record.status in FINAL:
            return  # nothing of it was stored, or its end is stored already
        message = f"{type(error).__name__}: {error}"
        if attempt.node.status in _IN_FLIGHT:
            self.graph.fail(attempt.id, message)
        attempt.record.cursor_after = attempt.record.cursor_before
        generation = self._writes.ended(attempt, "failed", error=message)
        self._strategy.interrupted(attempt.node)
        await self._writes.end(attempt, generation)

    async def _cancelled(self, attempt: Attempt, response_id: str | None) -> None:
        if not attempt.stored:
            return  # cancelled before its start was stored: nothing of it is in the store
        if attempt.node.status in _IN_FLIGHT:
            self.graph.stop(attempt.id)
        record = attempt.record
        record.cursor_after, record.response_id = record.cursor_before, response_id
        generation = self._writes.ended(attempt, "cancelled")
        self._strategy.interrupted(attempt.node)
        await self._writes.end(attempt, generation)

    async def _released(self, attempt: Attempt) -> None:
        if self._in_flight is attempt:
            self._in_flight = None
        self._session._unbind()
        if attempt.resumed and attempt.stored and attempt.status != "awaiting_approval":
            await self.store.delete_run_state(self.id, attempt.attempt_id)

    # -- persistence -------------------------------------------------------------------------

    def _adopt(self, graph: ConversationGraph, meta: Mapping[str, Any]) -> None:
        """Take the graph and settings just read from the store (another handle moved them)."""
        self.graph = graph
        self._parking.found()
        self._strategy.adopt(meta)
        try:
            self._budget = check_budget(meta.get("budget"))
        except ValueError:
            self._budget = None
        version = meta.get("prompt_version")
        self._prompt_version = version if isinstance(version, str) else None
        attempt = self._in_flight
        if attempt is not None and attempt.id in graph:
            attempt.node = graph.get(attempt.id)

    def __repr__(self) -> str:
        return f"Conversation(id={self.id!r}, strategy={self.strategy!r}, nodes={len(self.graph)})"
