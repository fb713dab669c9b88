"""Lossless resume and cancel through the versioned envelope (dumps / loads)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    RunState,
    function_tool,
)

from agents_state_ext import ConversationState, StateBlobError
from agents_state_ext.testing import MockResponsesAPI, Reply, ResponseContext, describe_items

from ._support import STREAMED, run_turn, wire

pytestmark = pytest.mark.anyio
SECRET = "sk-test-DO-NOT-LEAK-9f8e7d"


@function_tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval)."""
    return f"deleted {path}"


def scripted(context: ResponseContext) -> Reply:
    """The model's next step follows from the context alone, so a re-asked turn repeats."""
    done = sum(1 for item in context.items if item.get("type") == "function_call_output")
    if done == 0:
        return Reply.tool_call("get_weather", {"city": "Paris"}, call_id="call_paris")
    if done == 1:
        return Reply.tool_call("get_weather", {"city": "Rome"}, call_id="call_rome")
    if done == 2:
        return Reply.tool_call("delete_file", {"path": "/tmp/x"}, call_id="call_delete")
    return Reply.text("all done")


@pytest.fixture
def scripted_mock(mock: MockResponsesAPI) -> MockResponsesAPI:
    mock.responder = scripted
    return mock


def agent_for(mock: MockResponsesAPI) -> Agent[Any]:
    client = mock.client(api_key=SECRET)
    model = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
    return Agent(
        name="ops",
        model=model,
        tools=[get_weather, delete_file],
        model_settings=ModelSettings(temperature=0.2),
    )


async def finish(
    mock: MockResponsesAPI,
    blob: str,
    streamed: bool,
    blobs: list[str],
) -> tuple[ConversationState, Any]:
    """Resume from ``blob`` in a fresh ConversationState until the run ends, approving."""
    while True:
        state, run_state = await ConversationState.loads(agent_for(mock), blob)
        result = await run_turn(state, agent_for(mock), run_state, streamed=streamed)
        if not result.interruptions:
            return state, result
        approved = result.to_state()
        for item in result.interruptions:
            approved.approve(item)
        blob = state.dumps(approved)
        blobs.append(blob)


async def reference_run(mock: MockResponsesAPI, streamed: bool) -> list[str]:
    state = ConversationState.previous_response(prompt_cache_key="k")
    result = await run_turn(state, agent_for(mock), "tidy up", streamed=streamed)
    assert result.interruptions
    approved = result.to_state()
    approved.approve(result.interruptions[0])
    result = await run_turn(state, agent_for(mock), approved, streamed=streamed)
    assert result.final_output == "all done"
    return describe_items(mock.transcript(state.tracker.previous_response_id))  # type: ignore[union-attr]


@STREAMED
@pytest.mark.parametrize("cut", [1, 2, 3])
@pytest.mark.parametrize("how", ["after_turn", "immediate"])
async def test_crash_resume_at_every_cut_point_matches_the_uninterrupted_run(
    streamed: bool, cut: int, how: str
) -> None:
    async with MockResponsesAPI() as reference_mock:
        reference_mock.responder = scripted
        expected = await reference_run(reference_mock, streamed)

    async with MockResponsesAPI() as mock:
        mock.responder = scripted
        state = ConversationState.previous_response(prompt_cache_key="k")
        result = state.run_streamed(agent_for(mock), "tidy up")
        completed = 0
        async for event in result.stream_events():
            if event.type == "raw_response_event" and event.data.type == "response.completed":
                completed += 1
                if completed == cut:
                    result.cancel(mode=how)  # type: ignore[arg-type]
        run_state = result.to_state()
        for item in result.interruptions:
            run_state.approve(item)
        blobs = [state.dumps(run_state)]
        del state  # the process "crashes": only the blob survives
        final_state, final = await finish(mock, blobs[0], streamed, blobs)
        assert final.final_output == "all done"
        tracker = final_state.tracker
        assert tracker is not None
        assert describe_items(mock.transcript(str(tracker.previous_response_id))) == expected
        for blob in blobs:
            assert SECRET not in blob and "sk-" not in blob


@pytest.mark.parametrize("resume_streamed", [False, True], ids=["then-plain", "then-streamed"])
async def test_immediate_cancel_dump_load_resume_sends_the_input_once(
    mock: MockResponsesAPI, resume_streamed: bool
) -> None:
    mock.enqueue(Reply.text("hello"), Reply.text("a long story in many words", delay=0.05))
    agent = agent_for(mock)
    state = ConversationState.previous_response()
    await run_turn(state, agent, "hi", streamed=True)
    result = state.run_streamed(agent, "tell a story")
    async for event in result.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            result.cancel()
    blob = state.dumps(result)
    payload = json.loads(blob)["payload"]
    assert payload["partial"]["text"].startswith("a") and payload["partial"]["response_id"]
    assert payload["run_state"]["current_turn"] == len(payload["run_state"]["model_responses"])

    restored, run_state = await ConversationState.loads(agent, blob)
    assert restored.partial is not None and restored.partial.text == payload["partial"]["text"]
    mock.enqueue(Reply.text("a short story"))
    resumed = await run_turn(restored, agent, run_state, streamed=resume_streamed)
    assert resumed.final_output == "a short story"
    assert wire(mock.response_requests[-1]) == ("resp_1", None, ["user:tell a story"])
    transcript = describe_items(mock.transcript(restored.tracker.previous_response_id))  # type: ignore[union-attr]
    assert transcript.count("user: tell a story") == 1
    turns = resumed.to_state().to_json()
    assert turns["current_turn"] == len(turns["model_responses"]) == 1


@STREAMED
async def test_resume_after_a_failure_resends_the_unacknowledged_tool_output(
    scripted_mock: MockResponsesAPI, streamed: bool
) -> None:
    mock = scripted_mock
    from agents_state_ext.testing import Fault

    agent = agent_for(mock)
    state = ConversationState.previous_response()
    mock.inject(Fault.delay(0))
    mock.inject(Fault.status(500))
    with pytest.raises(Exception, match=r"boom|500"):
        await run_turn(state, agent, "tidy up", streamed=streamed)
    tracker = state.tracker
    assert tracker is not None and [i.get("call_id") for i in tracker.pending] == ["call_paris"]
    # The failed run left no RunState; the ledger alone carries the lost tool output forward.
    result = await run_turn(state, agent, "continue", streamed=streamed)
    assert result.interruptions  # delete_file again needs approval
    sent = wire(mock.response_requests[2])[2]
    assert sent[0] == "function_call_output:call_paris" and sent[1] == "user:continue"


BAD_BLOBS = {
    "not json": "{not json",
    "truncated": None,
    "wrong format": json.dumps({"format": "other", "version": 1, "payload": {}}),
    "future version": json.dumps({"format": "agents-state-ext/run", "version": 99, "payload": {}}),
    "no payload": json.dumps({"format": "agents-state-ext/run", "version": 1}),
    "bad tracker": None,
    "bad run state": None,
}


@pytest.mark.parametrize("case", list(BAD_BLOBS))
async def test_bad_envelopes_raise_state_blob_error(mock: MockResponsesAPI, case: str) -> None:
    mock.enqueue(Reply.text("hi"))
    state = ConversationState.previous_response()
    agent = agent_for(mock)
    result = await run_turn(state, agent, "hi", streamed=False)
    good = state.dumps(result)
    envelope = json.loads(good)
    blob = BAD_BLOBS[case]
    if case == "truncated":
        blob = good[: len(good) // 2]
    elif case == "bad tracker":
        envelope["payload"]["tracker"] = {
            "version": 1,
            "strategy": "previous_response",
            "item_ids": 3,
        }
        blob = json.dumps(envelope)
    elif case == "bad run state":
        envelope["payload"]["run_state"] = {"$schemaVersion": "0.0", "nonsense": True}
        blob = json.dumps(envelope)
    before = len(mock.requests)
    with pytest.raises(StateBlobError):
        await ConversationState.loads(agent, str(blob))
    assert len(mock.requests) == before


async def test_signed_envelopes_reject_tampering(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.text("hi"))
    state = ConversationState.previous_response()
    agent = agent_for(mock)
    result = await run_turn(state, agent, "hi", streamed=False)
    blob = state.dumps(result, key="integrity-key")
    restored, run_state = await ConversationState.loads(agent, blob, key="integrity-key")
    assert restored.tracker is not None and restored.tracker.previous_response_id == "resp_1"
    assert isinstance(run_state, RunState)
    tampered = json.loads(blob)
    tampered["payload"]["tracker"]["previous_response_id"] = "resp_999"
    with pytest.raises(StateBlobError, match="signature"):
        await ConversationState.loads(agent, json.dumps(tampered), key="integrity-key")
    with pytest.raises(StateBlobError, match="signature"):
        await ConversationState.loads(agent, blob, key="another-key")
    with pytest.raises(StateBlobError, match="not signed"):
        await ConversationState.loads(agent, state.dumps(result), key="integrity-key")
    assert SECRET not in blob
