"""Contract tests for every private Agents SDK name agents-state-ext touches (see _compat.py).

Each test checks a name and what we rely on it meaning, on the installed SDK; ``.ci/run`` runs
this file against every supported minor. A failure names the SDK version and the private name:
update ``agents_state_ext/_compat.py`` and the ``openai-agents`` range in ``pyproject.toml``
(and ``_compat.SUPPORTED_SDK``) together.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrail,
    InputGuardrailTripwireTriggered,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunContextWrapper,
    Runner,
    RunState,
    function_tool,
    handoff,
    set_tracing_disabled,
)
from agents.models import _retry_runtime, _run_context
from agents.models.interface import Model
from openai import APIStatusError, AsyncOpenAI

from agents_state_ext import StateExtError, _compat
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio
STREAMED = pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])

set_tracing_disabled(True)


def broken(name: str, what: str) -> str:
    """The failure message: which SDK, which private name, what no longer holds."""
    return f"openai-agents {_compat.SDK_VERSION}: {name} {what} (agents_state_ext/_compat.py)"


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


class ProbeModel(OpenAIResponsesModel):
    """A Responses model that notes the run owner the SDK sets around each call and at cleanup."""

    def __init__(self, mock: MockResponsesAPI) -> None:
        super().__init__(model="gpt-4.1", openai_client=mock.client())
        self.call_owners: list[object | None] = []
        self.cleanup_owners: list[object] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        self.call_owners.append(_compat.current_run_owner())
        return await super().get_response(*args, **kwargs)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        self.call_owners.append(_compat.current_run_owner())
        async for event in super().stream_response(*args, **kwargs):
            yield event

    async def _cleanup_on_run_end(self, owner: object) -> None:
        self.cleanup_owners.append(owner)
        await super()._cleanup_on_run_end(owner)


async def trip(context: Any, agent: Agent[Any], given: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)


async def run(agent: Agent[Any], streamed: bool, text: str = "hi", **kwargs: Any) -> Any:
    if not streamed:
        return await Runner.run(agent, text, **kwargs)
    result = Runner.run_streamed(agent, text, **kwargs)
    async for _ in result.stream_events():
        pass
    return result


def test_every_private_name_compat_uses_is_in_the_installed_sdk() -> None:
    problems = _compat.contract_problems()
    assert problems == [], "\n".join(problems)


def test_a_missing_private_name_is_reported_with_the_sdk_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    renamed = (*_compat.PRIVATE_NAMES, (RunState, "_renamed_field"))
    monkeypatch.setattr(_compat, "PRIVATE_NAMES", renamed)
    [problem] = _compat.contract_problems()
    assert f"openai-agents {_compat.SDK_VERSION}: RunState._renamed_field is missing" in problem
    assert _compat.SUPPORTED_SDK in problem


def test_a_private_name_gone_at_first_use_raises_a_typed_error() -> None:
    with pytest.raises(_compat.SDKContractError) as raised:
        _compat.run_state_is_chained(SimpleNamespace())  # type: ignore[arg-type]
    assert isinstance(raised.value, StateExtError)
    assert raised.value.name == "RunState._auto_previous_response_id"
    assert f"openai-agents {_compat.SDK_VERSION}: " in str(raised.value)


def test_a_private_name_of_another_shape_raises_a_typed_error() -> None:
    state: RunState[Any] = RunState(
        context=RunContextWrapper(context=None),
        original_input="hi",
        starting_agent=Agent(name="a"),
        max_turns=5,
    )
    state._current_turn = "2"  # type: ignore[assignment]
    with pytest.raises(_compat.SDKContractError, match=r"RunState\._current_turn holds a str"):
        _compat.repair_turn_count(state)


@STREAMED
async def test_the_run_owner_is_one_object_per_run_and_the_cleanup_hook_gets_it(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    model = ProbeModel(mock)
    agent = Agent(name="assistant", model=model, tools=[get_weather])
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}), Reply.text("Sunny."))
    await run(agent, streamed)
    mock.enqueue(Reply.text("Again."))
    await run(agent, streamed)

    first, second, third = model.call_owners
    name = "agents.models._run_context.get_model_run_owner"
    assert first is not None, broken(name, "is None inside a model call")
    assert first is second, broken(name, "changed between two model calls of one run")
    assert third is not first, broken(name, "is the same object for two runs")
    assert _compat.current_run_owner() is None, broken(name, "is set outside a run")
    hook = "Model._cleanup_on_run_end"
    assert model.cleanup_owners == [first, third], broken(hook, "is not called with the owner")


def test_the_run_owner_is_the_sdk_contextvar() -> None:
    owner = object()
    with _run_context.model_run_context(owner):
        assert _compat.current_run_owner() is owner
    assert _compat.current_run_owner() is None


def test_model_cleanup_hook_is_a_coroutine_taking_the_owner() -> None:
    hook = Model._cleanup_on_run_end
    name = "Model._cleanup_on_run_end"
    assert inspect.iscoroutinefunction(hook), broken(name, "is not a coroutine function")
    parameters = list(inspect.signature(hook).parameters)
    assert parameters == ["self", "owner"], broken(name, f"takes {parameters}")


def test_provider_retries_disabled_sets_the_sdk_flag() -> None:
    name = "agents.models._retry_runtime.provider_managed_retries_disabled"
    assert _retry_runtime.should_disable_provider_managed_retries() is False
    with _compat.provider_retries_disabled():
        flag = _retry_runtime.should_disable_provider_managed_retries()
        assert flag is True, broken(name, "does not disable the provider's retries")
    assert _retry_runtime.should_disable_provider_managed_retries() is False


async def test_the_default_prompt_cache_key_goes_to_official_openai_models_only() -> None:
    name = "OpenAIResponsesModel._supports_default_prompt_cache_key"
    async with (
        AsyncOpenAI(api_key="sk-test") as official,
        AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1") as elsewhere,
    ):
        for model_class in (OpenAIResponsesModel, OpenAIChatCompletionsModel):
            model = model_class(model="gpt-4.1", openai_client=official)
            assert _compat.supports_default_prompt_cache_key(model) is True, broken(name, "False")
            model = model_class(model="gpt-4.1", openai_client=elsewhere)
            assert _compat.supports_default_prompt_cache_key(model) is False, broken(name, "True")
    # A model the SDK does not know gets no default key, as from the SDK itself.
    assert _compat.supports_default_prompt_cache_key(object()) is False


@STREAMED
async def test_the_sdk_sends_its_default_prompt_cache_key_exactly_when_compat_says(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    model = mock.model("gpt-4.1")
    mock.enqueue(Reply.text("Hello!"))
    await run(Agent(name="assistant", model=model), streamed)
    sent = "prompt_cache_key" in mock.response_requests[-1]
    name = "agents.run_internal.prompt_cache_key._model_supports_default_prompt_cache_key"
    assert sent is _compat.supports_default_prompt_cache_key(model), broken(name, "disagrees")


async def test_the_inner_client_is_the_one_the_sdk_model_talks_through() -> None:
    name = "OpenAIResponsesModel._get_client"
    async with AsyncOpenAI(api_key="sk-test") as client:
        for model_class in (OpenAIResponsesModel, OpenAIChatCompletionsModel):
            model = model_class(model="gpt-4.1", openai_client=client)
            assert _compat.inner_openai_client(model) is client, broken(name, "another client")
    # A model name or a model of the user's own has no client we know of.
    assert _compat.inner_openai_client("gpt-4.1") is None
    assert _compat.inner_openai_client(object()) is None


@pytest.mark.parametrize("ending", ["server_error", "input_guardrail"])
async def test_the_exception_a_stream_ended_with_is_the_stored_one(
    mock: MockResponsesAPI, ending: str
) -> None:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    if ending == "server_error":
        mock.inject(Fault.status(500))
        expected: type[Exception] = APIStatusError
    else:
        agent.input_guardrails = [InputGuardrail(guardrail_function=trip)]
        mock.enqueue(Reply.text("Hello!", delay=0.2))
        expected = InputGuardrailTripwireTriggered
    result = Runner.run_streamed(agent, "hi")
    with pytest.raises(expected) as raised:
        async for _ in result.stream_events():
            pass
    stored = _compat.stored_stream_exception(result)
    name = "RunResultStreaming._stored_exception"
    assert stored is raised.value, broken(name, f"holds {stored!r}, not what the stream raised")


async def test_a_finished_stream_stores_no_exception(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.text("Hello!"))
    result = await run(Agent(name="assistant", model=mock.model("gpt-4.1")), streamed=True)
    assert _compat.stored_stream_exception(result) is None


@pytest.mark.parametrize("owner", ["previous_response_id", "auto", "conversation_id"])
async def test_run_state_ids_and_chaining_survive_the_sdk_json_round_trip(
    mock: MockResponsesAPI, owner: str
) -> None:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    mock.enqueue(Reply.text("Hello!"), Reply.text("Again."))
    first = await Runner.run(agent, "hi")
    if owner == "conversation_id":
        kwargs: dict[str, Any] = {"conversation_id": mock.create_conversation()}
    else:
        kwargs = {"previous_response_id": first.last_response_id}
        kwargs["auto_previous_response_id"] = owner == "auto"
    result = await Runner.run(agent, "again", **kwargs)
    if owner == "conversation_id":
        expected_ids = (None, kwargs["conversation_id"])
    else:
        expected_ids = (result.last_response_id, None)
    for state in (
        result.to_state(),
        await RunState.from_string(agent, result.to_state().to_string()),
    ):
        ids = _compat.run_state_ids(state)  # where the SDK would continue from
        assert ids == expected_ids, broken(
            "RunState._previous_response_id/_conversation_id", f"{ids}"
        )
        chained = _compat.run_state_is_chained(state)
        assert chained is (owner == "auto"), broken("RunState._auto_previous_response_id", "")


def test_repair_turn_count_lowers_the_turn_the_sdk_serializes() -> None:
    state: RunState[Any] = RunState(
        context=RunContextWrapper(context=None),
        original_input="hi",
        starting_agent=Agent(name="a"),
        max_turns=5,
        conversation_id=None,
        previous_response_id="resp_1",
    )
    assert _compat.run_state_ids(state) == ("resp_1", None)
    state._current_turn = 2
    _compat.repair_turn_count(state)
    turn = state.to_json()["current_turn"]
    assert turn == 0, broken("RunState._current_turn", f"is not what to_json() writes ({turn})")


def test_handoff_keeps_a_weak_reference_to_its_target() -> None:
    target = Agent(name="target")
    made = handoff(target)
    assert _compat.handoff_target(made) is target, broken("Handoff._agent_ref", "another agent")
    made._agent_ref = "target"  # type: ignore[assignment]
    with pytest.raises(_compat.SDKContractError, match=r"Handoff\._agent_ref is not a weak"):
        _compat.handoff_target(made)


async def test_a_run_state_resumes_with_the_agent_it_holds(mock: MockResponsesAPI) -> None:
    @function_tool(needs_approval=True)
    def act() -> str:
        """Act."""
        return "acted"

    paused_agent = Agent(name="a", model=mock.model("gpt-4.1"), tools=[act])
    mock.enqueue(Reply.tool_call("act", {}, call_id="call_1"), Reply.text("done"))
    paused = (await Runner.run(paused_agent, "go")).to_state()
    name = "RunState._current_agent"
    assert _compat.run_state_agent(paused) is paused_agent, broken(name, "is not the run's agent")
    restored = await RunState.from_json(Agent(name="a", tools=[act]), paused.to_json())
    assert _compat.run_state_agent(restored).name == "a", broken(name, "is not found by name")
    paused.approve(paused.get_interruptions()[0])
    other = Agent(name="a", model=mock.model("gpt-4.1"), tools=[act])
    result = await Runner.run(other, paused)
    assert result.last_agent is paused_agent, broken(name, "is not what Runner resumes with")
    paused._current_agent = "a"  # type: ignore[assignment]
    with pytest.raises(_compat.SDKContractError, match=r"RunState\._current_agent holds no"):
        _compat.run_state_agent(paused)


def test_a_tagged_copy_stands_for_the_public_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Agent(name="a")
    copy = original.clone()
    _compat.tag_public_agent(copy, original)
    name = "agents._public_agent.set_public_agent"
    assert _compat.public_agent(copy) is original, broken(name, "does not tag the copy")
    assert _compat.public_agent(original) is original
    from agents import _public_agent

    monkeypatch.setattr(_public_agent, "set_public_agent", lambda copy, original: copy)
    with pytest.raises(_compat.SDKContractError, match=r"set_public_agent does not tag"):
        _compat.tag_public_agent(original.clone(), original)


@STREAMED
async def test_results_and_run_states_name_the_agents_compat_maps(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    ran: list[str] = []
    seen_by_tool: list[object] = []

    def enabled(context: Any, agent: Any) -> bool:
        seen_by_tool.append(agent)
        return True

    @function_tool(needs_approval=True, is_enabled=enabled)
    def act() -> str:
        """Act."""
        ran.append("act")
        return "acted"

    app = Agent(name="a", model=mock.model("gpt-4.1"), tools=[act])
    copy = app.clone()
    _compat.tag_public_agent(copy, app)

    async def run(agent: Agent[Any], input: Any) -> Any:
        if not streamed:
            return await Runner.run(agent, input)
        result = Runner.run_streamed(agent, input)
        async for _ in result.stream_events():
            pass
        return result

    mock.enqueue(Reply.tool_call("act", {}, call_id="call_1"), Reply.text("done"))
    paused = await run(copy, "go")
    # From 0.23 a tool's is_enabled is shown the public agent; before, the run's own object.
    minor = tuple(int(part) for part in _compat.SDK_VERSION.split(".")[:2])
    shown = app if minor >= (0, 23) else copy
    assert seen_by_tool[-1] is shown, broken("set_public_agent", "is not what tools are shown")
    assert paused.last_agent is copy
    _compat.show_public_agents(paused)
    assert paused.last_agent is app, broken("RunResult._last_agent", "is not the last agent")
    assert all(item.agent is app for item in paused.new_items)
    run_state = paused.to_state()
    name = "RunResultBase._starting_agent_for_state"
    current, starting = _compat.run_state_agents(run_state)
    if streamed:
        name = "RunResultStreaming._state"
    assert current is app and starting is app, broken(name, "is not the root")
    approvals = _compat.pending_approvals(run_state)
    name = "RunState._current_step"
    assert [item.raw_item.call_id for item in approvals] == ["call_1"], broken(name, "holds none")
    # Resumed on another copy: the RunState and its approvals name it; the decision holds.
    run_state.approve(run_state.get_interruptions()[0])
    other = app.clone()
    _compat.tag_public_agent(other, app)
    _compat.set_run_state_agents(run_state, other, other)
    for item in approvals:
        _compat.show_item_agents(item, lambda _: other)
    result = await run(app, run_state)
    assert ran == ["act"] and result.final_output == "done", broken(name, "is not resumed")
    assert result.last_agent is other, broken("RunState._current_agent", "is not resumed with")
