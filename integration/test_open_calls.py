"""Tool calls an interrupted run leaves without output are closed exactly once (orphan repair)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from agents_state_ext import (
    ConversationState,
    InterruptedToolCallWarning,
    OpenToolCallsError,
)
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply, describe_items

from ._server_state import SERVER, agent_for, no_400, server_items, state_for
from ._support import STREAMED, run_turn

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::agents_state_ext.InterruptedToolCallWarning"),
]


def assert_sound(mock: MockResponsesAPI, state: ConversationState, *users: str) -> list[str]:
    """Each user text once, each call answered once, and no request rejected with a 400."""
    items = server_items(mock, state)
    history = describe_items(items)
    for text in users:
        assert sum(1 for line in history if line == f"user: {text}") == 1, history
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outputs) == sorted(set(outputs)), history
    no_400(mock)
    return history


async def cancel_on(result: Any, name: str, mode: str = "immediate") -> None:
    async for event in result.stream_events():
        if event.type == "run_item_stream_event" and event.name == name:
            result.cancel(mode=mode)


@SERVER
async def test_after_turn_cancel_then_new_turn_sends_the_real_output(
    mock: MockResponsesAPI, strategy: str
) -> None:
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}, call_id="call_p"))
    state, agent = state_for(mock, strategy), agent_for(mock)
    result = state.run_streamed(agent, "weather?")
    await cancel_on(result, "tool_output", "after_turn")
    assert state.tracker is not None and state.tracker.open_calls == ["call_p"]
    with pytest.warns(InterruptedToolCallWarning, match="call_p.*output the run produced"):
        await state.run(agent, "and now?")
    assert mock.response_requests[-1]["input"][0] == {
        "type": "function_call_output",
        "call_id": "call_p",
        "output": "sunny in Paris",
    }
    assert_sound(mock, state, "weather?", "and now?")
    assert [(r.call_id, r.closed_with) for r in state.repairs] == [("call_p", "output")]
    assert state.tracker.open_calls == []


@SERVER
@pytest.mark.parametrize("continuation", ["new-turn", "loads-new-turn", "loads-resume"])
async def test_cancel_on_tool_called_closes_the_call_or_resumes_it(
    mock: MockResponsesAPI, strategy: str, continuation: str
) -> None:
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}, call_id="call_p"))
    state, agent = state_for(mock, strategy), agent_for(mock)
    result = state.run_streamed(agent, "weather?")
    await cancel_on(result, "tool_called")
    if continuation == "new-turn":
        await state.run(agent, "and now?")
    else:
        state, run_state = await ConversationState.loads(agent, state.dumps(result))
        await state.run(agent, "and now?" if continuation == "loads-new-turn" else run_state)
    assert_sound(mock, state, "weather?")
    if continuation == "loads-resume" and strategy == "conversation":
        # The RunState never recorded the response: the resumed run is handed the stored one
        # and runs the tool itself, so the call gets its real output.
        assert state.repairs == []
    else:
        assert [(r.call_id, r.closed_with) for r in state.repairs] == [("call_p", "interrupted")]


@SERVER
@STREAMED
async def test_a_cancel_right_after_a_function_call_response_then_a_new_turn(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Rome"}, call_id="call_r"))
    state, agent = state_for(mock, strategy), agent_for(mock)
    if streamed:
        result = state.run_streamed(agent, "weather?")
        async for event in result.stream_events():
            if event.type == "raw_response_event" and event.data.type == "response.completed":
                result.cancel()
    else:
        # Non-streamed, the run is cancelled while its tool runs: the call stays open.
        mock.enqueue(Reply.text("unused"))
        agent = agent_for(mock, tool_use_behavior="stop_on_first_tool")
        await state.run(agent, "weather?")
    await state.run(agent_for(mock), "and now?")
    assert_sound(mock, state, "weather?", "and now?")


@SERVER
async def test_stop_on_first_tool_leaves_no_open_call(
    mock: MockResponsesAPI, strategy: str
) -> None:
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Oslo"}, call_id="call_o"))
    state = state_for(mock, strategy)
    agent = agent_for(mock, tool_use_behavior="stop_on_first_tool")
    first = await state.run(agent, "weather?")
    assert first.final_output == "sunny in Oslo"
    await state.run(agent, "thanks")
    assert_sound(mock, state, "weather?", "thanks")
    assert [r.closed_with for r in state.repairs] == ["output"]


@STREAMED
async def test_a_function_call_committed_but_never_heard_is_closed(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    """Conversation strategy: the server stored the call, the client got a 500 / a drop."""
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Lima"}, call_id="call_l"))
    mock.inject(
        Fault.status(500, commit=True)
        if not streamed
        else Fault.drop_mid_stream(3, commit=True)  # after the call's output_item.added
    )
    state, agent = state_for(mock, "conversation"), agent_for(mock)
    with pytest.raises(Exception):  # noqa: B017 - whatever the SDK makes of a 500 / a drop
        await run_turn(state, agent, "weather?", streamed=streamed)
    await run_turn(state, agent, "and now?", streamed=streamed)
    assert_sound(mock, state, "weather?", "and now?")
    # Reconciliation adopted the stored call as open and closed it as interrupted, once.
    assert [(r.call_id, r.closed_with) for r in state.repairs] == [("call_l", "interrupted")]


@SERVER
async def test_the_raise_policy_names_the_calls_and_takes_the_apps_outputs(
    mock: MockResponsesAPI, strategy: str
) -> None:
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}, call_id="call_p"))
    state, agent = state_for(mock, strategy, open_calls="raise"), agent_for(mock)
    result = state.run_streamed(agent, "weather?")
    await cancel_on(result, "tool_called")
    sent = len(mock.response_requests)
    with pytest.raises(OpenToolCallsError) as caught:
        await state.run(agent, "and now?")
    assert caught.value.call_ids == ["call_p"]
    assert len(mock.response_requests) == sent  # refused before any request
    with pytest.raises(KeyError):
        state.close_tool_calls({"call_nope": "x"})
    state.close_tool_calls({"call_p": "rain in Paris"})
    await state.run(agent, "and now?")
    assert mock.response_requests[-1]["input"][0]["output"] == "rain in Paris"
    # The refused run's input went out once, with the retried run's.
    history = assert_sound(mock, state, "weather?")
    assert history.count("user: and now?") == 2


async def test_repairs_survive_dumps_and_loads(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}, call_id="call_p"))
    state, agent = state_for(mock, "previous_response"), agent_for(mock)
    result = state.run_streamed(agent, "weather?")
    await cancel_on(result, "tool_output", "after_turn")
    restored, _ = await ConversationState.loads(agent, state.dumps(result))
    assert restored.tracker is not None
    assert restored.tracker.open_calls == ["call_p"]
    assert [i["output"] for i in restored.tracker.unsent_outputs] == ["sunny in Paris"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = await restored.run(agent, "and now?")
    assert any(issubclass(w.category, InterruptedToolCallWarning) for w in caught)
    again, _ = await ConversationState.loads(agent, restored.dumps(result))
    assert [(r.call_id, r.closed_with) for r in again.repairs] == [("call_p", "output")]
    assert again.tracker is not None and again.tracker.open_calls == []
