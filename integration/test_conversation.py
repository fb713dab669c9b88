"""Real ``Runner`` runs under the conversation strategy against the mock's Conversations API."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent
from openai import APIConnectionError, InternalServerError

from agents_state_ext import ConversationState
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

from ._support import STREAMED, run_turn, texts, wire

pytestmark = pytest.mark.anyio


def agent_for(mock: MockResponsesAPI) -> Agent[Any]:
    return Agent(name="assistant", model=mock.model("gpt-4.1"))


@STREAMED
async def test_turns_append_once_to_the_conversation(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    conv = mock.create_conversation()
    state = ConversationState.conversation(conv)
    agent = agent_for(mock)
    mock.enqueue(Reply.text("hello"), Reply.text("again"))
    await run_turn(state, agent, "hi", streamed=streamed)
    await run_turn(state, agent, "more", streamed=streamed)
    assert [wire(b) for b in mock.response_requests] == [
        (None, conv, ["user:hi"]),
        (None, conv, ["user:more"]),
    ]
    assert texts(mock.conversation_items(conv)) == [
        "user:hi",
        "assistant:hello",
        "user:more",
        "assistant:again",
    ]


@STREAMED
@pytest.mark.parametrize(
    "fault",
    [
        Fault.status(500, commit=True),
        Fault.connect_error(commit=True),
        # after the first text delta: created, in_progress, item added, part added, delta
        Fault.drop_mid_stream(5, commit=True),
    ],
    ids=["500-after-commit", "drop-after-commit", "mid-stream-after-commit"],
)
async def test_failure_after_the_server_accepted_is_reconciled_not_resent(
    mock: MockResponsesAPI, streamed: bool, fault: Fault
) -> None:
    conv = mock.create_conversation()
    state = ConversationState.conversation(conv)
    agent = agent_for(mock)
    mock.enqueue(Reply.text("hello"))
    await run_turn(state, agent, "hi", streamed=streamed)
    mock.inject(fault)
    mock.enqueue(Reply.text("answer the server kept"))
    with pytest.raises((InternalServerError, APIConnectionError, Exception)):
        await run_turn(state, agent, "accepted question", streamed=streamed)
    assert state.tracker is not None and state.tracker.uncertain != []
    mock.enqueue(Reply.text("next answer"))
    await run_turn(state, agent, "next", streamed=streamed)
    # Evidence first: the extension listed the conversation's items before re-sending anything.
    listed = [r for r in mock.requests if r.method == "GET" and r.path.endswith("/items")]
    assert listed, "the conversation was not read before the next request"
    assert wire(mock.response_requests[-1]) == (None, conv, ["user:next"])
    items = texts(mock.conversation_items(conv))
    assert items.count("user:accepted question") == 1
    assert items[-2:] == ["user:next", "assistant:next answer"]


@STREAMED
@pytest.mark.parametrize(
    "fault",
    [Fault.status(500), Fault.connect_error(), Fault.timeout()],
    ids=["500", "drop", "timeout"],
)
async def test_failure_the_server_never_accepted_is_resent_exactly_once(
    mock: MockResponsesAPI, streamed: bool, fault: Fault
) -> None:
    conv = mock.create_conversation()
    state = ConversationState.conversation(conv)
    agent = agent_for(mock)
    mock.enqueue(Reply.text("hello"))
    await run_turn(state, agent, "hi", streamed=streamed)
    mock.inject(fault)
    with pytest.raises(Exception):  # noqa: B017 - each fault surfaces as its own openai error
        await run_turn(state, agent, "lost question", streamed=streamed)
    mock.enqueue(Reply.text("both answered"))
    await run_turn(state, agent, "next", streamed=streamed)
    assert wire(mock.response_requests[-1]) == (None, conv, ["user:lost question", "user:next"])
    assert texts(mock.conversation_items(conv)) == [
        "user:hi",
        "assistant:hello",
        "user:lost question",
        "user:next",
        "assistant:both answered",
    ]


async def test_cancelled_stream_after_acceptance_is_reconciled(mock: MockResponsesAPI) -> None:
    conv = mock.create_conversation()
    state = ConversationState.conversation(conv)
    agent = agent_for(mock)
    mock.enqueue(Reply.text("a long answer in many small pieces", delay=0.05))
    result = state.run_streamed(agent, "story please")
    async for event in result.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            result.cancel()
    assert state.partial is not None and state.partial.text.startswith("a")
    mock.enqueue(Reply.text("ok"))
    await run_turn(state, agent, "shorter", streamed=False)
    items = texts(mock.conversation_items(conv))
    assert items.count("user:story please") == 1
    assert items[-2:] == ["user:shorter", "assistant:ok"]
