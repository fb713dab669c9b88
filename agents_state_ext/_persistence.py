"""``ConversationState.dumps`` / ``loads``: a run and its ledger in one envelope, and back."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from agents import Agent, RunState

from . import _compat
from ._envelope import LEDGER_FORMAT, open_envelope, seal_envelope
from ._run import PartialOutput
from ._tracker import ServerConversationTracker
from .errors import MixedStateOwnerError, StateBlobError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from ._state import ConversationState, ServerConversationState

__all__ = ["dump_ledger", "dump_state", "load_ledger", "load_state", "run_state_json"]

_STRATEGIES = ("replay", "session", "previous_response", "conversation")


def run_state_json(run_state: RunState[Any], **to_json: Any) -> dict[str, Any]:
    """The RunState's JSON with the SDK's turn count repaired.

    After a cancel the SDK counts a turn whose model call never returned; a resumed run would
    then have one turn fewer than it should. A run's turns are its model responses.
    """
    data = run_state.to_json(include_tracing_api_key=False, **to_json)
    responses = data.get("model_responses")
    turn = data.get("current_turn")
    if isinstance(responses, list) and isinstance(turn, int) and turn > len(responses):
        data["current_turn"] = len(responses)
    return data


def dump_state(
    state: ConversationState,
    result_or_run_state: Any,
    *,
    key: bytes | str | None = None,
    context_serializer: Any = None,
) -> str:
    """See :meth:`ConversationState.dumps`."""
    to_state = getattr(result_or_run_state, "to_state", None)
    run_state = to_state() if callable(to_state) else result_or_run_state
    if not isinstance(run_state, RunState):
        raise TypeError(
            f"dumps() takes a run result or a RunState, got {type(result_or_run_state).__name__}"
        )
    extra = {"context_serializer": context_serializer} if context_serializer else {}
    run_json = run_state_json(run_state, **extra)
    lifecycle = state.lifecycle
    if lifecycle is not None:
        # Tool outputs the run produced but never sent travel with the ledger.
        lifecycle.harvest(result_or_run_state if run_state is not result_or_run_state else run_json)
    partial = state.partial
    payload = {
        "strategy": state.strategy,
        "tracker": lifecycle.snapshot() if lifecycle is not None else None,
        "partial": dataclasses.asdict(partial) if partial is not None else None,
        "run_state": run_json,
    }
    return seal_envelope(payload, key=key)


async def load_state(
    cls: type[ConversationState],
    agent: Agent[Any],
    blob: str | bytes,
    *,
    key: bytes | str | None = None,
    session: Any = None,
    client: AsyncOpenAI | None = None,
    context_deserializer: Any = None,
) -> tuple[ConversationState, RunState[Any]]:
    """See :meth:`ConversationState.loads`."""
    payload = open_envelope(blob, key=key)
    strategy = payload["strategy"]
    if strategy not in _STRATEGIES:
        raise StateBlobError(f"the state blob names an unknown strategy {strategy!r}")
    tracker_data = payload.get("tracker")
    if strategy in ("previous_response", "conversation"):
        if not isinstance(tracker_data, dict):
            raise StateBlobError(f"the {strategy} strategy's blob has no tracker")
        tracker = ServerConversationTracker.from_dict(tracker_data)
        if tracker.strategy != strategy:
            raise StateBlobError("the blob's tracker does not match its strategy")
        state: ConversationState = cls.for_tracker(tracker, client=client)
    elif strategy == "session":
        if session is None:
            raise ValueError("this blob belongs to a session conversation: pass session=")
        state = cls("session", session=session)
    else:
        state = cls("replay")
    _restore_partial(state, payload.get("partial"))
    lifecycle = state.lifecycle
    run_json = payload["run_state"]
    bound = state.bind(agent)
    extra = {"context_deserializer": context_deserializer} if context_deserializer else {}
    try:
        run_state = await RunState.from_json(bound, run_json, **extra)
    except Exception as exc:  # the SDK raises many kinds (even RuntimeError) for a bad RunState
        raise StateBlobError(f"the blob's RunState cannot be restored: {exc}") from exc
    try:
        if lifecycle is not None:
            # The same alignment as a resume: step back over a response the run never processed.
            lifecycle.prepare_resume(run_state)
        _compat.repair_turn_count(run_state)
    except MixedStateOwnerError as exc:
        raise StateBlobError(f"the blob's RunState and ledger disagree: {exc}") from exc
    except _compat.SDKContractError as exc:
        # The SDK restored what the blob said without checking it; the blob is at fault.
        raise StateBlobError(
            f"the blob's RunState holds a value of the wrong shape: {exc}"
        ) from exc
    return state, run_state


def dump_ledger(state: ConversationState, *, key: bytes | str | None = None) -> str:
    """See :meth:`ConversationState.dumps_ledger`."""
    lifecycle = state.lifecycle
    if lifecycle is None:
        raise ValueError(
            f"a {state.strategy} conversation keeps no ledger: only the previous_response and "
            "conversation strategies have one to store"
        )
    partial = state.partial
    payload = {
        "strategy": state.strategy,
        "tracker": lifecycle.snapshot(),
        "partial": dataclasses.asdict(partial) if partial is not None else None,
    }
    return seal_envelope(payload, key=key, format=LEDGER_FORMAT)


def load_ledger(
    cls: type[ConversationState],
    blob: str | bytes,
    *,
    key: bytes | str | None = None,
    client: AsyncOpenAI | None = None,
) -> ServerConversationState:
    """See :meth:`ConversationState.loads_ledger`."""
    payload = open_envelope(blob, key=key, format=LEDGER_FORMAT)
    strategy = payload["strategy"]
    tracker_data = payload.get("tracker")
    if strategy not in ("previous_response", "conversation") or not isinstance(tracker_data, dict):
        raise StateBlobError(
            f"a ledger blob needs a server strategy and its tracker, got {strategy!r}"
        )
    tracker = ServerConversationTracker.from_dict(tracker_data)
    if tracker.strategy != strategy:
        raise StateBlobError("the blob's tracker does not match its strategy")
    state = cls.for_tracker(tracker, client=client)
    _restore_partial(state, payload.get("partial"))
    return state


def _restore_partial(state: ConversationState, partial: Any) -> None:
    lifecycle = state.lifecycle
    if isinstance(partial, dict) and lifecycle is not None:
        try:
            lifecycle.partial = PartialOutput(**partial)
        except TypeError as exc:
            raise StateBlobError(f"malformed partial output in the state blob: {exc}") from exc
