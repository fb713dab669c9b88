"""The answering step of a turn: run the agent under the attempt's state, streamed or not.

:func:`answer` builds the attempt's ``ConversationState`` (the strategy's), runs it, and once
more on a new chain when the server lost the cursor (``previous_response``); a resumed
attempt runs on from its stored run instead. Every model the run uses reports its requests to
the turn's tap, which fills the record (:func:`~.records.note_requests`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

from agents.result import RunResultBase, RunResultStreaming
from agents.tracing import Trace, custom_span
from openai.types.responses import ResponseCreatedEvent, ResponseTextDeltaEvent

from .._binding import recorded
from .._state import ConversationState
from .._tracing import RESEED_SPAN, attempt_trace
from .deps import ChatDeps, Turn
from .events import Events
from .parking import load
from .records import define_context, note_requests, response_id
from .writes import Writes

__all__ = ["answer", "cancel_call", "settle_cancel", "trace_for"]


def trace_for(deps: ChatDeps, turn: Turn) -> Trace | None:
    """The trace the attempt runs in (``None``: the app's own, or none); names it.

    Grouped by the chat's id, with the message and attempt ids and the strategy in its
    metadata; a resumed attempt goes on in the trace its record names.
    """
    metadata = {
        "message_id": turn.id,
        "user_message_id": turn.user_id,
        "attempt_id": turn.attempt_id,
        "strategy": deps.strategy.name,
    }
    made, trace_id = attempt_trace(
        deps.runner_kwargs.get("run_config"),
        group_id=deps.id,
        metadata=metadata,
        trace_id=turn.record.trace_id,
    )
    turn.record.trace_id = trace_id
    return made


async def answer(
    deps: ChatDeps, book: Writes, turn: Turn, events: Events
) -> tuple[RunResultBase, ConversationState]:
    """Run the attempt, and once more on a new chain if the server lost its cursor."""
    if turn.paused_run is not None:
        state, run_state = await load(deps, book, turn, turn.paused_run)
        made = trace_for(deps, turn)
        with made if made is not None else contextlib.nullcontext():
            return await _call_model(deps, book, turn, events, state, run_state), state
    strategy = deps.strategy
    state, input = await strategy.state(deps, book, turn)
    await define_context(deps, book, turn)
    try:
        return await _call_model(deps, book, turn, events, state, input), state
    except Exception as exc:
        lost = strategy.lost_cursor(turn, exc)
        if lost is None:
            raise
    if turn.stopping:  # stopped while the lost request was failing: send nothing more
        raise asyncio.CancelledError
    data: dict[str, Any] = {
        "old_cursor": lost,
        "new_cursor": None,
        "message_id": turn.id,
        "attempt_id": turn.attempt_id,
    }
    with custom_span(RESEED_SPAN, data=data):
        await strategy.reseed(deps, book, turn, lost)
        data["seeded"] = list(turn.record.included)
        state, input = await strategy.state(deps, book, turn)
        await define_context(deps, book, turn)
        result = await _call_model(deps, book, turn, events, state, input)
        data["new_cursor"] = response_id(result, state)
    return result, state


async def _call_model(
    deps: ChatDeps, book: Writes, turn: Turn, events: Events, state: ConversationState, input: Any
) -> RunResultBase:
    if turn.stopping:  # stopped before its request went out: send nothing
        raise asyncio.CancelledError
    turn.tap.reset()  # the record describes the request of this try
    turn.call = asyncio.get_running_loop().create_task(_run(deps, book, turn, events, state, input))
    try:
        return await turn.call
    finally:
        _note_requests(turn)


def _note_requests(turn: Turn) -> None:
    """Put what the requests carried into the record (idempotent; before each write).

    A resumed attempt keeps what its first run sent: its continuation carries tool results.
    """
    if turn.resumed and turn.record.request_digest is not None:
        return
    turn.parts.update(note_requests(turn.record, turn.tap))


def cancel_call(turn: Turn) -> None:
    """Cancel the attempt's run, streamed or not."""
    if isinstance(turn.result, RunResultStreaming) and not turn.result.is_complete:
        turn.result.cancel()
    if turn.call is not None:
        turn.call.cancel()


async def settle_cancel(turn: Turn) -> None:
    """Cancel the run and wait until it has unwound; note what its requests carried."""
    cancel_call(turn)
    result = turn.result
    if isinstance(result, RunResultStreaming) and result.run_loop_task is not None:
        # Let the SDK run loop unwind, so the ledger has rewound before we record.
        await asyncio.wait([result.run_loop_task])
    if turn.call is not None and not turn.call.done():
        await asyncio.wait([turn.call])
    _note_requests(turn)


def _announced(turn: Turn) -> set[Any]:
    # A resumed run's result holds the calls it waited on: they were announced before.
    return {a.get("call_id") for a in turn.record.approvals} if turn.resumed else set()


async def _run(
    deps: ChatDeps, book: Writes, turn: Turn, events: Events, state: ConversationState, input: Any
) -> RunResultBase:
    kwargs = deps.strategy.runner_kwargs(deps, book, turn)
    guard, lifecycle = book.guard, state.lifecycle
    if guard is not None and lifecycle is not None:
        # A server strategy's request advances the server's state: it goes out only while
        # the guard (a worker's lease) allows; a refusal withdraws it unsent.
        lifecycle.checkpoint_hook = guard.before_request
    agent = turn.agent
    assert agent is not None  # the chat checked it before starting the attempt
    agent, kwargs = recorded(agent, _pinned(kwargs, turn.run_overrides), turn.tap)
    if not turn.stream:
        result: RunResultBase = await state.run(agent, input, **kwargs)
        turn.result = result
        events.items(result.new_items, _announced(turn))
        return result
    streamed = state.run_streamed(agent, input, **kwargs)
    turn.result = streamed
    async for event in streamed.stream_events():
        if event.type == "run_item_stream_event":
            events.items([event.item], _announced(turn))
            continue
        if event.type != "raw_response_event":
            continue
        data = event.data
        if isinstance(data, ResponseCreatedEvent):
            turn.created_id = data.response.id
        elif isinstance(data, ResponseTextDeltaEvent) and data.delta:
            before = turn.node.status
            book.graph.stream(turn.node.id, data.delta)
            if turn.node.status != before:
                events.emit("status", status=turn.node.status)
            events.delta(data.delta)
    if turn.stopping:
        raise asyncio.CancelledError
    return streamed


def _pinned(kwargs: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """A replay's run kwargs: the recorded model and settings win over the run config's."""
    if not overrides or not overrides.get("pinned"):
        return kwargs
    config = kwargs.get("run_config")
    if config is None:
        return kwargs
    model = overrides.get("model")
    pinned = dataclasses.replace(
        config, model=model if model is not None else config.model, model_settings=None
    )
    return {**kwargs, "run_config": pinned}
