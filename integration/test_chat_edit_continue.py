"""Continuing an edited-away version: switch back to it, send, and the branch goes on.

After an edit, the old version's messages are ``invalid`` (history: replaced on the edited
branch). Switching back to that version makes it the active branch again, and the active
branch is what the next request is built from: its complete turns are context again, the
answer lands on it, and the edited branch and the marks stay as they were.
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent

from agents_state_ext import InMemoryStore, open_conversation
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI, Reply

from ._chat import open_chat
from ._reasoning import STRATEGIES, reasoning_agent
from ._support import STREAMED, texts, wire

pytestmark = pytest.mark.anyio

OLD = ["system:be brief", "user:hi", "assistant:hello", "user:more?", "assistant:more"]


def _messages(entries: list[str]) -> list[str]:
    return [e for e in entries if not e.startswith("reasoning:")]


def _agent(mock: MockResponsesAPI, model: str) -> Agent[Any]:
    if model == "gpt-4.1":
        return Agent(name="assistant", model=mock.model(model))
    return reasoning_agent(mock, model=model)


@STREAMED
@pytest.mark.parametrize("model", ["gpt-4.1", "gpt-5"])
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_switch_back_to_an_edited_away_version_and_continue_it(
    mock: MockResponsesAPI, streamed: bool, model: str, strategy: str
) -> None:
    store = InMemoryStore()
    agent = _agent(mock, model)
    chat = await open_chat(mock, strategy, agent=agent, store=store, fork=True)
    mock.enqueue(Reply.text("hello"), Reply.text("more"), Reply.text("hey there"))
    first = await chat.send("hi", stream=streamed)
    second = await chat.send("more?", stream=streamed)
    edited = await chat.edit(first.user_id, "hey", stream=streamed)
    edited_branch = [(n.id, n.text(), n.status) for n in chat.graph.path_to(edited.id)]
    assert chat.node(second.id).status == "invalid"

    await chat.switch(second.id)
    mock.enqueue(Reply.text("then"))
    after = await chat.send("and then?", stream=streamed)

    assert after.status == "complete" and after.text == "then"
    body = mock.response_requests[-1]
    sent = _messages(wire(body)[2])
    old_record = await chat.record(second.id)
    if strategy in ("replay", "session"):
        # The old branch's messages, once each, then the new one.
        assert sent == [*OLD, "user:and then?"]
    elif strategy == "previous_response":
        # The chain of the old branch's answer holds its messages; only the new one is sent.
        assert body.get("previous_response_id") == old_record.response_id is not None
        assert sent == ["user:and then?"]
    else:
        conversation = body.get("conversation")
        assert isinstance(conversation, str) and sent == ["user:and then?"]
        held = _messages(texts(mock.conversation_items(conversation)))
        assert held == [*OLD, "user:and then?", "assistant:then"]
    record = await chat.record(after.id)
    assert record.status == "complete"

    expected = [*OLD, "user:and then?", "assistant:then"]
    path = chat.active_path()
    assert _messages([f"{n.role}:{n.text()}" for n in path]) == expected
    assert path[-1].id == after.id and path[-3].id == second.id
    # The edit's marks stay as history; the edited branch is untouched.
    assert chat.node(second.id).status == "invalid"
    assert [(n.id, n.text(), n.status) for n in chat.graph.path_to(edited.id)] == edited_branch

    again = await open_conversation(store, chat.id, agent=agent, counter=FixedTokenCounter())
    assert [n.id for n in again.active_path()] == [n.id for n in path]
    assert again.node(after.id).status == "complete"
    assert again.node(second.id).status == "invalid"
    assert [(n.id, n.text(), n.status) for n in again.graph.path_to(edited.id)] == edited_branch
    # The reopened handle continues the same branch.
    mock.enqueue(Reply.text("done"))
    last = await again.send("thanks", stream=streamed)
    assert last.status == "complete"
    if strategy in ("replay", "session"):
        tail = _messages(wire(mock.response_requests[-1])[2])
        assert tail == [*expected, "user:thanks"]
