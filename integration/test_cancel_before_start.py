"""A streamed run cancelled before its task ran, checkpointed and resumed, answers its own input.

``run_streamed(...)`` then ``cancel()`` at once: no request went out, the input is pending. The
checkpoint of that result, resumed, must send the input once and answer it — never hand back
the answer of the turn before (which the conversation strategy keeps as "undelivered" for a run
that never heard its response). Both server strategies, plain and reasoning models, resumed in
the same state and after ``dumps()`` / ``loads()``.
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent

from agents_state_ext import ConversationState
from agents_state_ext.testing import MockResponsesAPI

from ._support import texts, wire

pytestmark = pytest.mark.anyio


def spoken(items: list[dict[str, Any]]) -> list[str]:
    return [t for t in texts(items) if not t.startswith("reasoning:")]


@pytest.mark.parametrize("model", ["gpt-4.1", "gpt-5"])
@pytest.mark.parametrize("strategy", ["conversation", "previous_response"])
@pytest.mark.parametrize("restore", ["dumps_loads", "same_state"])
async def test_a_stream_cancelled_before_its_first_event_resumes_with_its_own_question(
    mock: MockResponsesAPI, model: str, strategy: str, restore: str
) -> None:
    agent = Agent(name="assistant", model=mock.model(model))
    if strategy == "conversation":
        conv = mock.create_conversation()
        state = ConversationState.conversation(conv)
    else:
        state = ConversationState.previous_response()
    await state.run(agent, "hello")
    cancelled = state.run_streamed(agent, "tell me a story")
    cancelled.cancel()
    async for _ in cancelled.stream_events():
        pass
    assert len(mock.response_requests) == 1  # the cancelled run sent nothing
    if restore == "dumps_loads":
        state, resumed = await ConversationState.loads(agent, state.dumps(cancelled))
    else:
        resumed = cancelled.to_state()
    result = await state.run(agent, resumed)
    assert result.final_output == "echo: tell me a story"
    bodies = mock.response_requests
    assert len(bodies) == 2
    sent = [t for t in wire(bodies[1])[2] if not t.startswith("reasoning:")]
    assert sent == ["user:tell me a story"]
    if strategy == "conversation":
        assert spoken(mock.conversation_items(conv)) == [
            "user:hello",
            "assistant:echo: hello",
            "user:tell me a story",
            "assistant:echo: tell me a story",
        ]
    else:
        assert bodies[1]["previous_response_id"] == mock.response_ids[0]
