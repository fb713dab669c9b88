"""One object per strategy: how a chat's attempts are planned, sent and recorded.

A :class:`~agents_state_ext.Conversation` holds one :class:`ChatStrategy` and asks it all that
differs between the state owners; it has no strategy switch of its own.

- :class:`ReplayStrategy`: the budgeted selection of the branch is sent whole, and runs are
  grouped per branch family (one prompt cache key);
- :class:`SessionStrategy`: the same selection, whose history the graph-backed session hands
  to the SDK;
- :class:`PreviousResponseStrategy`: only what the server lacks, chained from the response id
  of the nearest complete answer on the branch; a response the server lost re-seeds a new
  chain from the branch (:meth:`~ChatStrategy.reseed`);
- :class:`ConversationStrategy`: only the new turn, on the server conversation that holds
  exactly the branch, forking a new one when none does (see :mod:`.forks`).

The chat's graph is the one owner of the server cursor (:meth:`ChatStrategy.cursor` names it):
each strategy builds the ``ConversationState`` of one attempt from it
(:meth:`~ChatStrategy.state`) and records the attempt's completion back into it
(:meth:`~ChatStrategy.completed`); the state is then thrown away. The conversation strategy's
registry of server conversations lives in the chat's metadata (:meth:`~ChatStrategy.save`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import agents
from agents import ModelSettings, RunConfig, RunState

from .. import _compat
from .._nodes import Node
from .._reasoning import count_reasoning
from .._state import ConversationState, StrategyName
from ..errors import FencedOutError, GraphError, MixedStateOwnerError
from .forks import ServerConversations, place, update_stored
from .plan import Plan, chained, nearest_complete_assistant, selected, with_history
from .records import reasoning
from .reseed import previous_response_lost

if TYPE_CHECKING:
    from .attempt import Attempt
    from .conversation import Conversation

__all__ = [
    "ChatStrategy",
    "ConversationStrategy",
    "PreviousResponseStrategy",
    "ReplayStrategy",
    "SessionStrategy",
    "strategy_for",
]

Loaded = tuple[ConversationState, RunState[Any]]


class ChatStrategy(Protocol):
    """What differs between the state owners of a chat (see the module docstring)."""

    @property
    def name(self) -> StrategyName:
        """The strategy's name, stored with the chat."""
        ...

    def plan(self, user: str | Sequence[Node]) -> Plan:
        """What answering a user message of the chat's graph sends, within the budget.

        ``user`` is its id, or the branch from the root to it (``graph.path_to``). With the
        id, the budgeted selection reads the graph's own active path (no copy), so replay
        and session plans cost what they keep, not the history's length.
        """
        ...

    def cursor(self, path: Sequence[Node]) -> str | None:
        """The server cursor an attempt after ``path`` continues from (``None``: none, or new)."""
        ...

    def check_session(self) -> None:
        """``MixedStateOwnerError`` when an SDK session would give the history a second owner."""
        ...

    async def state(self, attempt: Attempt) -> tuple[ConversationState, list[dict[str, Any]]]:
        """The ``ConversationState`` of one attempt, and the input its run is given."""
        ...

    async def resumed(self, attempt: Attempt, blob: str) -> Loaded:
        """The state and ``RunState`` of a resumed attempt, loaded from its paused run."""
        ...

    def runner_kwargs(self, attempt: Attempt) -> dict[str, Any]:
        """The chat's ``runner_kwargs`` for the run of ``attempt``."""
        ...

    def lost_cursor(self, attempt: Attempt, error: BaseException) -> str | None:
        """The cursor ``attempt`` continued from, if ``error`` says the server lost it (once)."""
        ...

    async def reseed(self, attempt: Attempt, lost: str) -> None:
        """Re-plan ``attempt`` without the cursor ``lost``, and store that before it is sent."""
        ...

    def completed(
        self, attempt: Attempt, state: ConversationState, response_id: str | None
    ) -> str | None:
        """Note a completed attempt in the strategy's bookkeeping; the cursor after it."""
        ...

    def interrupted(self, node: Node) -> None:
        """Note an attempt that ended unfinished after it may have been sent."""
        ...

    async def save(self) -> None:
        """Store what :meth:`completed` and :meth:`interrupted` noted (kept if the write fails).

        Every commit of the chat calls it first (see :mod:`.writes`).
        """
        ...

    def adopt(self, meta: Mapping[str, Any]) -> None:
        """Take the chat's metadata just read from the store (another handle changed it)."""
        ...


class _Strategy:
    """What most strategies share: nothing on the server to track, nothing to recover."""

    name: StrategyName
    owner: str | None = None  # the API that owns the history on the server, if any

    def __init__(self, chat: Conversation, meta: Mapping[str, Any]) -> None:
        self._chat = chat
        self._cache_key = str(meta.get("prompt_cache_key") or f"agents-state-ext:{chat.id}")

    def _selected(self, user: str | Sequence[Node]) -> Plan:
        """The budgeted selection answering ``user``, from the chat's graph and its index."""
        chat = self._chat
        return selected(
            chat.graph,
            user_id=_user_id(user),
            budget=chat.budget,
            counter=chat.counter,
            index=chat._index,
        )

    def _path(self, user: str | Sequence[Node]) -> Sequence[Node]:
        """The branch from the root to ``user`` (given as an id or as that branch)."""
        return self._chat.graph.path_to(user) if isinstance(user, str) else user

    def cursor(self, path: Sequence[Node]) -> str | None:
        return None

    def check_session(self) -> None:
        if self.owner is None:
            return
        chat = self._chat
        raise MixedStateOwnerError(
            f"chat {chat.id} uses the {self.name} strategy: the {self.owner} API owns its "
            "history, so an SDK session would give it a second owner. Use chat.send / "
            "retry / edit, which run under the chat's own strategy, or open the chat with "
            'strategy="session" (or "replay") to run Runner with chat.session()'
        )

    async def resumed(self, attempt: Attempt, blob: str) -> Loaded:
        return await self._loads(attempt, blob)

    async def _loads(self, attempt: Attempt, blob: str, **options: Any) -> Loaded:
        agent = attempt.agent
        assert agent is not None  # the chat checked it before starting the attempt
        return await ConversationState.loads(agent, blob, **options)

    def runner_kwargs(self, attempt: Attempt) -> dict[str, Any]:
        return dict(self._chat.runner_kwargs)

    def lost_cursor(self, attempt: Attempt, error: BaseException) -> str | None:
        return None

    async def reseed(self, attempt: Attempt, lost: str) -> None:
        raise NotImplementedError(f"the {self.name} strategy has no cursor to lose")

    def completed(
        self, attempt: Attempt, state: ConversationState, response_id: str | None
    ) -> str | None:
        return None

    def interrupted(self, node: Node) -> None:
        return None

    async def save(self) -> None:
        return None

    def adopt(self, meta: Mapping[str, Any]) -> None:
        return None


class ReplayStrategy(_Strategy):
    """The app owns the history: each request carries the budgeted branch."""

    name: StrategyName = "replay"

    def plan(self, user: str | Sequence[Node]) -> Plan:
        return self._selected(user)

    async def state(self, attempt: Attempt) -> tuple[ConversationState, list[dict[str, Any]]]:
        return ConversationState.replay(), attempt.plan.input

    def runner_kwargs(self, attempt: Attempt) -> dict[str, Any]:
        """Grouped by branch family, so the SDK sends one prompt cache key (unless set)."""
        kwargs = super().runner_kwargs(attempt)
        config = kwargs.get("run_config") or RunConfig()
        if config.group_id is None:
            group = f"agents-state-ext:{self._chat._cache_group(attempt.id)}"
            kwargs["run_config"] = dataclasses.replace(config, group_id=group)
        return kwargs


class SessionStrategy(_Strategy):
    """The graph-backed SDK session owns the history: it hands the SDK the budgeted branch."""

    name: StrategyName = "session"

    def plan(self, user: str | Sequence[Node]) -> Plan:
        return with_history(self._selected(user))

    async def state(self, attempt: Attempt) -> tuple[ConversationState, list[dict[str, Any]]]:
        session = self._chat._session
        session._bind(attempt.id, attempt.plan.history)
        return ConversationState.session(session), attempt.plan.input

    async def resumed(self, attempt: Attempt, blob: str) -> Loaded:
        session = self._chat._session
        session._bind(attempt.id, attempt.plan.history)
        return await self._loads(attempt, blob, session=session)


class PreviousResponseStrategy(_Strategy):
    """The Responses API owns the history: each branch chains from its own response id."""

    name: StrategyName = "previous_response"
    owner = "Responses"

    def plan(self, user: str | Sequence[Node]) -> Plan:
        path = self._path(user)
        anchor = nearest_complete_assistant(path[:-1])
        cursor = None
        if anchor is not None:
            cursor = anchor.meta.get("response_id")
            if not isinstance(cursor, str):
                raise GraphError(
                    f"assistant node {anchor.id} is complete but has no response id to chain from"
                )
        chat = self._chat
        plan = chained(path, anchor, budget=chat.budget, counter=chat.counter)
        plan.cursor_before = cursor
        return plan

    def cursor(self, path: Sequence[Node]) -> str | None:
        """The response id of the nearest complete assistant message on ``path``."""
        anchor = nearest_complete_assistant(path)
        return None if anchor is None else anchor.meta.get("response_id")

    async def state(self, attempt: Attempt) -> tuple[ConversationState, list[dict[str, Any]]]:
        plan = attempt.plan
        state = ConversationState.previous_response(
            plan.cursor_before, prompt_cache_key=self._cache_key
        )
        return state, plan.input

    def lost_cursor(self, attempt: Attempt, error: BaseException) -> str | None:
        record = attempt.record
        cursor = record.cursor_before
        if cursor is None or record.reseeded_from:
            return None
        return cursor if previous_response_lost(error, cursor) else None

    async def reseed(self, attempt: Attempt, lost: str) -> None:
        """Re-plan ``attempt`` on a new chain: the server lost ``lost``, the branch is here.

        The request carries the branch as the replay strategy builds it (the same selection
        within the same budget) and no ``previous_response_id``; the failed request stored
        nothing on the server, so nothing is sent twice. ``ContextOverflowError`` if it does
        not fit.
        """
        plan = self._selected(attempt.user_id)
        record = attempt.record
        record.included = {n.id: plan.tokens[n.id] for n in plan.nodes}
        record.used, record.overflow = plan.used, plan.overflow
        record.reasoning = reasoning(plan)
        record.cursor_before, record.reseeded_from = None, lost
        attempt.plan = plan
        plan.ensure_sendable()
        await self._chat._writes.write(record, "queued")

    def completed(
        self, attempt: Attempt, state: ConversationState, response_id: str | None
    ) -> str | None:
        return response_id


class ConversationStrategy(_Strategy):
    """The Conversations API owns the history: one linear server conversation per branch."""

    name: StrategyName = "conversation"
    owner = "Conversations"

    def __init__(self, chat: Conversation, meta: Mapping[str, Any]) -> None:
        super().__init__(chat, meta)
        self.servers = ServerConversations.from_dict(meta.get("server_conversations"))
        self._touched: set[str] = set()

    def plan(self, user: str | Sequence[Node]) -> Plan:
        path = self._path(user)
        selection = self._selected(user)
        chat = self._chat
        plan = chained(
            path, nearest_complete_assistant(path[:-1]), budget=chat.budget, counter=chat.counter
        )
        plan.seed = list(selection.nodes[:-1])
        # A fork seeds the selection, which must fit as well as what is sent.
        plan.overflow = selection.overflow or plan.overflow
        if selection.overflow:
            plan.required = selection.used
        return plan

    def cursor(self, path: Sequence[Node]) -> str | None:
        """The server conversation holding exactly ``path``, or ``None`` (the next one forks)."""
        anchor = nearest_complete_assistant(path)
        tip = anchor.id if anchor is not None else None
        server = self.servers.root if anchor is None else anchor.meta.get("server_conversation")
        known = self.servers.known.get(server) if isinstance(server, str) else None
        return server if known is not None and known.get("tip") == tip else None

    def _client(self, attempt: Attempt) -> Any:
        model = getattr(attempt.agent, "model", None)
        return self._chat.client or _compat.inner_openai_client(model)

    async def state(self, attempt: Attempt) -> tuple[ConversationState, list[dict[str, Any]]]:
        """Place the attempt on a server conversation (forking one if needed), then store it."""
        chat, plan, node = self._chat, attempt.plan, attempt.node
        client = self._client(attempt)
        placed = await place(plan, self.servers, client, fork=chat.fork)
        known = self.servers.known[placed.conversation_id]
        sent = plan.nodes
        if placed.created or known.get("system") or plan.anchor is not None:
            sent = [chat.graph.get(attempt.user_id)]
        included = {n.id: chat.counter.count(n.id, n.items) for n in [*placed.seeded, *sent]}
        record = attempt.record
        record.included, record.used = included, sum(included.values())
        record.cursor_before = placed.conversation_id
        node.meta["server_conversation"] = placed.conversation_id
        if placed.created:
            node.meta["seeded"] = [n.id for n in placed.seeded]
            node.meta["forked_from"] = placed.forked_from
            dropped = sum(count_reasoning(n.items) for n in placed.seeded)
            record.reasoning = {"carried": 0, "dropped": dropped} if dropped else {}
        self._touched.add(placed.conversation_id)
        await self.save()
        await chat._writes.write(record, "queued")
        state = ConversationState.conversation(
            placed.conversation_id, client=client, prompt_cache_key=self._cache_key
        )
        return state, [item for n in sent for item in n.items]

    async def resumed(self, attempt: Attempt, blob: str) -> Loaded:
        return await self._loads(attempt, blob, client=self._client(attempt))

    def runner_kwargs(self, attempt: Attempt) -> dict[str, Any]:
        """No blind resend into a conversation another request holds (``conversation_locked``).

        The Agents SDK resends a request refused with ``conversation_locked`` as it is, up to
        three times; but the request holding the lock then appends its items, so the resend
        would land on a server conversation that no longer holds exactly this branch (with,
        say, another worker's unanswered tool call in it). The attempt fails instead with
        :class:`~agents_state_ext.ConversationLockedError`, its conversation is checked before
        reuse, and the next attempt forks when it diverged. Only when the agent and the run
        config set no ``ModelSettings.retry`` of their own, and the SDK has them (0.24+).
        """
        kwargs = super().runner_kwargs(attempt)
        config = kwargs.get("run_config") or RunConfig()
        agent = attempt.agent
        chosen = [
            getattr(settings, "retry", None)
            for settings in (getattr(agent, "model_settings", None), config.model_settings)
        ]
        if _NO_RETRY is None or any(retry is not None for retry in chosen):
            return kwargs
        base = config.model_settings or ModelSettings()
        settings = base.resolve(ModelSettings(retry=_NO_RETRY))
        kwargs["run_config"] = dataclasses.replace(config, model_settings=settings)
        return kwargs

    def completed(
        self, attempt: Attempt, state: ConversationState, response_id: str | None
    ) -> str | None:
        """The conversation the attempt completed on: its node is that conversation's tip."""
        tracker = state.tracker
        if tracker is None:
            return None
        server = str(tracker.conversation_id)
        self.servers.completed(server, attempt.id, tracker.last_item_id)
        self._touched.add(server)
        return tracker.conversation_id

    def interrupted(self, node: Node) -> None:
        """The server may hold part of the attempt: its conversation is checked before reuse."""
        server = node.meta.get("server_conversation")
        if isinstance(server, str):
            self.servers.interrupted(server)
            self._touched.add(server)

    async def save(self) -> None:
        """Store the touched server conversations, merged into what other handles stored."""
        touched, self._touched = self._touched, set()
        if not touched:
            return
        chat = self._chat

        def merge(stored: ServerConversations) -> None:
            for conversation_id in sorted(touched):
                stored.merge(self.servers, conversation_id)

        try:
            self.servers = await update_stored(chat.store, chat.id, merge, chat.guard)
        except FencedOutError:
            return  # another worker drives the chat now; the commit after this says so
        except BaseException:
            self._touched |= touched  # nothing was stored: the next save (or commit) tries again
            raise

    def adopt(self, meta: Mapping[str, Any]) -> None:
        self.servers = ServerConversations.from_dict(meta.get("server_conversations"))
        self._touched.clear()


_RETRY_SETTINGS: Any = getattr(agents, "ModelRetrySettings", None)
_NO_RETRY: Any = _RETRY_SETTINGS(max_retries=0) if _RETRY_SETTINGS is not None else None
"""``ModelSettings.retry`` that turns the SDK's resend of ``conversation_locked`` off."""


def _user_id(user: str | Sequence[Node]) -> str:
    """The id of the user message ``user`` names (an id, or a branch ending with it)."""
    if isinstance(user, str):
        return user
    if not user:
        raise GraphError("an attempt answers the active user message, which must end the path")
    return user[-1].id


_BY_NAME: dict[str, Callable[[Conversation, Mapping[str, Any]], ChatStrategy]] = {
    "replay": ReplayStrategy,
    "session": SessionStrategy,
    "previous_response": PreviousResponseStrategy,
    "conversation": ConversationStrategy,
}


def strategy_for(name: StrategyName, chat: Conversation, meta: Mapping[str, Any]) -> ChatStrategy:
    """The strategy object called ``name`` for ``chat`` (with its stored ``meta``)."""
    try:
        make = _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}") from None
    return make(chat, meta)
