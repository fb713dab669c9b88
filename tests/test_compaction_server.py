"""Compaction under the server strategies: settled before it starts, a fallback, checked input."""

from __future__ import annotations

from typing import Any

import pytest
from _runs import STREAMED, compact_bodies, turn
from agents import Agent, function_tool, set_tracing_disabled

from agents_state_ext import (
    ConversationState,
    IncompleteHistoryError,
    OpenToolCallsError,
    PreviousResponseNotFoundError,
    RunInProgressError,
)
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply, describe_items

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


def agent_for(mock: MockResponsesAPI) -> Agent[Any]:
    return Agent(name="a", model=mock.model("gpt-4.1"))


# -- conversation: a maybe-accepted request is settled before compacting ---------------------


@STREAMED
@pytest.mark.parametrize("accepted", [True, False], ids=["accepted", "never-processed"])
async def test_an_uncertain_request_is_settled_before_compaction(
    mock: MockResponsesAPI, streamed: bool, accepted: bool
) -> None:
    old = mock.create_conversation()
    state = ConversationState.conversation(old, client=mock.client(max_retries=0))
    agent = Agent(name="a", model=mock.model("gpt-4.1"))
    mock.enqueue(Reply.text("one"), Reply.text("two"), Reply.text("three"))
    await turn(state, agent, "first", streamed)
    mock.inject(Fault.status(500, commit=accepted))
    with pytest.raises(Exception, match="boom"):
        await turn(state, agent, "second", streamed)
    tracker = state.tracker
    assert tracker is not None and tracker.uncertain

    result = await state.compact(client=mock.client(), model="gpt-4.1")
    window = describe_items(compact_bodies(mock)[0]["input"])
    assert window.count("user: second") == (1 if accepted else 0)

    await turn(state, agent, "third", streamed)
    sent = describe_items(mock.response_requests[-1]["input"])
    # Accepted: the old conversation held "second", the window carries it, nothing re-sends it.
    # Never processed: it is sent once, on the new conversation.
    assert sent == (["user: third"] if accepted else ["user: second", "user: third"])
    items = describe_items(mock.conversation_items(str(result.conversation_id)))
    assert items.count("user: second") == 1 and items.count("user: first") == 1


# -- conversation: seeded items carry no old ids (as a fork's do) ----------------------------


@STREAMED
async def test_the_new_conversation_is_seeded_without_the_old_item_ids(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    old = mock.create_conversation()
    state = ConversationState.conversation(old)
    agent = agent_for(mock)
    await turn(state, agent, "first", streamed)
    result = await state.compact(client=mock.client(), model="gpt-4.1")
    created = [r.json for r in mock.requests if r.method == "POST" and r.path == "/conversations"]
    (seed,) = created
    assert seed["items"] and all("id" not in item for item in seed["items"])
    assert [item["type"] for item in seed["items"]] == ["message", "compaction"]
    new_items = mock.conversation_items(str(result.conversation_id))
    assert {item["id"] for item in new_items}.isdisjoint(
        {item["id"] for item in mock.conversation_items(old)}
    )
    await turn(state, agent, "next", streamed)
    after = describe_items(mock.conversation_items(str(result.conversation_id)))
    assert after[0] == "user: first" and after[-2:] == ["user: next", "assistant: echo: next"]


# -- previous_response: input mode is the fallback for a chain the server lost --------------


async def two_turns(
    mock: MockResponsesAPI, streamed: bool
) -> tuple[ConversationState, Agent[Any], list[Any]]:
    state = ConversationState.previous_response()
    agent = agent_for(mock)
    mock.enqueue(Reply.text("one"), Reply.text("two"))
    first = await turn(state, agent, "first", streamed)
    second = await turn(state, agent, "second", streamed)
    return state, agent, [*first.to_input_list(), *second.to_input_list()]


@STREAMED
async def test_auto_falls_back_to_input_mode_when_the_chain_expired(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state, agent, history = await two_turns(mock, streamed)
    mock.expire_response()
    result = await state.compact(client=mock.client(), model="gpt-4.1", items=history)
    assert result.mode == "input"
    tried, used = compact_bodies(mock)
    assert tried == {"model": "gpt-4.1", "previous_response_id": "resp_2"}
    assert "previous_response_id" not in used and len(used["input"]) == len(history)

    mock.enqueue(Reply.text("three"))
    await turn(state, agent, "third", streamed)
    body = mock.response_requests[-1]
    assert "previous_response_id" not in body
    context = describe_items(mock.transcript(mock.response_ids[-1]))
    assert context.count("user: first") == 1 and context.count("user: second") == 1
    assert context[-2:] == ["user: third", "assistant: three"]


@STREAMED
async def test_a_lost_chain_without_items_is_a_typed_error_and_changes_nothing(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state, _, _ = await two_turns(mock, streamed)
    mock.expire_response()
    for mode in ("auto", "previous_response_id"):
        with pytest.raises(PreviousResponseNotFoundError) as caught:
            await state.compact(client=mock.client(), model="gpt-4.1", mode=mode)  # type: ignore[arg-type]
        assert caught.value.previous_response_id == "resp_2"
    tracker = state.tracker
    assert tracker is not None and tracker.previous_response_id == "resp_2"
    assert tracker.pending == []


@STREAMED
async def test_input_mode_refuses_items_that_miss_part_of_the_history(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state, agent, history = await two_turns(mock, streamed)
    last_run_only = history[2:]  # what result.to_input_list() of the last run holds
    with pytest.raises(IncompleteHistoryError) as caught:
        await state.compact(
            client=mock.client(), model="gpt-4.1", items=last_run_only, mode="input"
        )
    assert caught.value.missing == ["msg_2"]
    assert compact_bodies(mock) == []
    # The whole history is accepted, and the conversation follows the compacted window.
    result = await state.compact(client=mock.client(), model="gpt-4.1", items=history, mode="input")
    assert result.mode == "input"
    await turn(state, agent, "third", streamed)
    context = describe_items(mock.transcript(mock.response_ids[-1]))
    assert context.count("user: first") == 1 and context[-1] == "assistant: echo: third"


async def test_the_check_survives_a_stored_ledger(mock: MockResponsesAPI) -> None:
    state, _, history = await two_turns(mock, streamed=False)
    restored = ConversationState.loads_ledger(state.dumps_ledger())
    with pytest.raises(IncompleteHistoryError) as caught:
        await restored.compact(
            client=mock.client(), model="gpt-4.1", items=history[2:], mode="input"
        )
    assert caught.value.missing == ["msg_2"]
    await restored.compact(client=mock.client(), model="gpt-4.1")
    again = ConversationState.loads_ledger(restored.dumps_ledger())
    tracker = again.tracker
    assert tracker is not None and tracker.superseded == ["resp_2"]
    # Nothing of the old chain is asked for after the compaction: the window stands for it.
    assert tracker.missing_from([]) == []


@STREAMED
async def test_a_second_compaction_needs_the_window_the_first_one_left(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state, agent, _ = await two_turns(mock, streamed)
    await state.compact(client=mock.client(), model="gpt-4.1")
    third = await turn(state, agent, "third", streamed)
    # The window went out from the ledger, not from the app: the last run's items lack it.
    with pytest.raises(IncompleteHistoryError):
        await state.compact(
            client=mock.client(), model="gpt-4.1", items=third.to_input_list(), mode="input"
        )
    # Through the server chain it needs nothing from the app.
    result = await state.compact(client=mock.client(), model="gpt-4.1")
    assert result.mode == "previous_response_id"


# -- previous_response: a failed request's input is sent once, after the window --------------


@STREAMED
@pytest.mark.parametrize("commit", [True, False], ids=["stored-unheard", "never-processed"])
async def test_a_failed_request_s_input_follows_the_window_once(
    mock: MockResponsesAPI, streamed: bool, commit: bool
) -> None:
    state = ConversationState.previous_response()
    agent = Agent(name="a", model=mock.model("gpt-4.1"))
    client = mock.client(max_retries=0)
    mock.enqueue(Reply.text("one"), Reply.text("lost"), Reply.text("three"))
    await turn(state, agent, "first", streamed)
    mock.inject(Fault.status(500, commit=commit))
    with pytest.raises(Exception, match="boom"):
        await turn(state, agent, "second", streamed)
    result = await state.compact(client=client, model="gpt-4.1")
    assert compact_bodies(mock)[0]["previous_response_id"] == "resp_1"
    await turn(state, agent, "third", streamed)
    body = mock.response_requests[-1]
    assert "previous_response_id" not in body
    sent = describe_items(body["input"])
    assert sent == [*describe_items(result.items), "user: second", "user: third"]
    context = describe_items(mock.transcript(mock.response_ids[-1]))
    assert context.count("user: first") == 1 and context.count("user: second") == 1


# -- refused: a run in flight, calls without outputs -----------------------------------------


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval)."""
    return f"deleted {path}"


@STREAMED
@pytest.mark.parametrize("strategy", ["previous_response", "conversation"])
async def test_a_call_awaiting_its_output_is_not_compacted_away(
    mock: MockResponsesAPI, streamed: bool, strategy: str
) -> None:
    state = (
        ConversationState.previous_response()
        if strategy == "previous_response"
        else ConversationState.conversation(mock.create_conversation())
    )
    agent = Agent(name="a", model=mock.model("gpt-4.1"), tools=[delete_file])
    mock.enqueue(Reply.tool_call("delete_file", {"path": "x"}, call_id="call_x"), Reply.text("ok"))
    paused = await turn(state, agent, "tidy up", streamed)
    assert paused.interruptions
    with pytest.raises(OpenToolCallsError) as caught:
        await state.compact(client=mock.client(), model="gpt-4.1")
    assert caught.value.call_ids == ["call_x"]
    assert compact_bodies(mock) == []
    approved = paused.to_state()
    approved.approve(paused.interruptions[0])
    await turn(state, agent, approved, streamed)
    await state.compact(client=mock.client(), model="gpt-4.1")
    (body,) = compact_bodies(mock)
    if strategy == "previous_response":
        assert body == {"model": "gpt-4.1", "previous_response_id": mock.response_ids[-1]}
    else:
        window = describe_items(body["input"])
        assert window[-3:] == [
            'function_call delete_file {"path": "x"} [call_x]',
            "function_call_output [call_x]: deleted x",
            "assistant: ok",
        ]


async def test_compaction_waits_for_the_run_in_flight(mock: MockResponsesAPI) -> None:
    state = ConversationState.previous_response()
    agent = agent_for(mock)
    await state.run(agent, "first")
    streaming = state.run_streamed(agent, "second")
    with pytest.raises(RunInProgressError):
        await state.compact(client=mock.client(), model="gpt-4.1")
    async for _ in streaming.stream_events():
        pass
    result = await state.compact(client=mock.client(), model="gpt-4.1")
    assert result.mode == "previous_response_id"
    assert compact_bodies(mock) == [{"model": "gpt-4.1", "previous_response_id": "resp_2"}]


@STREAMED
async def test_compacting_twice_before_a_run_sends_one_window(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state, agent, _ = await two_turns(mock, streamed)
    first = await state.compact(client=mock.client(), model="gpt-4.1")
    second = await state.compact(client=mock.client(), model="gpt-4.1")
    assert second.mode == "input"
    assert describe_items(compact_bodies(mock)[1]["input"]) == describe_items(first.items)
    await turn(state, agent, "third", streamed)
    sent = describe_items(mock.response_requests[-1]["input"])
    assert sent == [*describe_items(second.items), "user: third"]
    assert sum(line.startswith("compaction") for line in sent) == 1
