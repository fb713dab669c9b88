"""``chat.session()`` is refused on a server-strategy chat: the server, not a session, owns it."""

from __future__ import annotations

import pytest
from agents import Agent, Runner

from agents_state_ext import MixedStateOwnerError
from agents_state_ext.testing import MockResponsesAPI, Reply

from ._chat import open_chat
from ._support import wire

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("strategy", ["previous_response", "conversation"])
async def test_a_server_strategy_chat_refuses_a_session_and_keeps_working(
    mock: MockResponsesAPI, strategy: str
) -> None:
    chat = await open_chat(mock, strategy)
    mock.enqueue(Reply.text("hello"), Reply.text("again"))
    first = await chat.send("hi")
    nodes = [n.to_dict() for n in (await chat.store.load_graph(chat.id)).nodes()]
    head = await chat.store.get_head(chat.id)
    records = [r.to_dict() for r in await chat.attempts()]

    with pytest.raises(MixedStateOwnerError, match=r"chat\.send") as refused:
        chat.session()
    assert "strategy=" in str(refused.value)

    # Nothing was sent and nothing in the store changed.
    assert len(mock.response_requests) == 1
    assert [n.to_dict() for n in (await chat.store.load_graph(chat.id)).nodes()] == nodes
    assert await chat.store.get_head(chat.id) == head
    assert [r.to_dict() for r in await chat.attempts()] == records
    # The chat goes on under its own strategy, chained from its own cursor.
    second = await chat.send("still there?")
    assert second.status == "complete"
    previous, conversation, sent = wire(mock.response_requests[-1])
    assert (previous or conversation) == (await chat.record(first.id)).cursor_after
    assert sent == ["user:still there?"]


@pytest.mark.parametrize("strategy", ["replay", "session"])
async def test_a_client_strategy_chat_still_serves_a_session(
    mock: MockResponsesAPI, strategy: str
) -> None:
    chat = await open_chat(mock, strategy)
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    mock.enqueue(Reply.text("hello"), Reply.text("again"))
    await Runner.run(agent, "hi", session=chat.session())
    await chat.send("still there?")
    assert wire(mock.response_requests[-1])[2] == [
        "system:be brief",
        "user:hi",
        "assistant:hello",
        "user:still there?",
    ]
