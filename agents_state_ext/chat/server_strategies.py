"""The strategies under which a server owns the history: ``previous_response``, ``conversation``.

See :mod:`.strategies` for what each strategy does; the conversation strategy's registry of
server conversations is held and stored by the chat's book (``book.servers``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import agents
from agents import ModelSettings, RunConfig

from .. import _compat
from .._nodes import Node
from .._reasoning import count_reasoning
from .._state import ConversationState, StrategyName
from ..errors import GraphError
from .deps import Loaded
from .forks import place
from .plan import Plan, chained, nearest_complete_assistant
from .records import reasoning
from .reseed import previous_response_lost
from .strategy_base import Strategy

if TYPE_CHECKING:
    from .deps import ChatDeps, Turn
    from .writes import Writes

__all__ = ["ConversationStrategy", "PreviousResponseStrategy"]


class PreviousResponseStrategy(Strategy):
    """The Responses API owns the history: each branch chains from its own response id."""

    name: StrategyName = "previous_response"
    owner = "Responses"

    def plan(
        self, deps: ChatDeps, book: Writes, user: str | Sequence[Node], budget: int | None
    ) -> Plan:
        path = self.path(book, user)
        anchor = nearest_complete_assistant(path[:-1])
        cursor = None
        if anchor is not None:
            cursor = anchor.meta.get("response_id")
            if not isinstance(cursor, str):
                raise GraphError(
                    f"assistant node {anchor.id} is complete but has no response id to chain from"
                )
        plan = chained(path, anchor, budget=budget, counter=deps.counter)
        plan.cursor_before = cursor
        return plan

    def cursor(self, book: Writes, path: Sequence[Node]) -> str | None:
        """The response id of the nearest complete assistant message on ``path``."""
        anchor = nearest_complete_assistant(path)
        return None if anchor is None else anchor.meta.get("response_id")

    async def state(
        self, deps: ChatDeps, book: Writes, turn: Turn
    ) -> tuple[ConversationState, list[dict[str, Any]]]:
        plan = turn.plan
        state = ConversationState.previous_response(
            plan.cursor_before, prompt_cache_key=self.cache_key
        )
        return state, plan.input

    def lost_cursor(self, turn: Turn, error: BaseException) -> str | None:
        record = turn.record
        cursor = record.cursor_before
        if cursor is None or record.reseeded_from:
            return None
        return cursor if previous_response_lost(error, cursor) else None

    async def reseed(self, deps: ChatDeps, book: Writes, turn: Turn, lost: str) -> None:
        """Re-plan ``turn`` on a new chain: the server lost ``lost``, the branch is here.

        The request carries the branch as the replay strategy builds it (the same selection
        within the same budget) and no ``previous_response_id``; the failed request stored
        nothing on the server, so nothing is sent twice. ``ContextOverflowError`` if it does
        not fit.
        """
        plan = self.selected(deps, book, turn.user_id, book.budget)
        record = turn.record
        record.included = {n.id: plan.tokens[n.id] for n in plan.nodes}
        record.used, record.overflow = plan.used, plan.overflow
        record.reasoning = reasoning(plan)
        record.cursor_before, record.reseeded_from = None, lost
        turn.plan = plan
        plan.ensure_sendable()
        await book.write(record, "queued")

    def sent(self, turn: Turn) -> list[str] | None:
        record = turn.record
        if record.reseeded_from is not None or record.cursor_before is None:
            return list(record.included)  # a new or re-seeded chain: the whole context
        return None

    def completed(
        self, book: Writes, turn: Turn, state: ConversationState, response_id: str | None
    ) -> str | None:
        return response_id


class ConversationStrategy(Strategy):
    """The Conversations API owns the history: one linear server conversation per branch."""

    name: StrategyName = "conversation"
    owner = "Conversations"

    def plan(
        self, deps: ChatDeps, book: Writes, user: str | Sequence[Node], budget: int | None
    ) -> Plan:
        path = self.path(book, user)
        selection = self.selected(deps, book, user, budget)
        plan = chained(
            path, nearest_complete_assistant(path[:-1]), budget=budget, counter=deps.counter
        )
        plan.seed = list(selection.nodes[:-1])
        # A fork seeds the selection, which must fit as well as what is sent.
        plan.overflow = selection.overflow or plan.overflow
        if selection.overflow:
            plan.required = selection.used
        return plan

    def cursor(self, book: Writes, path: Sequence[Node]) -> str | None:
        """The server conversation holding exactly ``path``, or ``None`` (the next one forks)."""
        servers = book.servers
        anchor = nearest_complete_assistant(path)
        tip = anchor.id if anchor is not None else None
        server = servers.root if anchor is None else anchor.meta.get("server_conversation")
        known = servers.known.get(server) if isinstance(server, str) else None
        return server if known is not None and known.get("tip") == tip else None

    def _client(self, deps: ChatDeps, turn: Turn) -> Any:
        model = getattr(turn.agent, "model", None)
        return deps.client or _compat.inner_openai_client(model)

    async def state(
        self, deps: ChatDeps, book: Writes, turn: Turn
    ) -> tuple[ConversationState, list[dict[str, Any]]]:
        """Place the attempt on a server conversation (forking one if needed), then store it."""
        plan, node = turn.plan, turn.node
        client = self._client(deps, turn)
        placed = await place(plan, book.servers, client, fork=deps.fork)
        known = book.servers.known[placed.conversation_id]
        sent = plan.nodes
        if placed.created or known.get("system") or plan.anchor is not None:
            sent = [book.graph.get(turn.user_id)]
        included = {n.id: deps.counter.count(n.id, n.items) for n in [*placed.seeded, *sent]}
        record = turn.record
        record.included, record.used = included, sum(included.values())
        record.cursor_before = placed.conversation_id
        node.meta["server_conversation"] = placed.conversation_id
        if placed.created:
            node.meta["seeded"] = [n.id for n in placed.seeded]
            node.meta["forked_from"] = placed.forked_from
            dropped = sum(count_reasoning(n.items) for n in placed.seeded)
            record.reasoning = {"carried": 0, "dropped": dropped} if dropped else {}
        book.touched.add(placed.conversation_id)
        await book.save_servers()
        await book.write(record, "queued")
        state = ConversationState.conversation(
            placed.conversation_id, client=client, prompt_cache_key=self.cache_key
        )
        return state, [item for n in sent for item in n.items]

    async def resumed(self, deps: ChatDeps, book: Writes, turn: Turn, blob: str) -> Loaded:
        return await self.loads(turn, blob, client=self._client(deps, turn))

    def runner_kwargs(self, deps: ChatDeps, book: Writes, turn: Turn) -> dict[str, Any]:
        """No blind resend into a conversation another request holds (``conversation_locked``).

        The Agents SDK resends a request refused with ``conversation_locked`` as it is, up to
        three times; but the request holding the lock then appends its items, so the resend
        would land on a server conversation that no longer holds exactly this branch (with,
        say, another worker's unanswered tool call in it). The attempt fails instead with
        :class:`~agents_state_ext.ConversationLockedError`, its conversation is checked before
        reuse, and the next attempt forks when it diverged. Only when the agent and the run
        config set no ``ModelSettings.retry`` of their own, and the SDK has them (0.24+).
        """
        kwargs = super().runner_kwargs(deps, book, turn)
        config = kwargs.get("run_config") or RunConfig()
        agent = turn.agent
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

    def sent(self, turn: Turn) -> list[str] | None:
        record = turn.record
        if record.reseeded_from is not None:
            return list(record.included)
        seeded = turn.node.meta.get("seeded")
        if isinstance(seeded, list):  # a newly forked server conversation: seeded, then sent
            return [i for i in record.included if i not in set(seeded)]
        return None

    def moved(self, recorded: str | None, expected: str | None) -> bool:
        """The server conversation the attempt continued holds more than the branch now."""
        return recorded not in (None, expected)

    def completed(
        self, book: Writes, turn: Turn, state: ConversationState, response_id: str | None
    ) -> str | None:
        """The conversation the attempt completed on: its node is that conversation's tip."""
        tracker = state.tracker
        if tracker is None:
            return None
        server = str(tracker.conversation_id)
        book.servers.completed(server, turn.id, tracker.last_item_id)
        book.touched.add(server)
        return tracker.conversation_id

    def interrupted(self, book: Writes, node: Node) -> None:
        """The server may hold part of the attempt: its conversation is checked before reuse."""
        server = node.meta.get("server_conversation")
        if isinstance(server, str):
            book.servers.interrupted(server)
            book.touched.add(server)


_RETRY_SETTINGS: Any = getattr(agents, "ModelRetrySettings", None)
_NO_RETRY: Any = _RETRY_SETTINGS(max_retries=0) if _RETRY_SETTINGS is not None else None
"""``ModelSettings.retry`` that turns the SDK's resend of ``conversation_locked`` off."""
