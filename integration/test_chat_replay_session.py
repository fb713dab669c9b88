"""The chat API under the client-owned strategies (replay, session) against the mock server."""

from __future__ import annotations

import pytest
from agents import Agent, Runner

from agents_state_ext import ContextOverflowError, InMemoryStore
from agents_state_ext.chat import open_conversation
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI, Reply

from ._chat import ids, open_chat, slow_reply, stop_midway
from ._support import STREAMED, texts, wire

CLIENT = pytest.mark.parametrize("strategy", ["replay", "session"])
pytestmark = pytest.mark.anyio

BASE = ["system:be brief", "user:hi", "assistant:hello"]


@CLIENT
@STREAMED
async def test_stop_retry_edit_switch_send_only_the_valid_active_branch(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    chat = await open_chat(mock, strategy)
    mock.enqueue(Reply.text("hello"), slow_reply(streamed=streamed))
    mock.enqueue(Reply.text("retold"), Reply.text("sequel"), Reply.text("poem"), Reply.text("bye"))

    first = await chat.send("hi", stream=streamed)
    stopped = await stop_midway(chat.send("story", stream=streamed), streamed=streamed, mock=mock)
    assert stopped.status == "cancelled"
    assert ("one two " if streamed else "") == stopped.text  # the partial answer is kept
    retry = await chat.retry(stream=streamed)
    assert retry.user_id == stopped.user_id and retry.text == "retold"
    await chat.send("sequel?", stream=streamed)
    edit = await chat.edit(stopped.user_id, "poem", stream=streamed)
    await chat.switch(first.id)
    thanks = await chat.send("thanks", stream=streamed)

    bodies = mock.response_requests
    assert [wire(b)[2] for b in bodies[2:]] == [
        [*BASE, "user:story"],  # the retry: the cancelled partial never goes
        [*BASE, "user:story", "assistant:retold", "user:sequel?"],
        [*BASE, "user:poem"],  # the edit: nothing of the old version
        [*BASE, "user:thanks"],  # the switched-to branch
    ]
    assert all(wire(b)[:2] == (None, None) for b in bodies)
    response = (await chat.record(thanks.id)).response_id
    assert response is not None
    assert texts(mock.transcript(response)) == [*BASE, "user:thanks", "assistant:bye"]
    assert [n.status for n in chat.siblings(stopped.id)] == ["invalid", "invalid"]
    assert chat.node(edit.id).status == "complete"
    records = await chat.attempts()
    assert [r.status for r in records] == ["complete", "cancelled", *["complete"] * 4]
    assert all(r.state_owner == strategy and r.cursor_before is None for r in records)
    assert list(records[2].included) == ["m1", "m2", "m3", "m4"]
    assert (await chat.explain(stopped.id, retry.id)).text().endswith("nothing sent differed")


@CLIENT
@STREAMED
async def test_budget_drops_old_turns_and_an_overflow_is_never_sent(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    chat = await open_chat(mock, strategy, budget=12)
    mock.enqueue(Reply.text("a b c"), Reply.text("d e f"), Reply.text("g"))
    await chat.send("one two", stream=streamed)  # system 3 + user 3 + assistant 4 (words)
    await chat.send("three four", stream=streamed)
    last = await chat.send("five", stream=streamed)
    # 12 tokens: system (3) + active (2) leave 7: the newest turn (3 + 4) fits, the older not.
    assert wire(mock.response_requests[-1])[2] == [
        "system:be brief",
        "user:three four",
        "assistant:d e f",
        "user:five",
    ]
    assert (await chat.record(last.id)).used == 12
    await chat.set_budget(4)
    with pytest.raises(ContextOverflowError) as refused:  # nothing is stored or sent
        await chat.send("six seven", stream=streamed)
    assert (refused.value.required_tokens, refused.value.budget) == (3 + 3, 4)
    assert len(mock.response_requests) == 3
    assert len(await chat.attempts()) == 3
    assert chat.active_path()[-1].id == last.id


async def test_a_graph_session_follows_the_active_branch_for_runner_itself(
    mock: MockResponsesAPI,
) -> None:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    chat = await open_conversation(
        InMemoryStore(), strategy="session", counter=FixedTokenCounter(), id_factory=ids()
    )
    mock.enqueue(Reply.text("hello"), Reply.text("first"), Reply.text("second"))
    await Runner.run(agent, "hi", session=chat.session())
    await Runner.run(agent, "one", session=chat.session())
    await chat.switch("m2")  # back to "hello"
    await Runner.run(agent, "two", session=chat.session())
    assert wire(mock.response_requests[-1])[2] == ["user:hi", "assistant:hello", "user:two"]
    assert [(n.role, n.status, n.text()) for n in chat.active_path()] == [
        ("user", "complete", "hi"),
        ("assistant", "complete", "hello"),
        ("user", "complete", "two"),
        ("assistant", "complete", "second"),
    ]
    reopened = await open_conversation(chat.store, chat.id, create=False)
    assert [n.text() for n in reopened.active_path()] == ["hi", "hello", "two", "second"]
