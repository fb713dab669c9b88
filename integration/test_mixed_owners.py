"""Every mixed configuration of state owners is rejected before any HTTP request; valid ones run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    SQLiteSession,
    function_tool,
)
from agents.exceptions import UserError

from agents_state_ext import ConversationState, MixedStateOwnerError, validate_run_settings
from agents_state_ext.testing import MockResponsesAPI, Reply

from ._support import STREAMED, run_turn, runner_turn, wire

pytestmark = pytest.mark.anyio


Setup = tuple[ConversationState, Agent[Any], Any, dict[str, Any]]
Case = Callable[[MockResponsesAPI], Setup]


def agent_for(mock: MockResponsesAPI, **settings: Any) -> Agent[Any]:
    return Agent(name="a", model=mock.model(), model_settings=ModelSettings(**settings))


def chained(**kwargs: Any) -> Case:
    return lambda m: (ConversationState.previous_response("resp_0"), agent_for(m), "hi", kwargs)


def in_conversation(**kwargs: Any) -> Case:
    return lambda m: (ConversationState.conversation("conv_x"), agent_for(m), "hi", kwargs)


def with_session(**kwargs: Any) -> Case:
    return lambda m: (ConversationState.session(SQLiteSession("s")), agent_for(m), "hi", kwargs)


def replayed(**kwargs: Any) -> Case:
    return lambda m: (ConversationState.replay(), agent_for(m), "hi", kwargs)


def chat_completions(
    m: MockResponsesAPI,
) -> Setup:
    model = OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=m.client())
    return ConversationState.previous_response(), Agent(name="a", model=model), "hi", {}


def chat_completions_handoff(m: MockResponsesAPI) -> Setup:
    model = OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=m.client())
    target = Agent(name="legacy", model=model)
    agent = Agent(name="a", model=m.model(), handoffs=[target])
    return ConversationState.conversation("conv_x"), agent, "hi", {}


def store_false_on_agent(
    m: MockResponsesAPI,
) -> Setup:
    return ConversationState.previous_response(), agent_for(m, store=False), "hi", {}


def conversation_store_false_on_agent(m: MockResponsesAPI) -> Setup:
    return ConversationState.conversation("conv_x"), agent_for(m, store=False), "hi", {}


def conversation_store_false_in_run_config(m: MockResponsesAPI) -> Setup:
    config = RunConfig(model_settings=ModelSettings(store=False))
    return ConversationState.conversation("conv_x"), agent_for(m), "hi", {"run_config": config}


def store_false_in_run_config(m: MockResponsesAPI) -> Setup:
    config = RunConfig(model_settings=ModelSettings(store=False))
    return ConversationState.previous_response(), agent_for(m), "hi", {"run_config": config}


MIXED: dict[str, Case] = {
    "previous_response + previous_response_id": chained(previous_response_id="resp_other"),
    "previous_response + same previous_response_id": chained(previous_response_id="resp_0"),
    "previous_response + conversation_id": chained(conversation_id="conv_1"),
    "previous_response + auto_previous_response_id": chained(auto_previous_response_id=True),
    "previous_response + session": chained(session=SQLiteSession("x")),
    "conversation + previous_response_id": in_conversation(previous_response_id="resp_1"),
    "conversation + conversation_id": in_conversation(conversation_id="conv_y"),
    "conversation + session": in_conversation(session=SQLiteSession("x")),
    "session + previous_response_id": with_session(previous_response_id="resp_1"),
    "session + conversation_id": with_session(conversation_id="conv_1"),
    "session + auto_previous_response_id": with_session(auto_previous_response_id=True),
    "session + another session": with_session(session=SQLiteSession("y")),
    "replay + previous_response_id": replayed(previous_response_id="resp_1"),
    "replay + conversation_id": replayed(conversation_id="conv_1"),
    "replay + session": replayed(session=SQLiteSession("x")),
    "previous_response + chat completions model": chat_completions,
    "conversation + chat completions handoff target": chat_completions_handoff,
    "previous_response + store=False on the agent": store_false_on_agent,
    "previous_response + store=False in RunConfig": store_false_in_run_config,
    "conversation + store=False on the agent": conversation_store_false_on_agent,
    "conversation + store=False in RunConfig": conversation_store_false_in_run_config,
}


@STREAMED
@pytest.mark.parametrize("case", list(MIXED), ids=list(MIXED))
async def test_mixed_configuration_is_rejected_before_any_request(
    mock: MockResponsesAPI, streamed: bool, case: str
) -> None:
    state, agent, input, kwargs = MIXED[case](mock)
    with pytest.raises(MixedStateOwnerError) as raised:
        await run_turn(state, agent, input, streamed=streamed, **kwargs)
    assert "two owners" in str(raised.value) or "state" in str(raised.value)
    assert isinstance(raised.value, UserError)  # what the SDK raises for a bad configuration
    assert mock.requests == []


@STREAMED
async def test_replayed_history_under_a_server_owner_is_rejected(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state = ConversationState.previous_response()
    agent = agent_for(mock)
    mock.enqueue(Reply.text("hello"))
    first = await run_turn(state, agent, "hi", streamed=streamed)
    replay = [*first.to_input_list(), {"role": "user", "content": "again"}]
    with pytest.raises(MixedStateOwnerError, match="already on the server"):
        await run_turn(state, agent, replay, streamed=streamed)
    assert len(mock.requests) == 1


@STREAMED
async def test_a_run_state_from_another_conversation_is_rejected(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    @function_tool(needs_approval=True)
    def delete_all() -> str:
        """Delete everything."""
        return "deleted"

    agent = Agent(name="a", model=mock.model(), tools=[delete_all])
    first = ConversationState.previous_response()
    mock.enqueue(Reply.tool_call("delete_all", {}))
    interrupted = await run_turn(first, agent, "clean up", streamed=streamed)
    assert interrupted.interruptions
    other = ConversationState.previous_response("resp_elsewhere")
    before = len(mock.requests)
    with pytest.raises(MixedStateOwnerError, match="another conversation"):
        await run_turn(other, agent, interrupted.to_state(), streamed=streamed)
    assert len(mock.requests) == before


def test_validate_run_settings_on_its_own() -> None:
    with pytest.raises(MixedStateOwnerError, match="session"):
        validate_run_settings(session=SQLiteSession("s"), previous_response_id="resp_1")
    with pytest.raises(MixedStateOwnerError, match="Conversations API"):
        validate_run_settings(conversation_id="conv_1", previous_response_id="resp_1")
    with pytest.raises(MixedStateOwnerError, match="Conversations API"):
        validate_run_settings(conversation_id="conv_1", auto_previous_response_id=True)
    validate_run_settings(previous_response_id="resp_1")
    validate_run_settings(session=SQLiteSession("s"))
    validate_run_settings(ConversationState.replay(), input=[{"role": "user", "content": "x"}])


@pytest.mark.parametrize("strategy", ["previous_response", "conversation"])
def test_run_config_rejects_store_false_under_a_server_owner(strategy: str) -> None:
    state = (
        ConversationState.previous_response()
        if strategy == "previous_response"
        else ConversationState.conversation("conv_1")
    )
    with pytest.raises(MixedStateOwnerError, match="store=False"):
        state.run_config(RunConfig(model_settings=ModelSettings(store=False)))
    ConversationState.replay().run_config(RunConfig(model_settings=ModelSettings(store=False)))


VALID = ["replay", "session", "previous_response", "conversation"]


@STREAMED
@pytest.mark.parametrize("strategy", VALID)
async def test_each_valid_configuration_runs(
    mock: MockResponsesAPI, streamed: bool, strategy: str
) -> None:
    agent = agent_for(mock)
    if strategy == "replay":
        state = ConversationState.replay()
    elif strategy == "session":
        state = ConversationState.session(SQLiteSession("valid"))
    elif strategy == "previous_response":
        state = ConversationState.previous_response()
    else:
        state = ConversationState.conversation(mock.create_conversation())
    mock.enqueue(Reply.text("one"), Reply.text("two"))
    first = await run_turn(state, agent, "hi", streamed=streamed)
    follow = "again"
    if strategy == "replay":
        follow = [*first.to_input_list(), {"role": "user", "content": "again"}]  # type: ignore[assignment]
    second = await run_turn(state, agent, follow, streamed=streamed)
    assert second.final_output == "two"
    _, _, sent = wire(mock.response_requests[-1])
    if strategy in ("replay", "session"):
        assert sent == ["user:hi", "assistant:one", "user:again"]
    else:
        assert sent == ["user:again"]


@STREAMED
@pytest.mark.parametrize("direct", [False, True], ids=["state.run", "Runner+run_config"])
async def test_output_guardrails_anywhere_in_the_graph_are_rejected_under_server_state(
    mock: MockResponsesAPI, streamed: bool, direct: bool
) -> None:
    from agents import GuardrailFunctionOutput, Runner, output_guardrail

    @output_guardrail
    async def polite(ctx: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)

    target = Agent(name="target", model=mock.model(), output_guardrails=[polite])
    agent = Agent(name="front", model=mock.model(), handoffs=[target])
    state = ConversationState.previous_response()
    with pytest.raises(MixedStateOwnerError, match="output guardrails on agent 'target'"):
        if not direct:
            await run_turn(state, agent, "hi", streamed=streamed)
        elif streamed:
            result = Runner.run_streamed(state.bind(agent), "hi", run_config=state.run_config())
            async for _ in result.stream_events():
                pass
        else:
            await Runner.run(state.bind(agent), "hi", run_config=state.run_config())
    assert mock.requests == []


@STREAMED
@pytest.mark.parametrize("refusal", ["mixed_owner", "filter_shape"])
async def test_an_sdk_apps_except_user_error_around_runner_catches_the_refusals(
    mock: MockResponsesAPI, streamed: bool, refusal: str
) -> None:
    """``Runner`` with ``state.run_config()``: what the library refuses inside the SDK's run is
    a ``UserError`` there, as the SDK's own refusals of the same kind are."""
    from agents.run_config import ModelInputData

    state = ConversationState.previous_response()
    kwargs: dict[str, Any] = {}
    if refusal == "mixed_owner":
        kwargs["previous_response_id"] = "resp_someone_elses"
        config = state.run_config()
    else:
        config = state.run_config(RunConfig(call_model_input_filter=lambda data: ModelInputData))
    agent = state.bind(agent_for(mock))
    caught: list[BaseException] = []
    try:
        await runner_turn(agent, "hi", streamed=streamed, run_config=config, **kwargs)
    except UserError as error:  # the app's handler, written for the SDK alone
        caught.append(error)
    assert [type(e).__name__ for e in caught] == (
        ["MixedStateOwnerError"] if refusal == "mixed_owner" else ["InputFilterError"]
    )
    assert mock.requests == []
