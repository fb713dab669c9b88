"""The attempt of a chat that waits for tool approval: park it, decide, resume, or drop it.

A run that stops on tool calls made with ``needs_approval=True`` leaves its attempt
``awaiting_approval``: the run (a ``ConversationState.dumps`` envelope) is put in the store
beside the attempt, the calls in the node's ``meta["approvals"]`` and in its record. Any
handle reads and decides them; the handle that resumes loads the run, applies the decisions
and runs it on as the same attempt. At most one attempt of a chat waits at a time, and the
chat starts no other attempt meanwhile.

Which attempt waits is known in memory (so ``send`` refuses at once); what the store says —
decisions another handle took, its stored run — is read by the coroutines here, and by a
resumed attempt's task when it starts (:func:`begin`). The functions here take the handle's
dependencies and its book of writes (which holds the waiting attempt's id, ``book.paused``).
"""

from __future__ import annotations

from typing import Any

from agents.result import RunResultBase

from .._attempts import AttemptRecord
from .._nodes import Node
from .._state import ConversationState
from .._status import IN_FLIGHT as _IN_FLIGHT
from ..errors import ApprovalPendingError, InvalidTransitionError
from .approvals import (
    Decision,
    PendingApproval,
    apply_decisions,
    approvals_from_interruptions,
    decide,
    read_approvals,
    undecided,
)
from .deps import ChatDeps, Turn
from .plan import Plan
from .records import response_id
from .writes import Writes

__all__ = [
    "begin",
    "decide_call",
    "drop",
    "fresh",
    "interruptions",
    "load",
    "output_items",
    "park",
    "refuse",
    "resume_turn",
    "waiting",
]

_ELSEWHERE = (
    "was paused by a run an app started with Runner through chat.session(); its RunState is "
    "the app's: decide on it and resume that run with Runner, or stop it with chat.stop()"
)


def interruptions(result: RunResultBase) -> list[Any]:
    """The tool calls a run stopped on for approval (``RunResult`` and streamed alike)."""
    return list(getattr(result, "interruptions", None) or [])


def output_items(result: RunResultBase) -> list[dict[str, Any]]:
    """The run's items as input items; an approval request is the SDK's marker, not an item."""
    return [
        dict(item.to_input_item()) for item in result.new_items if item.type != "tool_approval_item"
    ]


async def fresh(deps: ChatDeps, book: Writes) -> Node | None:
    """The attempt ``awaiting_approval`` as the store holds it now."""
    if book.running is None:
        await _reload_if_stale(deps, book)
    return book.paused_node()


async def _reload_if_stale(deps: ChatDeps, book: Writes) -> None:
    if await deps.store.get_head(deps.id) != book.head:
        await book.reload()
    elif book.paused is not None and book.paused in book.graph:
        stored = await deps.store.get_node(deps.id, book.paused)
        if stored.to_dict() != book.graph.get(book.paused).to_dict():
            await book.reload()  # another handle decided on its calls


def refuse(book: Writes, action: str) -> None:
    """``ApprovalPendingError`` when an attempt waits: the chat takes no other meanwhile."""
    node = book.paused_node()
    if node is None:
        return
    pending = read_approvals(node)
    waiting = undecided(pending) or [a.call_id for a in pending]
    raise ApprovalPendingError(
        f"cannot {action}: attempt {node.id} awaits approval of tool calls "
        f"{', '.join(waiting)}; approve or reject them and resume(), or stop() it",
        waiting,
    )


async def waiting(deps: ChatDeps, book: Writes) -> tuple[Node, AttemptRecord] | None:
    """The waiting attempt's node and record, as the store holds them."""
    node = await fresh(deps, book)
    if node is None or node.attempt_id is None:
        return None
    return node, await deps.store.get_attempt(deps.id, node.attempt_id)


# -- a run stops; decisions; the run goes on -------------------------------------------------


async def park(
    deps: ChatDeps, book: Writes, turn: Turn, result: RunResultBase, state: ConversationState
) -> None:
    """Park the attempt: its run waits in the store for decisions on its tool calls."""
    pending = [a.to_dict() for a in approvals_from_interruptions(interruptions(result))]
    tracker = state.tracker
    ended_on = response_id(result, state)
    # The run first, so a crash right after it leaves a pause that can be resumed.
    await deps.store.put_run_state(deps.id, turn.attempt_id, state.dumps(result))
    if turn.node.status in _IN_FLIGHT:
        meta = {"approvals": pending, "response_id": ended_on}
        book.graph.pause(turn.id, items=output_items(result), meta=meta)
    record = turn.record
    record.approvals, record.response_id = pending, ended_on
    if tracker is not None:
        record.cursor_after = tracker.previous_response_id or tracker.conversation_id
    await book.end(turn, book.ended(turn, "awaiting_approval"))
    if turn.node.status == "awaiting_approval":
        book.paused = turn.id
    else:  # another handle's edit invalidated it meanwhile: it can never resume
        await deps.store.delete_run_state(deps.id, turn.attempt_id)


async def decide_call(
    deps: ChatDeps,
    book: Writes,
    call_id: str | None,
    decision: Decision,
    *,
    message: str | None = None,
    always: bool = False,
) -> list[PendingApproval]:
    """Store ``decision`` on a waiting call (``None``: on every undecided one)."""
    node = await _waiting(deps, book)
    approvals = decide(read_approvals(node), call_id, decision, message=message, always=always)
    record = await deps.store.get_attempt(deps.id, str(node.attempt_id))
    entries = [a.to_dict() for a in approvals]
    book.graph.annotate(node.id, {"approvals": entries})
    record.approvals = entries
    await book.commit([record])
    return approvals


def resume_turn(deps: ChatDeps, book: Writes, agent: Any, *, stream: bool) -> Turn:
    """The turn that runs the waiting attempt on, once every call is decided (as last read).

    The attempt's task re-reads the store, then stores its start (:func:`begin`).
    """
    node = book.paused_node()
    if node is None:
        raise InvalidTransitionError(f"nothing in chat {deps.id} awaits approval")
    _check_decided(read_approvals(node))
    assert agent is not None  # check_idle() saw it
    record = AttemptRecord(message_id=node.id, attempt_id=str(node.attempt_id))
    plan = Plan(nodes=[], input=[], tokens={}, used=0, budget=book.budget, overflow=False)
    return Turn(node, plan, record, agent=agent, stream=stream, resumed=True)


async def begin(deps: ChatDeps, book: Writes, turn: Turn) -> None:
    """The start of a resumed attempt: check the store still lets it run, and store it."""
    await _reload_if_stale(deps, book)
    node = book.paused_node()
    if node is None or node.id != turn.id:
        raise InvalidTransitionError(
            f"attempt {turn.id} no longer awaits approval (another handle resumed or stopped it)"
        )
    approvals = read_approvals(node)
    _check_decided(approvals)
    record = await deps.store.get_attempt(deps.id, str(node.attempt_id))
    blob = await deps.store.get_run_state(deps.id, record.attempt_id)
    if blob is None:
        raise InvalidTransitionError(f"attempt {node.id} {_ELSEWHERE}")
    turn.plan = deps.strategy.plan(deps, book, str(node.parent_id), book.budget)
    entries = [a.to_dict() for a in approvals]
    turn.node = book.graph.resume(node.id, meta={"approvals": entries})
    book.paused = None
    record.approvals = entries
    turn.record, turn.paused_run = record, blob
    await book.write(record, "queued")
    turn.stored = True


async def load(
    deps: ChatDeps, book: Writes, turn: Turn, blob: str
) -> tuple[ConversationState, Any]:
    """The state and the ``RunState`` of a resumed attempt, with the decisions applied."""
    state, run_state = await deps.strategy.resumed(deps, book, turn, blob)
    apply_decisions(run_state, read_approvals(turn.node))
    return state, run_state


async def drop(deps: ChatDeps, book: Writes) -> tuple[Node, AttemptRecord] | None:
    """Cancel the waiting attempt, if any: its run is dropped, its tools never run."""
    node = await fresh(deps, book)
    if node is None:
        return None
    record = await deps.store.get_attempt(deps.id, str(node.attempt_id))
    deps.strategy.interrupted(book, node)
    await book.save_servers()
    node = book.graph.stop(node.id)
    book.paused = None
    record.cursor_after = record.cursor_before
    await book.write(record, "cancelled")
    await deps.store.delete_run_state(deps.id, record.attempt_id)
    return book.graph.get(node.id), record


async def _waiting(deps: ChatDeps, book: Writes) -> Node:
    """The waiting attempt, which the chat itself ran (so its run is in the store)."""
    node = await fresh(deps, book)
    if node is None:
        raise InvalidTransitionError(f"nothing in chat {deps.id} awaits approval")
    if await deps.store.get_run_state(deps.id, str(node.attempt_id)) is None:
        raise InvalidTransitionError(f"attempt {node.id} {_ELSEWHERE}")
    return node


def _check_decided(approvals: list[PendingApproval]) -> None:
    waiting = undecided(approvals)
    if waiting:
        raise ApprovalPendingError(
            f"cannot resume: tool calls {', '.join(waiting)} wait for a decision "
            "(approve or reject them)",
            waiting,
        )
