"""One stable ``prompt_cache_key`` per conversation under replay and session (defect 3).

The plain SDK sends a new key every run when it has no conversation, session or group id to
derive one from; a replayed conversation has none, so it would defeat prompt caching for the
strategy that resends the most tokens.
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, ModelSettings, RunConfig, Runner

from agents_state_ext import ConversationState, InMemoryStore, open_conversation
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI

from ._support import STREAMED, run_turn

pytestmark = pytest.mark.anyio
CLIENT = pytest.mark.parametrize("strategy", ["replay", "session"])


def keys(mock: MockResponsesAPI) -> list[str | None]:
    return [body.get("prompt_cache_key") for body in mock.response_requests]


@STREAMED
async def test_the_plain_sdk_sends_a_new_key_every_run_without_a_session(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    for text in ("one", "two"):
        if streamed:
            result = Runner.run_streamed(agent, text)
            async for _ in result.stream_events():
                pass
        else:
            await Runner.run(agent, text)
    first, second = keys(mock)
    assert first and second and first != second


@STREAMED
async def test_a_replayed_conversation_sends_one_key_and_another_conversation_another(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    state, other = ConversationState.replay(), ConversationState.replay()
    history: list[Any] = []
    for text in ("one", "two", "three"):
        result = await run_turn(
            state, agent, [*history, {"role": "user", "content": text}], streamed=streamed
        )
        history = result.to_input_list()
    await Runner.run(agent, "four", run_config=state.run_config())  # Runner yourself: the same
    await run_turn(other, agent, "elsewhere", streamed=streamed)
    *mine, theirs = keys(mock)
    assert len(set(mine)) == 1 and mine[0] is not None
    assert theirs is not None and theirs != mine[0]


@STREAMED
async def test_a_key_or_group_the_user_set_wins(mock: MockResponsesAPI, streamed: bool) -> None:
    settings = ModelSettings(extra_args={"prompt_cache_key": "mine"})
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"), model_settings=settings)
    await run_turn(ConversationState.replay(), agent, "one", streamed=streamed)
    plain = Agent(name="assistant", model=mock.model("gpt-4.1"))
    grouped = RunConfig(group_id="my-group")
    await run_turn(ConversationState.replay(), plain, "two", streamed=streamed, run_config=grouped)
    await Runner.run(plain, "three", run_config=RunConfig(group_id="my-group"))
    assert keys(mock)[0] == "mine"
    assert keys(mock)[1] == keys(mock)[2]  # the SDK's key for the user's group, unchanged


@CLIENT
@STREAMED
async def test_a_chat_keeps_one_key_per_branch_family(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    async def chat_for(system: str | None) -> Any:
        agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
        options: dict[str, Any] = {"strategy": strategy, "counter": FixedTokenCounter()}
        return await open_conversation(InMemoryStore(), agent=agent, system=system, **options)

    chat = await chat_for(None)
    first = await chat.send("hi", stream=streamed)
    second = await chat.send("more", stream=streamed)
    await chat.retry(stream=streamed)
    await chat.edit(second.user_id, "other", stream=streamed)  # shares "hi": same family
    same = keys(mock)
    await chat.edit(first.user_id, "hello", stream=streamed)  # shares nothing: its own key
    await chat.send("and then", stream=streamed)
    own = keys(mock)[len(same) :]
    assert len(set(same)) == 1 and same[0] is not None
    assert len(set(own)) == 1 and own[0] not in same

    with_system = await chat_for("be brief")  # every branch shares the system message
    start = len(keys(mock))
    reply = await with_system.send("hi", stream=streamed)
    await with_system.edit(reply.user_id, "hello", stream=streamed)
    theirs = keys(mock)[start:]
    assert len(set(theirs)) == 1 and theirs[0] not in (*same, *own)
