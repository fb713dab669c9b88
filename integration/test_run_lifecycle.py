"""One run lifecycle: input kept, one run at a time, filters, sessions, checkpoints, lost chains."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession
from agents.run_config import CallModelData, ModelInputData

from agents_state_ext import (
    ConversationState,
    MixedStateOwnerError,
    PreviousResponseNotFoundError,
    RunInProgressError,
    StateExtError,
)
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

from ._server_state import SERVER, agent_for, history, no_400, state_for
from ._support import STREAMED, run_turn, wire

pytestmark = pytest.mark.anyio


@SERVER
@pytest.mark.parametrize("then", ["resume", "new-turn"])
async def test_a_stream_cancelled_before_its_first_event_keeps_the_input(
    mock: MockResponsesAPI, strategy: str, then: str
) -> None:
    state, agent = state_for(mock, strategy), agent_for(mock)
    result = state.run_streamed(agent, "tell me a story")
    result.cancel()
    async for _ in result.stream_events():
        pass
    restored, run_state = await ConversationState.loads(agent, state.dumps(result))
    assert [i["content"] for i in restored.tracker.pending] == ["tell me a story"]  # type: ignore[union-attr]
    mock.enqueue(Reply.text("Once upon a time"))
    await restored.run(agent, run_state if then == "resume" else "and now?")
    sent = wire(mock.response_requests[0])[2]
    assert sent[0] == "user:tell me a story"
    assert history(mock, restored).count("user: tell me a story") == 1
    no_400(mock)


@SERVER
async def test_a_task_cancelled_before_its_first_request_keeps_the_input(
    mock: MockResponsesAPI, strategy: str
) -> None:
    state, agent = state_for(mock, strategy), agent_for(mock)
    task = asyncio.ensure_future(state.run(agent, "first words"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await state.run(agent, "second words")
    assert history(mock, state)[:2] == ["user: first words", "user: second words"]


def rewriting(data: CallModelData[Any]) -> ModelInputData:
    """Returns new item objects: user text upper-cased, everything else copied."""
    items = []
    for item in data.model_data.input:
        copy = dict(item)  # type: ignore[call-overload]
        if copy.get("role") == "user" and isinstance(copy.get("content"), str):
            copy["content"] = copy["content"].upper()
        items.append(copy)
    return ModelInputData(input=items, instructions=data.model_data.instructions)


@SERVER
@STREAMED
async def test_a_rewriting_filter_sends_the_user_message_once_on_both_paths(
    strategy: str, streamed: bool
) -> None:
    wires = []
    for path in ("state.run", "Runner+run_config"):
        async with MockResponsesAPI() as mock:
            mock.enqueue(Reply.tool_call("get_weather", {"city": "Oslo"}), Reply.text("done"))
            state, agent = state_for(mock, strategy), agent_for(mock)
            config = RunConfig(call_model_input_filter=rewriting)
            if path == "state.run":
                await run_turn(state, agent, "weather?", streamed=streamed, run_config=config)
            elif streamed:
                bound, run_config = state.bind(agent), state.run_config(config)
                result = Runner.run_streamed(bound, "weather?", run_config=run_config)
                async for _ in result.stream_events():
                    pass
            else:
                await Runner.run(state.bind(agent), "weather?", run_config=state.run_config(config))
            assert history(mock, state).count("user: WEATHER?") == 1, path
            wires.append([wire(body)[2] for body in mock.response_requests])
            no_400(mock)
    assert wires[0] == wires[1]


@SERVER
async def test_two_runs_at_once_on_one_state_are_refused(
    mock: MockResponsesAPI, strategy: str
) -> None:
    mock.enqueue(Reply.text("slow", delay=0.05))
    state, agent = state_for(mock, strategy), agent_for(mock)
    first = asyncio.ensure_future(state.run(agent, "one"))
    await asyncio.sleep(0.01)
    with pytest.raises(RunInProgressError):
        await state.run(agent, "two")
    with pytest.raises(RunInProgressError):
        state.run_streamed(agent, "three")
    assert (await first).final_output == "slow"
    assert len(mock.response_requests) == 1
    await state.run(agent, "four")  # the state is free again
    assert history(mock, state) == [
        "user: one",
        "assistant: slow",
        "user: four",
        "assistant: echo: four",
    ]


async def test_a_streamed_run_holds_the_state_until_it_ends(mock: MockResponsesAPI) -> None:
    state, agent = state_for(mock, "previous_response"), agent_for(mock)
    result = state.run_streamed(agent, "one")
    with pytest.raises(RunInProgressError):
        await state.run(agent, "two")
    async for _ in result.stream_events():
        pass
    await state.run(agent, "two")
    assert len(mock.response_requests) == 2


async def test_an_as_tool_sub_run_is_not_a_second_run(mock: MockResponsesAPI) -> None:
    helper = Agent(name="helper", model=mock.model())
    tool = helper.as_tool(tool_name="ask_helper", tool_description="Ask the helper.")
    agent = Agent(name="main", model=mock.model(), tools=[tool])
    mock.enqueue(
        Reply.tool_call("ask_helper", {"input": "hi"}), Reply.text("sub"), Reply.text("ok")
    )
    state = state_for(mock, "previous_response")
    result = await state.run(agent, "go")
    assert result.final_output == "ok"
    assert wire(mock.response_requests[1])[0] is None  # the sub-run went through untouched


@SERVER
@pytest.mark.parametrize("how", ["run_config", "bound"])
async def test_a_session_beside_run_config_is_refused_before_any_request(
    mock: MockResponsesAPI, strategy: str, how: str
) -> None:
    state, agent = state_for(mock, strategy), agent_for(mock)
    if how == "bound":
        agent = state.bind(agent)
    session = SQLiteSession("s1")
    with pytest.raises(MixedStateOwnerError, match="session"):
        await Runner.run(agent, "hi", session=session, run_config=state.run_config())
    with pytest.raises(MixedStateOwnerError, match="session"):
        result = Runner.run_streamed(agent, "hi", session=session, run_config=state.run_config())
        async for _ in result.stream_events():
            pass
    assert mock.response_requests == []
    assert await session.get_items() == []


async def test_dumps_while_a_conversation_request_is_in_flight_is_reconciled(
    mock: MockResponsesAPI,
) -> None:
    state, agent = state_for(mock, "conversation"), agent_for(mock)
    mock.enqueue(Reply.text("answer", delay=0.02))
    result = state.run_streamed(agent, "question")
    blob = None
    async for event in result.stream_events():
        if blob is None and event.type == "raw_response_event":
            blob = state.dumps(result)  # the request is in flight
    assert blob is not None
    restored, _ = await ConversationState.loads(agent_for(mock), blob)
    await restored.run(agent_for(mock), "next")
    assert history(mock, restored) == [
        "user: question",
        "assistant: answer",
        "user: next",
        "assistant: echo: next",
    ]
    no_400(mock)


@STREAMED
async def test_dumps_of_an_older_result_after_a_failed_run_restores_soundly(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state, agent = state_for(mock, "previous_response"), agent_for(mock)
    good = await run_turn(state, agent, "hello", streamed=streamed)
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Oslo"}, call_id="call_o"))
    mock.inject(Fault.delay(0))
    mock.inject(Fault.status(500))  # the request carrying the tool output fails
    with pytest.raises(Exception, match=r"boom|500"):
        await run_turn(state, agent, "weather?", streamed=streamed)
    restored, _ = await ConversationState.loads(agent, state.dumps(good))
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Oslo"}, call_id="call_o2"))
    await run_turn(restored, agent, "again", streamed=streamed)
    lines = history(mock, restored)
    assert lines.count("user: weather?") == 1 and lines.count("user: again") == 1
    assert lines[0:2] == ["user: hello", "assistant: echo: hello"]
    no_400(mock)


@STREAMED
async def test_an_expired_previous_response_is_a_typed_error_and_reseed_continues(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state, agent = state_for(mock, "previous_response"), agent_for(mock)
    first = await run_turn(state, agent, "hello", streamed=streamed)
    mock.expire_response()
    with pytest.raises(PreviousResponseNotFoundError) as caught:
        await run_turn(state, agent, "still there?", streamed=streamed)
    error = caught.value
    assert isinstance(error, StateExtError) and error.previous_response_id == "resp_1"
    assert [i.get("content") for i in error.pending] == ["still there?"]
    state.reseed(first.to_input_list())
    await run_turn(state, agent, "and now?", streamed=streamed)
    assert wire(mock.response_requests[-1]) == (
        None,
        None,
        ["user:hello", "assistant:echo: hello", "user:still there?", "user:and now?"],
    )
    assert history(mock, state)[-1] == "assistant: echo: and now?"


async def test_reseed_is_for_the_previous_response_strategy(mock: MockResponsesAPI) -> None:
    with pytest.raises(ValueError, match="new conversation"):
        state_for(mock, "conversation").reseed([])
    with pytest.raises(ValueError, match="server strategy"):
        ConversationState.replay().reseed([])


@STREAMED
async def test_a_retry_within_the_run_after_an_unheard_commit_gets_the_stored_answer(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    """Conversation strategy, SDK retries on: the server committed the answer, the client got a
    500; the retry is answered from the reconciled conversation, not by asking the model again."""
    from agents import ModelSettings
    from agents.retry import ModelRetrySettings, retry_policies

    retry = ModelRetrySettings(max_retries=2, policy=retry_policies.provider_suggested())
    agent = agent_for(mock, model_settings=ModelSettings(retry=retry))
    state = state_for(mock, "conversation")
    mock.enqueue(Reply.text("the answer"))
    mock.inject(Fault.status(500, commit=True))
    result = await run_turn(state, agent, "question", streamed=streamed)
    assert result.final_output == "the answer"
    assert history(mock, state) == ["user: question", "assistant: the answer"]
    assert len(mock.response_requests) == 1  # the retry needed no second request
    no_400(mock)
