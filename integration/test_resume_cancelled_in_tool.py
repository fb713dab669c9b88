"""A RunState taken from a run cancelled while one of its tools ran resumes (issue 29).

The SDK alone refuses such a resume (``ModelBehaviorError: A tool call already executed, but
its output was not committed``). ``state.run(agent, run_state)`` closes the call as
interrupted, reported as a repair, and the run goes on; resumed streamed and not, under both
server strategies, in one process and through ``dumps`` / ``loads``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, function_tool

from agents_state_ext import INTERRUPTED_TOOL_OUTPUT, ConversationState, InterruptedToolCallWarning
from agents_state_ext.testing import MockResponsesAPI, Reply

from ._server_state import SERVER, no_400, state_for
from ._support import STREAMED, run_turn

pytestmark = pytest.mark.anyio


@SERVER
@STREAMED
@pytest.mark.parametrize("restore", ["in-process", "loads"])
async def test_a_run_cancelled_inside_a_tool_resumes_with_the_call_closed_as_interrupted(
    mock: MockResponsesAPI, strategy: str, streamed: bool, restore: str
) -> None:
    started = asyncio.Event()

    @function_tool
    async def slow(city: str) -> str:
        """A slow lookup."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    agent = Agent(name="a", model=mock.model(), tools=[slow])
    state = state_for(mock, strategy)
    mock.enqueue(Reply.tool_call("slow", {"city": "Oslo"}, call_id="call_s"), Reply.text("after"))
    result = state.run_streamed(agent, "look it up")

    async def consume() -> None:
        async for _ in result.stream_events():
            pass

    consumer = asyncio.ensure_future(consume())
    await started.wait()
    result.cancel()
    await consumer
    run_state: Any = result.to_state()
    if restore == "loads":
        state, run_state = await ConversationState.loads(agent, state.dumps(result))

    with pytest.warns(InterruptedToolCallWarning):
        resumed = await run_turn(state, agent, run_state, streamed=streamed)

    assert resumed.final_output == "after"
    assert [r.call_id for r in state.repairs] == ["call_s"]
    closing = mock.response_requests[-1]["input"]
    assert closing == [
        {"type": "function_call_output", "call_id": "call_s", "output": INTERRUPTED_TOOL_OUTPUT}
    ]
    no_400(mock)
