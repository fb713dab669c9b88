"""One turn of a chat, as plain functions: plan, store the start, answer, store the end.

The pipeline runs over the handle's :class:`~.deps.ChatDeps`, its book of writes
(:class:`~.writes.Writes`) and the attempt's :class:`~.deps.Turn`, and never sees the
``Conversation``. In order:

1. :func:`check_idle` and :func:`start` (synchronous, in ``send`` / ``retry`` / ``edit``): the
   strategy plans the request within the budget (a plan over it is refused, the graph as it
   was), the record is made and joins the write queue;
2. in the attempt's task, :func:`run_turn`: :func:`begin` stores the start (node and record,
   one commit) before anything is sent; :func:`~.request.answer` runs the model;
3. the end: :func:`complete` (or parks the attempt for tool approval, :mod:`.parking`),
   :func:`fail` or :func:`cancelled` store it; :func:`release` frees the handle.

:func:`run_turn` returns the :data:`~.deps.Outcome`: ``Completed``, ``Parked``, ``Failed`` or
``Cancelled``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from agents import Agent
from agents.result import RunResultBase

from .._graph import ConversationGraph
from .._nodes import Node
from .._state import ConversationState
from .._status import FINAL
from .._status import IN_FLIGHT as _IN_FLIGHT
from ..errors import ConcurrentUpdateError, InvalidTransitionError, StoreUnavailableError
from ..stores._token_counts import save_counts
from .deps import Cancelled, ChatDeps, Completed, Failed, Outcome, Parked, Turn
from .events import Events
from .parking import begin as begin_resumed
from .parking import interruptions, output_items, park, refuse
from .records import invalidations, reasoning, response_id, start_record, usage
from .request import answer, settle_cancel
from .writes import Writes

__all__ = [
    "begin",
    "cancelled",
    "check_idle",
    "complete",
    "fail",
    "release",
    "run_turn",
    "start",
    "withdraw",
]


def check_idle(
    deps: ChatDeps, book: Writes, agent: Agent[Any] | None, action: str, *, paused_ok: bool = False
) -> None:
    """Refuse ``action`` unless the chat can take a new attempt now (before any change)."""
    asyncio.get_running_loop()  # before any change: an attempt runs as a task of this loop
    if agent is None:
        raise ValueError(f"cannot {action}: this conversation was opened without an agent")
    running = book.running
    if running is not None:
        raise InvalidTransitionError(
            f"cannot {action}: attempt {running.id} is still running; stop it first"
        )
    session = deps.session
    assert session is not None  # every chat handle has its session
    session.settle()
    if session.running:
        raise InvalidTransitionError(
            f"cannot {action}: a run through chat.session() is still in flight"
        )
    if not paused_ok:
        refuse(book, action)


def start(
    deps: ChatDeps,
    book: Writes,
    node: Node,
    stream: bool,
    *,
    added: Sequence[Node] = (),
    leaf: str | None,
    agent: Agent[Any] | None,
    budget: int | bool | None = False,
) -> Turn:
    """Plan the new attempt ``node`` in memory and queue its record; its turn.

    A plan that cannot be sent (over the budget) is refused here, before anything is
    stored: ``node`` and the nodes the action ``added`` for it are withdrawn from the graph
    and ``leaf`` is active again, so the chat is as it was. ``budget`` (unless ``False``)
    plans within that budget instead of the chat's (a replay's recorded one).
    """
    within = book.budget
    if budget is not False:
        within = None if budget is None or budget is True else budget
    try:
        plan = deps.strategy.plan(deps, book, str(node.parent_id), within).ensure_sendable()
    except BaseException:
        withdraw(book.graph, [node, *reversed(added)], leaf)
        raise
    record = start_record(
        deps,
        book,
        node,
        {n.id: plan.tokens[n.id] for n in plan.nodes},
        overflow=plan.overflow,
        cursor_before=plan.cursor_before,
    )
    record.budget, record.used = plan.budget, plan.used
    record.reasoning = reasoning(plan)
    generation = book.hold(record)
    return Turn(node, plan, record, agent=agent, stream=stream, generation=generation)


def withdraw(graph: ConversationGraph, nodes: Sequence[Node], leaf: str | None) -> None:
    """Take ``nodes`` (newest first) back out of the graph, ``leaf`` active again."""
    last = len(nodes) - 1
    for i, node in enumerate(nodes):
        graph.withdraw(node.id, active_leaf=leaf if i == last else None)


async def run_turn(deps: ChatDeps, book: Writes, turn: Turn, events: Events) -> Outcome:
    """The attempt's task: store its start, answer, store its end; how it ended."""
    outcome: Outcome
    try:
        try:
            await begin(deps, book, turn)
        finally:
            turn.started.set()
        events.emit("status", status=turn.node.status)
        result, state = await answer(deps, book, turn, events)
        outcome = await complete(deps, book, turn, result, state)
    except asyncio.CancelledError:
        await settle_cancel(turn)
        await cancelled(deps, book, turn, turn.created_id)
        outcome = Cancelled(turn.created_id)
        if not turn.stopping:
            raise
    except Exception as exc:
        turn.error = exc
        await fail(deps, book, turn, exc)
        outcome = Failed(exc)
    finally:
        await release(deps, book, turn)
    return outcome


async def begin(deps: ChatDeps, book: Writes, turn: Turn) -> None:
    """Store the attempt's start (node and record, one commit) before anything is sent."""
    if turn.resumed:
        await begin_resumed(deps, book, turn)
        return
    try:
        # An edit's start reads the records it invalidates: a store failing there fails the
        # start as one failing in the commit does (the attempt never stays queued in memory).
        records = [turn.record, *await invalidations(deps, book.graph, turn, book.queued)]
        await book.commit(records, since=turn.generation)
    except ConcurrentUpdateError as exc:
        node = turn.node  # no longer in the graph, which was re-read
        node.status, node.meta["error"] = "failed", f"{type(exc).__name__}: {exc}"
        raise
    except Exception as exc:
        # The store failed and nothing of the start was stored; nothing was sent either.
        # The attempt ends failed in memory, and the handle's next commit stores it with
        # its user message, so the chat goes on (send the message again, or retry it).
        message = f"{type(exc).__name__}: {exc}"
        if turn.node.status in _IN_FLIGHT:
            book.graph.fail(turn.id, message)
        if turn.record.status in FINAL:
            book.hold(turn.record, keep=True)
        else:
            book.ended(turn, "failed", error=message)
        if isinstance(exc, StoreUnavailableError):  # cut in flight: it may be stored
            book.retry_ended()
        raise
    turn.stored = True


async def complete(
    deps: ChatDeps, book: Writes, turn: Turn, result: RunResultBase, state: ConversationState
) -> Completed | Parked:
    """Store the answer (or park the attempt when its run stopped for tool approval)."""
    if interruptions(result):
        await park(deps, book, turn, result, state)
        return Parked(result, state)
    items = output_items(result)
    ended_on, used = response_id(result, state), usage(result)
    if turn.node.status in _IN_FLIGHT:
        meta = {"response_id": ended_on, "usage": used}
        book.graph.complete(turn.id, items=items or None, meta=meta)
    record = turn.record
    record.response_id, record.usage = ended_on, used
    record.cursor_after = deps.strategy.completed(book, turn, state, ended_on)
    generation = book.ended(turn, "complete")
    await book.end(turn, generation)
    await save_counts(deps.store, deps.id, deps.counter, [*turn.plan.nodes, turn.node])
    return Completed(result, state)


async def fail(deps: ChatDeps, book: Writes, turn: Turn, error: BaseException) -> None:
    """Store the attempt as ``failed`` (unless nothing of it was stored, or its end was)."""
    if not turn.stored or turn.record.status in FINAL:
        return  # nothing of it was stored, or its end is stored already
    message = f"{type(error).__name__}: {error}"
    if turn.node.status in _IN_FLIGHT:
        book.graph.fail(turn.id, message)
    turn.record.cursor_after = turn.record.cursor_before
    generation = book.ended(turn, "failed", error=message)
    deps.strategy.interrupted(book, turn.node)
    await book.end(turn, generation)


async def cancelled(deps: ChatDeps, book: Writes, turn: Turn, response_id: str | None) -> None:
    """Store the attempt as ``cancelled``, with what it received so far."""
    if not turn.stored:
        return  # cancelled before its start was stored: nothing of it is in the store
    if turn.node.status in _IN_FLIGHT:
        book.graph.stop(turn.id)
    record = turn.record
    record.cursor_after, record.response_id = record.cursor_before, response_id
    generation = book.ended(turn, "cancelled")
    deps.strategy.interrupted(book, turn.node)
    await book.end(turn, generation)


async def release(deps: ChatDeps, book: Writes, turn: Turn) -> None:
    """Free the handle for the next attempt; drop a resumed attempt's stored run once used."""
    if book.running is turn:
        book.running = None
    book.bound = None
    if turn.resumed and turn.stored and turn.node.status != "awaiting_approval":
        await deps.store.delete_run_state(deps.id, turn.attempt_id)
