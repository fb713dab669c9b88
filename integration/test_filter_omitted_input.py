"""Input a ``call_model_input_filter`` leaves out of one request stays pending (issue 29).

The SDK's own tracker marks exactly the filter's returned list as sent: what it left out goes
with the next request of the run. Under the library the same must hold (a rewritten copy of an
item counts as that item, so it is not sent again; a left-out item is not "sent").
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, RunConfig, function_tool
from agents.run_config import CallModelData, ModelInputData

from agents_state_ext import ConversationState
from agents_state_ext.testing import MockResponsesAPI, Reply

from ._support import STREAMED, run_turn

pytestmark = pytest.mark.anyio


@function_tool
def weather(city: str) -> str:
    return "sunny"


def _kinds(body: dict[str, Any]) -> list[str]:
    items = body["input"] if isinstance(body["input"], list) else [{"role": "user"}]
    return [str(i.get("role") or i.get("type")) for i in items]


@STREAMED
@pytest.mark.parametrize("kind", ["previous_response", "conversation"])
async def test_a_user_message_the_filter_left_out_goes_with_the_next_request(
    mock: MockResponsesAPI, streamed: bool, kind: str
) -> None:
    calls = 0

    async def leave_out_user_once(data: CallModelData[Any]) -> ModelInputData:
        nonlocal calls
        calls += 1
        items = list(data.model_data.input)
        if calls == 1:
            items = [i for i in items if not (isinstance(i, dict) and i.get("role") == "user")]
        return ModelInputData(input=items, instructions=data.model_data.instructions)

    state = (
        ConversationState.previous_response()
        if kind == "previous_response"
        else ConversationState.conversation(mock.create_conversation())
    )
    agent = Agent(name="a", model=mock.model("gpt-4.1"), tools=[weather])
    mock.enqueue(Reply.tool_call("weather", {"city": "Paris"}), Reply.text("done"))
    config = RunConfig(call_model_input_filter=leave_out_user_once)
    result = await run_turn(state, agent, "hello", streamed=streamed, run_config=config)
    assert result.final_output == "done"
    bodies = mock.response_requests
    assert [_kinds(b) for b in bodies] == [[], ["user", "function_call_output"]]
    # The user message reached the server exactly once.
    said = [i for i in mock.transcript(mock.response_ids[-1]) if i.get("role") == "user"]
    assert len(said) == 1


@STREAMED
async def test_a_rewritten_copy_counts_as_its_item_and_is_not_sent_again(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    async def shout(data: CallModelData[Any]) -> ModelInputData:
        items = [
            {**i, "content": i["content"].upper()}
            if isinstance(i, dict) and i.get("role") == "user" and isinstance(i.get("content"), str)
            else i
            for i in data.model_data.input
        ]
        return ModelInputData(input=items, instructions=data.model_data.instructions)

    state = ConversationState.previous_response()
    agent = Agent(name="a", model=mock.model("gpt-4.1"), tools=[weather])
    mock.enqueue(Reply.tool_call("weather", {"city": "Paris"}), Reply.text("done"))
    config = RunConfig(call_model_input_filter=shout)
    await run_turn(state, agent, "hello", streamed=streamed, run_config=config)
    bodies = mock.response_requests
    assert [_kinds(b) for b in bodies] == [["user"], ["function_call_output"]]
