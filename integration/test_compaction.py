"""Compaction keeps the state owner: through the server chain, or from client-held items."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent

from agents_state_ext import ConversationState
from agents_state_ext.testing import MockResponsesAPI, Reply, decode_compaction, describe_items

from ._support import STREAMED, run_turn, wire

pytestmark = pytest.mark.anyio


def agent_for(mock: MockResponsesAPI) -> Agent[Any]:
    return Agent(name="a", model=mock.model("gpt-4.1"))


def compact_requests(mock: MockResponsesAPI) -> list[dict[str, Any]]:
    return [r.json for r in mock.requests if r.path.endswith("/responses/compact")]


@STREAMED
async def test_previous_response_compacts_the_server_chain_and_continues_from_it(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state = ConversationState.previous_response()
    agent = agent_for(mock)
    mock.enqueue(Reply.text("one"), Reply.text("two"), Reply.text("three"))
    await run_turn(state, agent, "first", streamed=streamed)
    await run_turn(state, agent, "second", streamed=streamed)
    result = await state.compact(client=mock.client(), model="gpt-4.1")
    assert result.mode == "previous_response_id"
    assert compact_requests(mock) == [{"model": "gpt-4.1", "previous_response_id": "resp_2"}]
    compaction = [i for i in result.items if i["type"] == "compaction"]
    assert len(compaction) == 1
    replaced = describe_items(decode_compaction(compaction[0]["encrypted_content"]))
    assert replaced == ["user: first", "assistant: one", "user: second", "assistant: two"]

    await run_turn(state, agent, "third", streamed=streamed)
    previous, _, sent = wire(mock.response_requests[-1])
    # A new chain starts from the compacted window, sent once, and never from the old chain.
    assert previous is None
    assert sent[-1] == "user:third" and sent.count("compaction:None") == 1
    tracker = state.tracker
    assert tracker is not None and tracker.previous_response_id == mock.response_ids[-1]
    after = describe_items(mock.transcript(tracker.previous_response_id))
    assert "assistant: one" not in after and after[-2:] == ["user: third", "assistant: three"]
    chained_from = tracker.previous_response_id
    mock.enqueue(Reply.text("four"))
    await run_turn(state, agent, "fourth", streamed=streamed)
    assert wire(mock.response_requests[-1]) == (chained_from, None, ["user:fourth"])


@STREAMED
async def test_input_mode_rebuilds_from_client_held_items(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state = ConversationState.replay()
    agent = agent_for(mock)
    mock.enqueue(Reply.text("one"), Reply.text("two"))
    first = await run_turn(state, agent, "first", streamed=streamed)
    history = first.to_input_list()
    result = await state.compact(client=mock.client(), model="gpt-4.1", items=history)
    assert result.mode == "input"
    request = compact_requests(mock)[0]
    assert "previous_response_id" not in request and len(request["input"]) == len(history)
    follow_up = [*result.items, {"role": "user", "content": "next"}]
    await run_turn(state, agent, follow_up, streamed=streamed)
    previous, _, sent = wire(mock.response_requests[-1])
    assert previous is None and sent[-1] == "user:next" and "assistant:one" not in sent


async def test_no_usable_chain_falls_back_to_input_mode(mock: MockResponsesAPI) -> None:
    state = ConversationState.previous_response()
    history = [{"role": "user", "content": "held by the client"}]
    result = await state.compact(client=mock.client(), model="gpt-4.1", items=history)
    assert result.mode == "input"
    with pytest.raises(ValueError, match="store=False"):
        await state.compact(
            client=mock.client(), model="gpt-4.1", mode="previous_response_id", store=False
        )
    with pytest.raises(ValueError, match="items"):
        await ConversationState.previous_response().compact(client=mock.client(), model="gpt-4.1")


@STREAMED
async def test_conversation_compaction_moves_to_a_seeded_conversation(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    old = mock.create_conversation()
    state = ConversationState.conversation(old)
    agent = agent_for(mock)
    mock.enqueue(Reply.text("one"), Reply.text("two"))
    await run_turn(state, agent, "first", streamed=streamed)
    result = await state.compact(client=mock.client(), model="gpt-4.1")
    assert result.mode == "input" and result.conversation_id not in (None, old)
    tracker = state.tracker
    assert tracker is not None and tracker.conversation_id == result.conversation_id
    await run_turn(state, agent, "next", streamed=streamed)
    assert wire(mock.response_requests[-1]) == (None, result.conversation_id, ["user:next"])
    items = describe_items(mock.conversation_items(str(result.conversation_id)))
    assert items[-2:] == ["user: next", "assistant: two"]
    assert "assistant: one" not in items


@STREAMED
@pytest.mark.parametrize("owner", ["previous_response", "conversation", "replay"])
async def test_a_branch_with_reasoning_compacts_and_goes_on(
    mock: MockResponsesAPI, owner: str, streamed: bool
) -> None:
    """A reasoning model's turns (a reasoning item before each answer) compact, and the next
    turn is taken: the mock refuses what the real API refuses about reasoning items."""
    agent = Agent(name="a", model=mock.model("gpt-5"))
    if owner == "conversation":
        state = ConversationState.conversation(mock.create_conversation())
    else:
        state = getattr(ConversationState, owner)()
    mock.enqueue(Reply.text("one"), Reply.text("two"), Reply.text("three"))
    first = await run_turn(state, agent, "first", streamed=streamed)
    second_input: Any = "second"
    if owner == "replay":
        second_input = [*first.to_input_list(), {"role": "user", "content": "second"}]
    second = await run_turn(state, agent, second_input, streamed=streamed)
    held = second.to_input_list() if owner == "replay" else None
    result = await state.compact(client=mock.client(), model="gpt-5", items=held)
    [compaction] = [i for i in result.items if i["type"] == "compaction"]
    replaced = decode_compaction(compaction["encrypted_content"])
    assert [i["type"] for i in replaced].count("reasoning") == 2
    follow: Any = "third"
    if owner == "replay":
        follow = [*result.items, {"role": "user", "content": "third"}]
    third = await run_turn(state, agent, follow, streamed=streamed)
    assert third.final_output == "three"
    assert [r.status for r in mock.requests if r.status >= 400] == []
    _, _, sent = wire(mock.response_requests[-1])
    assert sent[-1] == "user:third" and "assistant:one" not in sent
