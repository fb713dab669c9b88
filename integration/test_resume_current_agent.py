"""A resumed run uses the app's agent as it is now, as the SDK alone does (issue 29 item 1).

The run pauses on an approval; the app then sets ``tool_use_behavior="stop_on_first_tool"``
and approves. The SDK alone runs the approved tool once and makes no further model call; so
must ``state.run(agent, run_state)`` under the session and both server strategies.

The app sees its own agents: ``result.last_agent`` is the app's agent (a handoff's target
included), and a paused RunState holds them, in one process and after a JSON round trip.
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, Runner, RunState, SQLiteSession, function_tool

from agents_state_ext import ConversationState
from agents_state_ext.testing import MockResponsesAPI, Reply

from ._support import STREAMED, wire

pytestmark = pytest.mark.anyio

STRATEGIES = pytest.mark.parametrize(
    "strategy", ["sdk", "session", "previous_response", "conversation"]
)


def _state(mock: MockResponsesAPI, strategy: str) -> ConversationState | None:
    if strategy == "session":
        return ConversationState.session(SQLiteSession(f"s-{id(mock)}"))
    if strategy == "previous_response":
        return ConversationState.previous_response()
    if strategy == "conversation":
        return ConversationState.conversation(mock.create_conversation())
    return None


async def _run(state: ConversationState | None, agent: Agent[Any], input: Any, streamed: bool):
    if not streamed:
        return await (Runner.run(agent, input) if state is None else state.run(agent, input))
    result = (
        Runner.run_streamed(agent, input) if state is None else state.run_streamed(agent, input)
    )
    async for _ in result.stream_events():
        pass
    return result


def _wipe_tool(ran: list[str]) -> Any:
    """A tool that needs approval and notes each path it wipes in ``ran``."""

    @function_tool(needs_approval=True)
    def wipe(path: str) -> str:
        """Wipe a path."""
        ran.append(path)
        return f"wiped {path}"

    return wipe


@STRATEGIES
@STREAMED
async def test_a_resumed_run_uses_what_was_set_on_the_agent_while_it_was_paused(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    ran: list[str] = []
    wipe = _wipe_tool(ran)

    agent = Agent(name="a", model=mock.model(), tools=[wipe])
    state = _state(mock, strategy)
    mock.enqueue(Reply.tool_call("wipe", {"path": "/tmp/x"}, call_id="call_w"))
    paused = await _run(state, agent, "wipe /tmp/x", streamed)
    run_state = paused.to_state()
    agent.tool_use_behavior = "stop_on_first_tool"
    run_state.approve(run_state.get_interruptions()[0])
    requests = len(mock.response_requests)

    result = await _run(state, agent, run_state, streamed)

    assert ran == ["/tmp/x"]
    assert result.final_output == "wiped /tmp/x"
    assert len(mock.response_requests) == requests  # the SDK's answer: no further model call


def _last_agent(result: Any) -> Any:
    return result.last_agent if hasattr(result, "last_agent") else result.current_agent


def _sent(mock: MockResponsesAPI, since: int) -> list[list[str]]:
    """The input items of each request since the ``since``-th (cursors vary by strategy)."""
    return [wire(body)[2] for body in mock.response_requests[since:]]


@STRATEGIES
@STREAMED
async def test_the_result_shows_the_apps_agent_and_its_handoff_target(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    billing = Agent(name="billing", model=mock.model())
    triage = Agent(name="triage", model=mock.model(), handoffs=[billing])
    state = _state(mock, strategy)
    mock.enqueue(Reply.text("hello"))
    first = await _run(state, triage, "hi", streamed)
    assert _last_agent(first) is triage
    mock.enqueue(Reply.tool_call("transfer_to_billing", {}, call_id="call_h"), Reply.text("b"))
    handed = await _run(state, triage, "bill me", streamed)
    assert _last_agent(handed) is billing
    assert handed.final_output == "b"
    paused = handed.to_state()
    assert _compat_free_agent(paused) == "billing"


def _compat_free_agent(run_state: RunState[Any]) -> str:
    """The name of the agent a RunState resumes with, read from its public JSON."""
    return str(run_state.to_json()["current_agent"]["name"])


@STRATEGIES
@STREAMED
@pytest.mark.parametrize("round_trip", ["same_process", "json", "dumps"])
async def test_a_resumed_run_shows_the_apps_agent(
    mock: MockResponsesAPI, strategy: str, streamed: bool, round_trip: str
) -> None:
    ran: list[str] = []
    wipe = _wipe_tool(ran)

    agent = Agent(name="a", model=mock.model(), tools=[wipe])
    state = _state(mock, strategy)
    mock.enqueue(Reply.tool_call("wipe", {"path": "/tmp/x"}, call_id="call_w"))
    paused = await _run(state, agent, "wipe /tmp/x", streamed)
    assert _last_agent(paused) is agent
    run_state = paused.to_state()
    if round_trip == "json":
        run_state = await RunState.from_json(agent, run_state.to_json())
    if round_trip == "dumps":
        if state is None:
            pytest.skip("the SDK alone has no ConversationState.dumps")
        session = getattr(state.owner, "session", None)
        state, run_state = await ConversationState.loads(
            agent, state.dumps(run_state), session=session
        )
        assert _compat_free_agent(run_state) == "a"
    run_state.approve(run_state.get_interruptions()[0])
    before = len(mock.response_requests)
    mock.enqueue(Reply.text("done"))

    result = await _run(state, agent, run_state, streamed)

    assert ran == ["/tmp/x"]
    assert result.final_output == "done"
    assert _last_agent(result) is agent
    # The approved call's output crossed the wire once, in the one request the resume made.
    sent = _sent(mock, before)
    assert len(sent) == 1
    assert sent[0].count("function_call_output:call_w") == 1
    # Paused again from the resumed result, the RunState resumes on the app's agent.
    mock.enqueue(Reply.text("again"))
    again = await _run(state, agent, result.to_state(), streamed)
    assert _last_agent(again) is agent


@STRATEGIES
@STREAMED
async def test_an_approval_made_before_a_restart_applies_to_the_rebuilt_agents(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    """After a restart the app builds its agents anew: one to load the blob, one to run it."""
    ran: list[str] = []
    wipe = _wipe_tool(ran)

    def build() -> Agent[Any]:
        return Agent(name="a", model=mock.model(), tools=[wipe])

    state = _state(mock, strategy)
    if state is None:
        pytest.skip("the SDK alone has no ConversationState.dumps")
    session = getattr(state.owner, "session", None)
    mock.enqueue(Reply.tool_call("wipe", {"path": "/tmp/x"}, call_id="call_w"))
    paused = await _run(state, build(), "wipe /tmp/x", streamed)
    run_state = paused.to_state()
    run_state.approve(paused.interruptions[0])
    blob = state.dumps(run_state)
    before = len(mock.response_requests)
    mock.enqueue(Reply.text("done"))

    state, loaded = await ConversationState.loads(build(), blob, session=session)
    result = await _run(state, build(), loaded, streamed)

    assert result.interruptions == []
    assert ran == ["/tmp/x"]
    assert result.final_output == "done"
    sent = _sent(mock, before)
    assert len(sent) == 1 and sent[0].count("function_call_output:call_w") == 1
