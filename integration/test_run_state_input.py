"""Input staged on a paused RunState is sent exactly once, across a failed request (issue 29).

A run pauses (for an approval, or after a tool step), the app stages a late user message on
the RunState (``RunState.add_input``), the next request fails, the app goes on in the same
process or checkpoints with ``state.dumps()`` and resumes from ``ConversationState.loads()``.
The SDK keeps the staged input pending on the RunState until a request carrying it succeeds;
the ledger holds its own copy of the failed request's input. Only one of them may go out: the
server must see every user message exactly once, every tool output once, as the SDK alone does.

The neighbours of that case are the other things pending beside the late message: the
approved tool's output, a rejection, a tool output the paused run already produced, a pending
handoff, and a tool step's output after ``cancel(mode="after_turn")``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest
from agents import RunState, SQLiteSession
from agents.exceptions import ModelBehaviorError
from openai import APIConnectionError, APIStatusError

from agents_state_ext import ConversationState
from agents_state_ext.testing import Fault, MockResponsesAPI, describe_items

from ._interrupt import Probe
from ._scripts import Script, answer, build_agent
from ._soundness import transcript_problems
from ._support import STREAMED, run_turn

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not hasattr(RunState, "add_input"), reason="RunState.add_input is new in openai-agents 0.24"
    ),
]

DELETE = ("delete_file", {"path": "/tmp/{tag}"})


@dataclass(frozen=True)
class Pause:
    """How the scripted run pauses, and what is pending beside the late message."""

    script: Script
    decision: str = "approve"
    """What the app decides on each approval: ``approve`` or ``reject``."""
    after_turn: bool = False
    """No approval: a streamed run cancelled with ``mode="after_turn"`` after its tool step."""


PAUSES = {
    # The approved tool's output goes with the late message.
    "approved": Pause(Script("approval", calls=(DELETE,), pauses=True)),
    "rejected": Pause(Script("approval", calls=(DELETE,), pauses=True), decision="reject"),
    # A tool that needs no approval ran before the pause: its output is pending too.
    "tool_output": Pause(
        Script("parallel", calls=(("lookup", {"city": "Oslo"}), DELETE), pauses=True)
    ),
    # The response that paused also hands off: the specialist answers the late message.
    "handoff": Pause(
        Script("handoff", calls=(DELETE, ("transfer_to_specialist", {})), pauses=True, handoff=True)
    ),
    "tool_step": Pause(Script("tool", calls=(("lookup", {"city": "Paris"}),)), after_turn=True),
}

FAULTS = {
    "status_500": lambda streamed: Fault.status(500),
    "dropped": lambda streamed: Fault.drop_mid_stream(1),
    # In a stream the terminal event is response.failed; a plain request gets the failed body.
    "response_failed": lambda streamed: Fault.response_failed(1, body=not streamed),
}

MODELS = {"gpt-4.1": False, "gpt-5": True}
"""Each model, and whether its answers come as a reasoning model's (a reasoning item first)."""


@pytest.fixture(autouse=True)
def quiet_sdk(caplog: pytest.LogCaptureFixture) -> None:
    """The SDK logs every failed request with its traceback: expected here."""
    caplog.set_level(logging.CRITICAL, logger="openai.agents")


def state_for(strategy: str, mock: MockResponsesAPI, session: SQLiteSession) -> ConversationState:
    """A fresh state of ``strategy`` (``session`` for the session strategy)."""
    if strategy == "previous_response":
        return ConversationState.previous_response()
    if strategy == "conversation":
        return ConversationState.conversation(mock.create_conversation())
    if strategy == "session":
        return ConversationState.session(session)
    return ConversationState.replay()


async def paused(
    state: ConversationState, agent: Any, pause: Pause, streamed: bool
) -> tuple[Any, RunState[Any]]:
    """Run ``x-1`` to its pause: the result and its RunState, the decision taken."""
    if pause.after_turn:
        result: Any = state.run_streamed(agent, "x-1")
        async for event in result.stream_events():
            if event.type == "raw_response_event" and event.data.type == "response.completed":
                result.cancel(mode="after_turn")
        run_state = result.to_state()
        return result, run_state
    result = await run_turn(state, agent, "x-1", streamed=streamed)
    assert result.interruptions, "the script should pause for approval"
    run_state = result.to_state()
    for item in result.interruptions:
        getattr(run_state, pause.decision)(item)
    return result, run_state


async def late_input_run(
    mock: MockResponsesAPI,
    *,
    strategy: str,
    pause: Pause,
    streamed: bool,
    fault: str,
    loads: bool,
    reasoning: bool,
) -> list[str]:
    """Pause, stage ``l-1``, fail the next request, go on (through a checkpoint if ``loads``),
    then a follow-up ``f-1``; the problems of the server-side transcript."""
    script = Script(
        pause.script.name,
        calls=pause.script.calls,
        pauses=pause.script.pauses,
        handoff=pause.script.handoff,
        reasoning=reasoning,
    )
    mock.responder = script.responder
    probe = Probe()
    agent = build_agent(mock, probe, [script])
    session = SQLiteSession("late")
    state = state_for(strategy, mock, session)
    _, run_state = await paused(state, agent, pause, streamed)
    run_state.add_input("l-1")
    mock.inject(FAULTS[fault](streamed))
    with pytest.raises((APIStatusError, APIConnectionError, ModelBehaviorError)):
        await run_turn(state, agent, run_state, streamed=streamed)
    if loads:
        blob = state.dumps(run_state)
        state, run_state = await ConversationState.loads(agent, blob, session=session)
    resumed = await run_turn(state, agent, run_state, streamed=streamed)
    assert not resumed.interruptions
    assert resumed.final_output == answer("l-1")
    # The RunState owns its staged input: the SDK's result holds it once, as the run's.
    history = [i for i in resumed.to_input_list() if isinstance(i, dict)]
    assert [i.get("content") for i in history if i.get("role") == "user"] == ["x-1", "l-1"]
    follow: Any = "f-1"
    if strategy == "replay":
        follow = [*resumed.to_input_list(), {"role": "user", "content": "f-1"}]
    final = await run_turn(state, agent, follow, streamed=streamed)
    assert final.final_output == answer("f-1")
    if strategy == "conversation":
        items = mock.conversation_items(state.tracker.conversation_id)  # type: ignore[union-attr,arg-type]
    else:
        items = mock.transcript(str(final.last_response_id))
    problems = transcript_problems(items, ["x-1", "l-1", "f-1"], mock.requests)
    return [str(p) for p in problems] + ([] if not problems else describe_items(items))


@pytest.mark.parametrize("loads", [False, True], ids=["same_process", "dumps_loads"])
@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("model", list(MODELS))
@STREAMED
@pytest.mark.parametrize("strategy", ["previous_response", "conversation"])
async def test_a_late_message_after_a_failed_request_is_sent_once(
    strategy: str, streamed: bool, model: str, fault: str, loads: bool
) -> None:
    async with MockResponsesAPI(model=model) as mock:
        problems = await late_input_run(
            mock,
            strategy=strategy,
            pause=PAUSES["approved"],
            streamed=streamed,
            fault=fault,
            loads=loads,
            reasoning=MODELS[model],
        )
    assert problems == []


@pytest.mark.parametrize("loads", [False, True], ids=["same_process", "dumps_loads"])
@STREAMED
@pytest.mark.parametrize("strategy", ["previous_response", "conversation"])
@pytest.mark.parametrize("pause", [p for p in PAUSES if p != "approved"])
async def test_what_is_pending_beside_the_late_message_is_sent_once(
    pause: str, strategy: str, streamed: bool, loads: bool
) -> None:
    async with MockResponsesAPI() as mock:
        problems = await late_input_run(
            mock,
            strategy=strategy,
            pause=PAUSES[pause],
            streamed=streamed,
            fault="status_500",
            loads=loads,
            reasoning=False,
        )
    assert problems == []


@pytest.mark.parametrize("loads", [False, True], ids=["same_process", "dumps_loads"])
@STREAMED
@pytest.mark.parametrize("strategy", ["replay", "session"])
async def test_without_a_ledger_the_sdk_alone_sends_the_late_message_once(
    strategy: str, streamed: bool, loads: bool
) -> None:
    async with MockResponsesAPI() as mock:
        problems = await late_input_run(
            mock,
            strategy=strategy,
            pause=PAUSES["approved"],
            streamed=streamed,
            fault="status_500",
            loads=loads,
            reasoning=False,
        )
    assert problems == []
