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

The class has public methods only. A handle is its frozen dependencies (:mod:`.deps`), its
book of writes (:mod:`.writes`: the graph, the head, the settings) and, per attempt, a
``Turn`` run by the turn pipeline (:mod:`.turn`); the methods start turns and read the book.

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

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agents import Agent, ModelSettings
from openai import AsyncOpenAI

from .._attempts import AttemptDiff, AttemptRecord
from .._content import check_content
from .._context import ContextIndex
from .._graph import ConversationGraph
from .._nodes import Node
from .._run_config import as_run_config
from .._state import StrategyName
from .._tokens import MessageCounter, TokenCounter
from ..errors import AttemptNotFoundError, InvalidTransitionError
from ..stores import ConversationStore
from .approving import _Approvals, ready, settle
from .attempt import Attempt
from .deps import ChatDeps
from .guard import WriteGuard
from .parking import drop
from .records import explained, model_name, read_part
from .replay import Replay, start_replay
from .rules import check_budget, check_prompt_version
from .session import GraphSession
from .strategies import strategy_for
from .turn import check_idle, start
from .writes import Writes

__all__ = ["Conversation"]


class Conversation(_Approvals):
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
        kwargs = dict(runner_kwargs or {})
        if "run_config" in kwargs:
            kwargs["run_config"] = as_run_config(kwargs["run_config"])
        deps = ChatDeps(
            store=store,
            id=graph.conversation_id,
            strategy=strategy_for(strategy, graph.conversation_id, meta),
            counter=counter or TokenCounter(model_name(agent), estimate=True),
            client=client,
            fork=fork,
            runner_kwargs=kwargs,
            id_factory=id_factory,
            index=ContextIndex(),
        )
        book = Writes(deps, graph, meta, budget=check_budget(budget), prompt_version=prompt_version)
        self._book = book
        self._deps = dataclasses.replace(deps, session=GraphSession(deps, book))
        self.store, self.id, self.agent = store, deps.id, agent
        self.counter, self.client, self.fork = deps.counter, client, fork
        self.runner_kwargs = kwargs
        self._in_flight: Attempt | None = None

    # -- the handle --------------------------------------------------------------------------

    @property
    def graph(self) -> ConversationGraph:
        """The chat's graph, as this handle last read or changed it."""
        return self._book.graph

    @property
    def guard(self) -> WriteGuard | None:
        """Fences every commit and vets every request of this handle (see ``WriteGuard``):
        ``agents-state-ext serve`` sets its lease here. ``None``: no fence."""
        return self._book.guard

    @guard.setter
    def guard(self, value: WriteGuard | None) -> None:
        self._book.guard = value

    # -- settings ----------------------------------------------------------------------------

    @property
    def strategy(self) -> StrategyName:
        """The strategy's name: who owns the history (``replay``, ``previous_response``, ...)."""
        return self._deps.strategy.name

    @property
    def budget(self) -> int | None:
        """The token budget of each request (``None``: unbounded); see :meth:`set_budget`."""
        return self._book.budget

    @budget.setter
    def budget(self, value: int | None) -> None:
        raise AttributeError(
            f"the budget is stored with the chat: await chat.set_budget({value!r})"
        )

    async def set_budget(self, value: int | None) -> None:
        """Check and store a new token budget for the next attempts (``ValueError`` if invalid)."""
        await self._book.keep_setting("budget", check_budget(value))

    @property
    def prompt_version(self) -> str | None:
        """The prompt version recorded on each attempt; see :meth:`set_prompt_version`."""
        return self._book.prompt_version

    @prompt_version.setter
    def prompt_version(self, value: str | None) -> None:
        raise AttributeError(
            f"the prompt version is stored with the chat: await chat.set_prompt_version({value!r})"
        )

    async def set_prompt_version(self, value: str | None) -> None:
        """Store a new prompt version, recorded on the next attempts (``TypeError`` if not text)."""
        await self._book.keep_setting("prompt_version", check_prompt_version(value))

    # -- reading from memory -----------------------------------------------------------------

    @property
    def in_flight(self) -> Attempt | None:
        """The attempt still running, if any."""
        return self._in_flight if self._book.running is not None else None

    def active_path(self) -> list[Node]:
        """The active branch, root first."""
        settle(self._deps)
        return self.graph.active_path()

    def node(self, node_id: str) -> Node:
        """One message (``NodeNotFoundError`` if unknown)."""
        settle(self._deps)
        return self.graph.get(node_id)

    def siblings(self, node_id: str) -> list[Node]:
        """The alternatives to a message: earlier attempts, or earlier versions of an edit."""
        settle(self._deps)
        return self.graph.siblings(node_id)

    def branches(self) -> list[str]:
        """The leaf id of every branch, oldest first."""
        settle(self._deps)
        return self.graph.branches()

    @property
    def cursor(self) -> str | None:
        """The server cursor the next attempt on the active branch continues from.

        previous_response: the response id of the nearest complete assistant message on the
        branch. conversation: the server conversation holding exactly this branch, or ``None``
        when the next attempt forks a new one. ``None`` for replay and session.
        """
        return self._deps.strategy.cursor(self._book, self.graph.active_path())

    def session(self) -> GraphSession:
        """An SDK ``Session`` following this chat's active branch (for ``Runner`` yourself).

        Each run through it is one attempt of the chat, with its record; see
        :class:`GraphSession` for how a run's end is known.

        Replay and session chats only: under ``previous_response`` or ``conversation`` the
        server owns the history, so a session would be a second owner (its turns would carry
        no server cursor to continue from) and ``MixedStateOwnerError`` is raised.
        """
        self._deps.strategy.check_session(self._deps)
        session = self._deps.session
        assert isinstance(session, GraphSession)
        return session

    # -- reading from the store --------------------------------------------------------------

    async def refresh(self) -> None:
        """Re-read the graph, its head and the chat's settings from the store.

        Shows what another handle or process changed. ``InvalidTransitionError`` while an
        attempt runs in this handle (await or stop it first).
        """
        await ready(self._deps, self._book, read=True)
        attempt = self.in_flight
        if attempt is not None:
            raise InvalidTransitionError(
                f"cannot refresh: attempt {attempt.id} is still running; await or stop it"
            )
        await self._book.reload()

    async def attempts(self, message_id: str | None = None) -> list[AttemptRecord]:
        """The attempt records, in start order (only that assistant message's if given)."""
        await ready(self._deps, self._book, read=True)
        return await self.store.list_attempts(self.id, message_id=message_id)

    async def record(self, ref: str) -> AttemptRecord:
        """The record of an attempt, by attempt id or by its assistant message's id."""
        await ready(self._deps, self._book, read=True)
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
        return await explained(self._deps, self.graph, first, second)

    async def request_part(self, digest: str) -> Any:
        """The instructions text or tool definitions an attempt record names by ``digest``.

        ``KeyError`` if this chat keeps no part with that digest.
        """
        await ready(self._deps, self._book, read=True)
        return await read_part(self._deps, digest)

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
        check_idle(self._deps, self._book, self.agent, "replay")
        original = await self.record(ref)
        check_idle(self._deps, self._book, self.agent, "replay")
        turn, obstacles = await start_replay(
            self._deps,
            self._book,
            self.agent,
            original,
            read_part=self.request_part,
            model=model,
            model_settings=model_settings,
            instructions=instructions,
            stream=stream,
        )
        self._in_flight = attempt = Attempt(self._deps, self._book, turn)
        return Replay(self.record, original, attempt, obstacles)

    # -- actions -----------------------------------------------------------------------------

    def send(self, content: str | Sequence[Mapping[str, Any]], *, stream: bool = False) -> Attempt:
        """Add a user message on the active branch and start answering it.

        An empty message raises ``EmptyMessageError``, content that is neither text nor input
        items ``MessageContentError``, and a message whose request would be over the token
        budget ``ContextOverflowError`` (with the counts): nothing is added, stored or sent.
        """
        check_content(content, "send")
        check_idle(self._deps, self._book, self.agent, "send")
        leaf = self.graph.active_leaf
        user = self.graph.add_user(content)
        node = self.graph.start_attempt()
        turn = start(
            self._deps, self._book, node, stream, added=(user,), leaf=leaf, agent=self.agent
        )
        self._in_flight = attempt = Attempt(self._deps, self._book, turn)
        return attempt

    def retry(self, user_id: str | None = None, *, stream: bool = False) -> Attempt:
        """Answer a user message again (default: the active turn's); earlier attempts stay.

        ``ContextOverflowError`` when the request would be over the token budget (nothing is
        added, stored or sent: raise the budget with :meth:`set_budget` first).
        """
        check_idle(self._deps, self._book, self.agent, "retry")
        leaf = self.graph.active_leaf
        node = self.graph.retry(user_id)
        turn = start(self._deps, self._book, node, stream, leaf=leaf, agent=self.agent)
        self._in_flight = attempt = Attempt(self._deps, self._book, turn)
        return attempt

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
        check_idle(self._deps, self._book, self.agent, "edit")
        leaf = self.graph.active_leaf
        user = self.graph.edit(user_id, content)
        node = self.graph.start_attempt()
        turn = start(
            self._deps, self._book, node, stream, added=(user,), leaf=leaf, agent=self.agent
        )
        self._in_flight = attempt = Attempt(self._deps, self._book, turn)
        return attempt

    async def switch(self, node_id: str) -> Node:
        """Make ``node_id`` the active leaf (any message) and store it; nothing else changes."""
        await ready(self._deps, self._book)
        node = self.graph.switch(node_id)
        await self._book.commit()
        return node

    async def stop(self) -> Attempt | None:
        """Stop the attempt in flight, if any; its partial answer is stored as ``cancelled``.

        An attempt ``awaiting_approval`` is cancelled the same way: its stored run is dropped
        and its pending tool calls are never run (returned as a finished :class:`Attempt`).
        """
        attempt = self.in_flight
        if attempt is not None:
            return await attempt.stop()
        await ready(self._deps, self._book)
        dropped = await drop(self._deps, self._book)
        return Attempt.settled(*dropped, agent=self.agent) if dropped is not None else None

    def __repr__(self) -> str:
        return f"Conversation(id={self.id!r}, strategy={self.strategy!r}, nodes={len(self.graph)})"
