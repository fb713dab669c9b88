"""``ConversationState.dumps`` / ``loads``: a run and its ledger in one envelope, and back."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from agents import Agent, RunState

from . import _compat
from ._envelope import LEDGER_FORMAT, open_envelope, seal_envelope
from ._request import PartialOutput
from .errors import MixedStateOwnerError, StateBlobError
from .owners import owner_class

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from .owners import Owner

__all__ = ["dump_ledger", "dump_state", "load_ledger", "load_state", "run_state_json"]


def run_state_json(
    run_state: RunState[Any], *, repair_turns: bool = True, **to_json: Any
) -> dict[str, Any]:
    """The RunState's JSON, with the SDK's turn count repaired when ``repair_turns``.

    After a cancel the SDK counts a turn whose model call never returned, and a server
    strategy's ledger answers the resumed run's call again: a resumed run would then have one
    turn fewer than it should. There a run's turns are its model responses; under replay and
    session the library steps back over nothing, so the count stays the SDK's.
    """
    data = run_state.to_json(include_tracing_api_key=False, **to_json)
    responses = data.get("model_responses")
    turn = data.get("current_turn")
    if (
        repair_turns
        and isinstance(responses, list)
        and isinstance(turn, int)
        and turn > len(responses)
    ):
        data["current_turn"] = len(responses)
    return data


def dump_state(
    owner: Owner,
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
    lifecycle = owner.lifecycle
    run_json = run_state_json(run_state, repair_turns=lifecycle is not None, **extra)
    if lifecycle is not None:
        # Tool outputs the run produced but never sent travel with the ledger.
        lifecycle.harvest(result_or_run_state if run_state is not result_or_run_state else run_json)
    partial = lifecycle.partial if lifecycle is not None else None
    payload = {
        "strategy": owner.strategy,
        "tracker": lifecycle.snapshot() if lifecycle is not None else None,
        "partial": dataclasses.asdict(partial) if partial is not None else None,
        "run_state": run_json,
    }
    return seal_envelope(payload, key=key)


async def load_state(
    agent: Agent[Any],
    blob: str | bytes,
    *,
    key: bytes | str | None = None,
    session: Any = None,
    client: AsyncOpenAI | None = None,
    context_deserializer: Any = None,
) -> tuple[Owner, RunState[Any]]:
    """See :meth:`ConversationState.loads`: the restored owner and its RunState."""
    payload = open_envelope(blob, key=key)
    strategy = payload["strategy"]
    owner_type = owner_class(strategy)
    if owner_type is None:
        raise StateBlobError(f"the state blob names an unknown strategy {strategy!r}")
    state = owner_type.restore(payload.get("tracker"), session=session, client=client)
    _restore_partial(state, payload.get("partial"))
    lifecycle = state.lifecycle
    run_json = payload["run_state"]
    extra = {"context_deserializer": context_deserializer} if context_deserializer else {}
    try:
        # The RunState holds the app's agents, as after a run (its approvals are owned by them);
        # a run resuming it goes through bound copies (see _run_prep.resume_on_copies).
        run_state = await RunState.from_json(agent, run_json, **extra)
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


def dump_ledger(owner: Owner, *, key: bytes | str | None = None) -> str:
    """See :meth:`ConversationState.dumps_ledger`."""
    lifecycle = owner.lifecycle
    if lifecycle is None:
        raise ValueError(
            f"a {owner.strategy} conversation keeps no ledger: only the previous_response and "
            "conversation strategies have one to store"
        )
    partial = lifecycle.partial
    payload = {
        "strategy": owner.strategy,
        "tracker": lifecycle.snapshot(),
        "partial": dataclasses.asdict(partial) if partial is not None else None,
    }
    return seal_envelope(payload, key=key, format=LEDGER_FORMAT)


def load_ledger(
    blob: str | bytes,
    *,
    key: bytes | str | None = None,
    client: AsyncOpenAI | None = None,
) -> Owner:
    """See :meth:`ConversationState.loads_ledger`: the restored server owner."""
    payload = open_envelope(blob, key=key, format=LEDGER_FORMAT)
    strategy = payload["strategy"]
    tracker_data = payload.get("tracker")
    owner_type = owner_class(strategy)
    if owner_type is None or not owner_type.server_managed or not isinstance(tracker_data, dict):
        raise StateBlobError(
            f"a ledger blob needs a server strategy and its tracker, got {strategy!r}"
        )
    owner = owner_type.restore(tracker_data, client=client)
    _restore_partial(owner, payload.get("partial"))
    return owner


def _restore_partial(state: Owner, partial: Any) -> None:
    lifecycle = state.lifecycle
    if isinstance(partial, dict) and lifecycle is not None:
        try:
            lifecycle.partial = PartialOutput(**partial)
        except TypeError as exc:
            raise StateBlobError(f"malformed partial output in the state blob: {exc}") from exc
