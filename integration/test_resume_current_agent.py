"""A resumed run uses the app's agent as it is now, as the SDK alone does (issue 29 item 1).

The run pauses on an approval; the app then sets ``tool_use_behavior="stop_on_first_tool"``
and approves. The SDK alone runs the approved tool once and makes no further model call; so
must ``state.run(agent, run_state)`` under the session and both server strategies.
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool

from agents_state_ext import ConversationState
from agents_state_ext.testing import MockResponsesAPI, Reply

from ._support import STREAMED

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


@STRATEGIES
@STREAMED
async def test_a_resumed_run_uses_what_was_set_on_the_agent_while_it_was_paused(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    ran: list[str] = []

    @function_tool(needs_approval=True)
    def wipe(path: str) -> str:
        """Wipe a path."""
        ran.append(path)
        return f"wiped {path}"

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
