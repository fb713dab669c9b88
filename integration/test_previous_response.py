"""Real ``Runner`` runs under the previous_response strategy against the stateful mock server."""

from __future__ import annotations

from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    ModelSettings,
    RunConfig,
    Runner,
    function_tool,
    handoff,
    input_guardrail,
)
from agents.exceptions import UserError
from agents.retry import ModelRetrySettings, retry_policies
from agents.run_config import CallModelData, ModelInputData
from openai import APIConnectionError, InternalServerError

from agents_state_ext import ConversationState, InputFilterError, MixedStateOwnerError
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

from ._support import STREAMED, run_turn, texts, wire

pytestmark = pytest.mark.anyio


@function_tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def weather_agent(mock: MockResponsesAPI, **settings: Any) -> Agent[Any]:
    return Agent(
        name="assistant",
        model=mock.model("gpt-4.1"),
        tools=[get_weather],
        model_settings=ModelSettings(**settings),
    )


def retrying(max_retries: int = 2) -> dict[str, Any]:
    policy = retry_policies.provider_suggested()
    return {"retry": ModelRetrySettings(max_retries=max_retries, policy=policy)}


@STREAMED
async def test_first_and_follow_up_turns_send_only_the_new_turn(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state = ConversationState.previous_response()
    agent = weather_agent(mock)
    mock.enqueue(Reply.text("hello!"), Reply.text("again!"))
    await run_turn(state, agent, "hi", streamed=streamed)
    await run_turn(state, agent, "once more", streamed=streamed)

    bodies = mock.response_requests
    assert [wire(b) for b in bodies] == [
        (None, None, ["user:hi"]),
        ("resp_1", None, ["user:once more"]),
    ]
    assert all(b.get("stream", False) is streamed for b in bodies)
    assert state.tracker is not None and state.tracker.previous_response_id == "resp_2"
    assert texts(mock.transcript("resp_2")) == [
        "user:hi",
        "assistant:hello!",
        "user:once more",
        "assistant:again!",
    ]


@STREAMED
async def test_tool_turns_carry_only_new_tool_outputs_and_the_chained_id(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state = ConversationState.previous_response()
    agent = weather_agent(mock)
    mock.enqueue(
        Reply.tool_call("get_weather", {"city": "Paris"}),
        Reply.tool_call("get_weather", {"city": "Rome"}),
        Reply.text("both sunny"),
    )
    result = await run_turn(state, agent, "weather?", streamed=streamed)
    assert result.final_output == "both sunny"
    prev_ids = [b.get("previous_response_id") for b in mock.response_requests]
    inputs = [wire(b)[2] for b in mock.response_requests]
    assert prev_ids == [None, "resp_1", "resp_2"]
    assert inputs[1] == ["function_call_output:" + mock.transcript("resp_1")[-1]["call_id"]]
    assert len(inputs[2]) == 1 and inputs[2][0].startswith("function_call_output:")
    transcript = mock.transcript("resp_3")
    ids = [item["id"] for item in transcript if "id" in item]
    assert len(ids) == len(set(ids))
    assert [t.split(":")[0] for t in texts(transcript)] == [
        "user",
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
        "assistant",
    ]


@STREAMED
async def test_5xx_then_success_retries_the_identical_payload_once_acknowledged(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state = ConversationState.previous_response()
    agent = weather_agent(mock, **retrying())
    mock.enqueue(Reply.text("first"))
    await run_turn(state, agent, "hi", streamed=streamed)
    mock.inject(Fault.status(500))
    mock.enqueue(Reply.text("second"))
    await run_turn(state, agent, "again", streamed=streamed)

    bodies = mock.response_requests
    assert len(bodies) == 3
    assert bodies[1] == bodies[2]
    assert wire(bodies[2]) == ("resp_1", None, ["user:again"])
    assert texts(mock.transcript("resp_2")).count("user:again") == 1


@STREAMED
async def test_network_error_on_a_stateful_request_is_not_blindly_retried(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state = ConversationState.previous_response()
    agent = weather_agent(mock, **retrying())
    mock.enqueue(Reply.text("first"))
    await run_turn(state, agent, "hi", streamed=streamed)
    mock.inject(Fault.connect_error())
    with pytest.raises(APIConnectionError):
        await run_turn(state, agent, "again", streamed=streamed)
    assert len(mock.response_requests) == 2


@STREAMED
async def test_terminal_failure_then_next_run_sends_the_lost_input_exactly_once(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state = ConversationState.previous_response()
    agent = weather_agent(mock)
    mock.enqueue(Reply.text("first"))
    await run_turn(state, agent, "hi", streamed=streamed)
    mock.inject(Fault.status(500))
    with pytest.raises(InternalServerError):
        await run_turn(state, agent, "lost question", streamed=streamed)
    assert state.tracker is not None and state.tracker.pending == [
        {"role": "user", "content": "lost question"}
    ]
    mock.enqueue(Reply.text("answer"))
    await run_turn(state, agent, "hello again", streamed=streamed)
    assert wire(mock.response_requests[-1]) == (
        "resp_1",
        None,
        ["user:lost question", "user:hello again"],
    )
    assert texts(mock.transcript("resp_2")) == [
        "user:hi",
        "assistant:first",
        "user:lost question",
        "user:hello again",
        "assistant:answer",
    ]


@STREAMED
async def test_failure_after_a_tool_call_keeps_the_tool_output_for_the_next_run(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state = ConversationState.previous_response()
    agent = weather_agent(mock)
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}))
    mock.inject(Fault.delay(0))  # the first request goes through
    mock.inject(Fault.status(500))  # the one carrying the tool output fails
    with pytest.raises(InternalServerError):
        await run_turn(state, agent, "weather?", streamed=streamed)
    mock.enqueue(Reply.text("it was sunny"))
    await run_turn(state, agent, "and?", streamed=streamed)
    _, _, sent = wire(mock.response_requests[-1])
    assert sent[0].startswith("function_call_output:") and sent[1] == "user:and?"
    final = mock.transcript(state.tracker.previous_response_id)  # type: ignore[union-attr]
    assert [t.split(":")[0] for t in texts(final)] == [
        "user",
        "function_call",
        "function_call_output",
        "user",
        "assistant",
    ]


@STREAMED
async def test_user_filter_result_is_exactly_what_is_sent_and_marked(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    seen: list[list[str]] = []

    def rewrite(data: CallModelData[Any]) -> ModelInputData:
        seen.append(texts([dict(i) for i in data.model_data.input]))  # type: ignore[arg-type]
        items = [{"role": "user", "content": "[redacted]"}, *reversed(data.model_data.input)]
        return ModelInputData(input=items[:2], instructions=data.model_data.instructions)  # type: ignore[list-item]

    state = ConversationState.previous_response()
    agent = weather_agent(mock)
    config = RunConfig(call_model_input_filter=rewrite)
    mock.enqueue(Reply.text("one"), Reply.text("two"))
    await run_turn(state, agent, "secret", streamed=streamed, run_config=config)
    await run_turn(state, agent, "next", streamed=streamed, run_config=config)
    assert seen == [["user:secret"], ["user:next"]]  # the delta, not the history
    assert [wire(b) for b in mock.response_requests] == [
        (None, None, ["user:[redacted]", "user:secret"]),
        ("resp_1", None, ["user:[redacted]", "user:next"]),
    ]
    assert state.tracker is not None and state.tracker.pending == []


@STREAMED
@pytest.mark.parametrize("bad", ["tuple", "dict"])
async def test_filter_returning_a_bad_shape_raises_and_sends_nothing(
    mock: MockResponsesAPI, streamed: bool, bad: str
) -> None:
    async def broken(data: CallModelData[Any]) -> Any:
        if bad == "tuple":
            return ModelInputData(input=tuple(data.model_data.input), instructions=None)  # type: ignore[arg-type]
        return {"input": data.model_data.input}

    state = ConversationState.previous_response()
    config = RunConfig(call_model_input_filter=broken)
    with pytest.raises(InputFilterError) as raised:
        await run_turn(state, weather_agent(mock), "hi", streamed=streamed, run_config=config)
    assert isinstance(raised.value, UserError)  # an SDK app's `except UserError` catches it
    assert mock.response_requests == []


@pytest.mark.parametrize("next_streamed", [False, True], ids=["then-plain", "then-streamed"])
async def test_cancelled_stream_keeps_partial_text_and_the_users_input(
    mock: MockResponsesAPI, next_streamed: bool
) -> None:
    state = ConversationState.previous_response()
    agent = weather_agent(mock)
    mock.enqueue(Reply.text("hi"))
    await run_turn(state, agent, "hello", streamed=True)
    mock.enqueue(Reply.text("once upon a time there was a long story", delay=0.05))
    result = state.run_streamed(agent, "tell me a story")
    async for event in result.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            result.cancel()
    partial = state.partial
    assert partial is not None and partial.text.startswith("once") and not partial.completed
    assert partial.response_id is not None and partial.response_id.startswith("resp_")
    mock.enqueue(Reply.text("short one"))
    await run_turn(state, agent, "make it short", streamed=next_streamed)
    assert wire(mock.response_requests[-1]) == (
        "resp_1",
        None,
        ["user:tell me a story", "user:make it short"],
    )
    assert (
        texts(mock.transcript(state.tracker.previous_response_id)).count(  # type: ignore[union-attr]
            "user:tell me a story"
        )
        == 1
    )


@STREAMED
async def test_ids_passed_as_well_raise_before_any_request(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state = ConversationState.previous_response("resp_start")
    agent = weather_agent(mock)
    for kwargs in (
        {"previous_response_id": "resp_other"},
        {"conversation_id": "conv_1"},
        {"auto_previous_response_id": True},
    ):
        with pytest.raises(MixedStateOwnerError):
            await run_turn(state, agent, "hi", streamed=streamed, **kwargs)
    config = state.run_config()
    bound = state.bind(agent)
    for runner_agent, ids in ((bound, {"previous_response_id": "resp_other"}), (agent, {})):
        with pytest.raises(MixedStateOwnerError):
            if streamed:
                result = Runner.run_streamed(runner_agent, "hi", run_config=config, **ids)
                async for _ in result.stream_events():
                    pass
            else:
                await Runner.run(runner_agent, "hi", run_config=config, **ids)
    assert mock.requests == []


@STREAMED
async def test_state_run_and_runner_with_run_config_send_identical_payloads(
    streamed: bool,
) -> None:
    async def conversation(direct: bool) -> list[dict[str, Any]]:
        async with MockResponsesAPI() as api:
            state = ConversationState.previous_response(prompt_cache_key="conv-key")
            agent = weather_agent(api)
            bound = state.bind(agent)
            api.enqueue(
                Reply.text("hello"),
                Reply.tool_call("get_weather", {"city": "Paris"}),
                Reply.text("sunny"),
                Reply.text("bye"),
            )
            for text in ("hi", "weather?", "thanks"):
                if not direct:
                    await run_turn(state, agent, text, streamed=streamed)
                elif streamed:
                    result = Runner.run_streamed(bound, text, run_config=state.run_config())
                    async for _ in result.stream_events():
                        pass
                else:
                    await Runner.run(bound, text, run_config=state.run_config())
            return api.response_requests

    via_state, via_runner = await conversation(False), await conversation(True)
    assert via_state == via_runner
    chain = [b.get("previous_response_id") for b in via_state]
    assert chain == [None, "resp_1", "resp_2", "resp_3"]
    assert {b.get("prompt_cache_key") for b in via_state} == {"conv-key"}


@STREAMED
async def test_own_models_and_handoffs_share_one_ledger_and_as_tool_passes_through(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    helper = Agent(name="helper", model=mock.model("gpt-4.1-mini"), instructions="sub")
    specialist = Agent(name="specialist", model=mock.model("gpt-4.1-nano"))
    triage = Agent(
        name="triage",
        model=mock.model("gpt-4.1"),
        handoffs=[handoff(specialist)],
        tools=[helper.as_tool(tool_name="ask_helper", tool_description="ask")],
    )
    state = ConversationState.previous_response()
    mock.enqueue(
        Reply.tool_call("ask_helper", {"input": "sub question"}),
        Reply.text("sub answer"),  # the helper's own, separate run
        Reply.tool_call("transfer_to_specialist", {}),
        Reply.text("specialist here"),
    )
    result = await run_turn(state, triage, "help me", streamed=streamed)
    assert result.final_output == "specialist here"
    bodies = mock.response_requests
    assert [b["model"] for b in bodies] == ["gpt-4.1", "gpt-4.1-mini", "gpt-4.1", "gpt-4.1-nano"]
    # The as_tool sub-run went out untouched: no chain, only its own question.
    assert wire(bodies[1]) == (None, None, ["user:sub question"])
    # The main run chained through every agent's own model.
    assert [b.get("previous_response_id") for b in (bodies[0], bodies[2], bodies[3])] == [
        None,
        "resp_1",
        "resp_3",
    ]
    assert state.tracker is not None and state.tracker.previous_response_id == "resp_4"
    mock.enqueue(Reply.text("more"))
    await run_turn(state, triage, "thanks", streamed=streamed)
    assert wire(mock.response_requests[-1]) == ("resp_4", None, ["user:thanks"])


@STREAMED
async def test_input_guardrail_trip_drops_the_input_and_restores_the_cursor(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    @input_guardrail
    async def no_forbidden(ctx: Any, agent: Any, value: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(
            output_info=None, tripwire_triggered="FORBIDDEN" in str(value)
        )

    agent = weather_agent(mock).clone(input_guardrails=[no_forbidden])
    state = ConversationState.previous_response()
    mock.enqueue(Reply.text("hello"))
    await run_turn(state, agent, "hi", streamed=streamed)
    mock.enqueue(Reply.text("should not count"))
    with pytest.raises(InputGuardrailTripwireTriggered):
        await run_turn(state, agent, "FORBIDDEN request", streamed=streamed)
    assert state.tracker is not None and state.tracker.previous_response_id == "resp_1"
    assert state.tracker.pending == []
    mock.enqueue(Reply.text("fine"))
    await run_turn(state, agent, "next question", streamed=streamed)
    assert wire(mock.response_requests[-1]) == ("resp_1", None, ["user:next question"])


@STREAMED
async def test_client_mode_with_named_models_matches_state_run_and_blocks_hidden_retries(
    streamed: bool,
) -> None:
    from agents import OpenAIProvider

    async def conversation(direct: bool) -> list[dict[str, Any]]:
        async with MockResponsesAPI() as api:
            # The client retries on its own unless told not to: stateful requests must not be.
            provider = OpenAIProvider(openai_client=api.client(max_retries=2))
            config = RunConfig(model_provider=provider)
            state = ConversationState.previous_response(prompt_cache_key="key")
            agent = Agent(name="named", model="gpt-4.1", tools=[get_weather])
            api.enqueue(
                Reply.tool_call("get_weather", {"city": "Oslo"}),
                Reply.text("cold"),
                Reply.text("bye"),
            )
            for text in ("weather?", "thanks"):
                if not direct:
                    await run_turn(state, agent, text, streamed=streamed, run_config=config)
                elif streamed:
                    result = Runner.run_streamed(agent, text, run_config=state.run_config(config))
                    async for _ in result.stream_events():
                        pass
                else:
                    await Runner.run(agent, text, run_config=state.run_config(config))
            api.inject(Fault.connect_error())
            with pytest.raises(APIConnectionError):
                if direct:
                    await Runner.run(agent, "again", run_config=state.run_config(config))
                else:
                    await run_turn(state, agent, "again", streamed=False, run_config=config)
            return api.response_requests

    via_state, via_runner = await conversation(False), await conversation(True)
    assert via_state == via_runner
    assert [b.get("previous_response_id") for b in via_runner] == [
        None,
        "resp_1",
        "resp_2",
        "resp_3",
    ]
