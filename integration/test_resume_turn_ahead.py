"""A RunState whose turn count is ahead of its responses resumes as the SDK says (issue 29 item 6).

An approval checkpoint of an agent with an output guardrail, restored with ``from_json`` from a
RunState schema before 1.17 (what SDK 0.21 writes: no record of where the current model
response's items begin). SDK 0.22 and later resume such a checkpoint only when the turn number
proves where that response starts, that is on turn one; a counter one ahead of the run's model
responses (the SDK counts a turn for a model call that never returned) makes them refuse it with
a ``UserError`` before any tool runs. ``state.run(agent, run_state)``, in one process and after
``dumps`` / ``loads``, must give the SDK's answer under every strategy, streamed and not: the same
outcome, the same tools run, the same request inputs on the wire as ``Runner`` given the same
RunState with the state's own ``runner_kwargs()``. The library once lowered the counter to the
responses under every strategy, and so ran the approved tool under replay and session.
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    RunState,
    SQLiteSession,
    UserError,
    __version__,
    function_tool,
    output_guardrail,
)

from agents_state_ext import ConversationState
from agents_state_ext.testing import MockResponsesAPI, Reply

from ._support import STREAMED, run_turn, runner_turn

pytestmark = pytest.mark.anyio

SERVER_STRATEGIES = ("previous_response", "conversation")
STRATEGIES = pytest.mark.parametrize("strategy", ["replay", "session", *SERVER_STRATEGIES])


@output_guardrail
def never_trips(context: Any, agent: Agent[Any], output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)


def _state(mock: MockResponsesAPI, strategy: str, session: SQLiteSession) -> ConversationState:
    if strategy == "session":
        return ConversationState.session(session)
    if strategy == "previous_response":
        return ConversationState.previous_response(prompt_cache_key="k")
    if strategy == "conversation":
        return ConversationState.conversation(mock.create_conversation())
    return ConversationState.replay()


async def _resume_ahead(strategy: str, streamed: bool, restore: str) -> dict[str, Any]:
    """Pause on an approval, set the counter one ahead, approve, resume; what happened."""
    ran: list[str] = []

    @function_tool(needs_approval=True)
    def wipe(path: str) -> str:
        """Wipe a path."""
        ran.append(path)
        return f"wiped {path}"

    async with MockResponsesAPI() as mock:
        session = SQLiteSession(f"s-{id(mock)}")
        state = _state(mock, strategy, session)
        plain = Agent(name="a", model=mock.model(), tools=[wipe])
        mock.enqueue(Reply.tool_call("wipe", {"path": "/tmp/x"}, call_id="call_w"))
        paused = await run_turn(state, plain, "wipe /tmp/x", streamed=streamed)
        data = paused.to_state().to_json()
        assert data["current_turn"] == len(data["model_responses"]) == 1
        data["current_turn"] = 2  # one ahead of the run's model responses
        # A schema before 1.17 records no current-response ownership: only the turn proves it.
        data["$schemaVersion"] = "1.16"  # what SDK 0.21 writes
        data.pop("current_response_generated_item_ownership", None)
        guarded = plain.clone(output_guardrails=[never_trips])
        run_state: Any = await RunState.from_json(guarded, data)
        run_state.approve(run_state.get_interruptions()[0])
        mock.enqueue(Reply.text("done"))
        requests = len(mock.response_requests)
        try:
            if restore == "loads":
                blob = state.dumps(run_state)
                given = session if strategy == "session" else None
                state, run_state = await ConversationState.loads(guarded, blob, session=given)
            if restore == "sdk":
                kwargs = state.runner_kwargs()
                bound = state.bind(guarded)
                result = await runner_turn(bound, run_state, streamed=streamed, **kwargs)
            else:
                result = await run_turn(state, guarded, run_state, streamed=streamed)
            outcome: Any = ("output", result.final_output)
        except UserError as exc:  # the SDK's refusal is the answer to compare
            # Under a server strategy the library refuses output guardrails first, and so does
            # the SDK (both before anything runs); elsewhere the refusal must be the SDK's own.
            outcome = ("refused", None if strategy in SERVER_STRATEGIES else str(exc))
        sent = [request["input"] for request in mock.response_requests[requests:]]
        return {"outcome": outcome, "ran": ran, "sent": sent}


@STRATEGIES
@STREAMED
@pytest.mark.parametrize("restore", ["in-process", "loads"])
async def test_a_checkpoint_whose_turn_is_ahead_resumes_as_the_sdk_says(
    strategy: str, streamed: bool, restore: str
) -> None:
    sdk = await _resume_ahead(strategy, streamed, "sdk")
    ours = await _resume_ahead(strategy, streamed, restore)

    refused = {"outcome": ("refused", None), "ran": [], "sent": []}
    if tuple(int(part) for part in __version__.split(".")[:2]) < (0, 22):
        # 0.21 has neither check and runs the tool; a server strategy refuses output
        # guardrails up front (rejected output cannot leave the server's history).
        if strategy in SERVER_STRATEGIES:
            assert ours == refused
        else:
            assert ours == sdk and ours["ran"] == ["/tmp/x"]
        return
    # The SDK refuses it before the tool runs: so must the library, whatever it refuses with.
    assert sdk["outcome"][0] == "refused" and sdk["ran"] == [] and sdk["sent"] == []
    assert ours == sdk
