"""A ``run_config`` given as a dict, as ``Runner.run`` takes one (issue 29).

The SDK accepts ``run_config={...}`` (a dict of ``RunConfig`` fields). The same dict given to
``ConversationState.run`` / ``run_streamed``, to ``state.run_config()`` and to a chat's
``runner_kwargs`` must reach the wire like a ``RunConfig`` would; a dict with a key that is no
``RunConfig`` field is a ``TypeError`` before anything is sent, as in the SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from _runs import STREAMED, turn
from agents import Agent, ModelSettings, Runner, SQLiteSession

from agents_state_ext import ConversationState, open_conversation
from agents_state_ext.stores import SQLiteStore
from agents_state_ext.testing import MockResponsesAPI

SETTINGS = {"model_settings": ModelSettings(temperature=0.25), "workflow_name": "dict config"}

pytestmark = pytest.mark.anyio

STATES: dict[str, Callable[[MockResponsesAPI], ConversationState]] = {
    "replay": lambda m: ConversationState.replay(),
    "session": lambda m: ConversationState.session(SQLiteSession("dict_config")),
    "previous_response": lambda m: ConversationState.previous_response(),
    "conversation": lambda m: ConversationState.conversation(m.create_conversation()),
}
STRATEGY = pytest.mark.parametrize("strategy", sorted(STATES))


def _second_input(strategy: str, first: Any, text: str) -> Any:
    if strategy == "replay":
        return [*first.to_input_list(), {"role": "user", "content": text}]
    return text


def _user_texts(body: dict[str, Any]) -> list[str]:
    items = body["input"] if isinstance(body["input"], list) else [body["input"]]
    return [
        i if isinstance(i, str) else i["content"]
        for i in items
        if isinstance(i, str) or i.get("role") == "user"
    ]


@STRATEGY
@STREAMED
async def test_a_dict_run_config_reaches_the_wire_like_a_run_config(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    state = STATES[strategy](mock)
    agent = Agent(name="a", model=mock.model("gpt-4.1"))
    first = await turn(state, agent, "one", streamed)
    if streamed:
        second_result = state.run_streamed(
            agent, _second_input(strategy, first, "two"), run_config=dict(SETTINGS)
        )
        async for _ in second_result.stream_events():
            pass
        second = second_result
    else:
        second = await state.run(agent, _second_input(strategy, first, "two"), run_config=SETTINGS)
    assert second.final_output == "echo: two"
    bodies = mock.response_requests
    assert len(bodies) == 2
    assert bodies[1]["temperature"] == 0.25 and "temperature" not in bodies[0]
    # The second request carries the history exactly once, whoever owns it.
    if strategy in ("replay", "session"):
        assert _user_texts(bodies[1]) == ["one", "two"]
    else:
        assert _user_texts(bodies[1]) == ["two"]
    if strategy == "previous_response":
        assert bodies[1]["previous_response_id"] == first.last_response_id
    said = [i["content"][0]["text"] for i in mock.transcript(mock.response_ids[-1])]
    assert said == ["one", "echo: one", "two", "echo: two"]


@STRATEGY
async def test_state_run_config_takes_a_dict_for_runner(
    mock: MockResponsesAPI, strategy: str
) -> None:
    state = STATES[strategy](mock)
    agent = Agent(name="a", model=mock.model("gpt-4.1"))
    config = state.run_config(dict(SETTINGS))
    assert config.model_settings is not None and config.model_settings.temperature == 0.25
    kwargs: dict[str, Any] = {"session": SQLiteSession("runner")} if strategy == "session" else {}
    result = await Runner.run(state.bind(agent), "one", run_config=config, **kwargs)
    assert result.final_output == "echo: one"
    assert mock.response_requests[0]["temperature"] == 0.25


@STRATEGY
@STREAMED
@pytest.mark.parametrize("bad", [{"no_such_setting": 1}, "not a config"], ids=["key", "type"])
async def test_a_bad_dict_is_refused_before_anything_is_sent(
    mock: MockResponsesAPI, strategy: str, streamed: bool, bad: Any
) -> None:
    state = STATES[strategy](mock)
    agent = Agent(name="a", model=mock.model("gpt-4.1"))
    with pytest.raises(TypeError, match="run_config"):
        if streamed:
            state.run_streamed(agent, "one", run_config=bad)
        else:
            await state.run(agent, "one", run_config=bad)
    with pytest.raises(TypeError, match="run_config"):
        state.run_config(bad)
    assert mock.response_requests == []
    # The state is untouched: the next run works and sends the first message once.
    result = await turn(state, agent, "one", streamed)
    assert result.final_output == "echo: one"
    assert [_user_texts(b) for b in mock.response_requests] == [["one"]]


@STREAMED
async def test_a_chat_takes_a_dict_run_config_in_its_runner_kwargs(
    mock: MockResponsesAPI, tmp_path: Any, streamed: bool
) -> None:
    store = SQLiteStore(tmp_path / "chat.sqlite3")
    agent = Agent(name="a", model=mock.model("gpt-4.1"))
    chat = await open_conversation(
        store, agent=agent, strategy="replay", runner_kwargs={"run_config": dict(SETTINGS)}
    )
    answer = await chat.send("hello", stream=streamed)
    assert answer.text == "echo: hello"
    assert mock.response_requests[0]["temperature"] == 0.25
    with pytest.raises(TypeError, match="run_config"):
        await open_conversation(
            store, agent=agent, strategy="replay", runner_kwargs={"run_config": {"nope": 1}}
        )
