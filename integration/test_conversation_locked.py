"""Two writers on one server conversation: ``400 conversation_locked`` duplicates nothing.

The real API answers a request on a conversation that another request is still running on with
``400 conversation_locked`` (the mock does by default). The Agents SDK retries that code itself;
when its retries are spent the app gets :class:`ConversationLockedError` and the input stays
pending, to go out once with the next run. Both with a plain and a reasoning model.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from agents import Agent, ModelSettings

from agents_state_ext import ConversationLockedError, ConversationState
from agents_state_ext.testing import MockResponsesAPI, RecordedRequest

from ._support import STREAMED, run_turn, texts, wire

pytestmark = pytest.mark.anyio

MODELS = pytest.mark.parametrize("model", ["gpt-4.1", "gpt-5"])


def hold_first_stream(mock: MockResponsesAPI) -> tuple[asyncio.Event, asyncio.Event]:
    """Hold the first streamed answer after its first frame until ``release`` is set."""
    holding, release = asyncio.Event(), asyncio.Event()

    async def hook(request: RecordedRequest, sent: int) -> None:
        if sent == 1 and not holding.is_set():
            holding.set()
            await release.wait()

    mock.frame_hook = hook
    return holding, release


def posts(mock: MockResponsesAPI) -> list[RecordedRequest]:
    return [r for r in mock.requests if r.method == "POST" and r.path == "/responses"]


def locked(mock: MockResponsesAPI) -> list[RecordedRequest]:
    return [r for r in posts(mock) if r.status == 400]


def spoken(items: list[dict[str, Any]]) -> list[str]:
    """The messages of a transcript, reasoning items left out (counted separately)."""
    return [t for t in texts(items) if not t.startswith("reasoning:")]


async def until(check: Any) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


def agent_for(mock: MockResponsesAPI, model: str, **settings: Any) -> Agent[Any]:
    return Agent(
        name="assistant", model=mock.model(model), model_settings=ModelSettings(**settings)
    )


@STREAMED
@MODELS
async def test_a_second_worker_waits_out_the_lock_and_sends_once(
    mock: MockResponsesAPI, streamed: bool, model: str
) -> None:
    conv = mock.create_conversation()
    first, second = ConversationState.conversation(conv), ConversationState.conversation(conv)
    agent = agent_for(mock, model)
    holding, release = hold_first_stream(mock)
    running = asyncio.ensure_future(run_turn(first, agent, "a", streamed=True))
    await holding.wait()
    other = asyncio.ensure_future(run_turn(second, agent, "b", streamed=streamed))
    await until(lambda: locked(mock))
    release.set()
    await running
    result = await other  # the SDK's own retry, a second later, finds the conversation free
    assert result.final_output == "echo: b"
    bodies = mock.response_requests
    assert [wire(b) for b in bodies] == [
        (None, conv, ["user:a"]),
        (None, conv, ["user:b"]),
        (None, conv, ["user:b"]),
    ]
    assert [r.status for r in posts(mock)] == [200, 400, 200]
    assert locked(mock)[0].error is not None and "Another process" in locked(mock)[0].error
    items = mock.conversation_items(conv)
    assert spoken(items) == ["user:a", "assistant:echo: a", "user:b", "assistant:echo: b"]
    reasoning = [i for i in items if i.get("type") == "reasoning"]
    assert len(reasoning) == (2 if model == "gpt-5" else 0)


@STREAMED
@MODELS
async def test_when_the_lock_outlasts_the_retries_the_input_waits_for_the_next_run(
    mock: MockResponsesAPI, streamed: bool, model: str
) -> None:
    retry = pytest.importorskip("agents").__dict__.get("ModelRetrySettings")
    if retry is None:
        pytest.skip("this openai-agents has no ModelRetrySettings to turn its lock retry off")
    conv = mock.create_conversation()
    first, second = ConversationState.conversation(conv), ConversationState.conversation(conv)
    holding, release = hold_first_stream(mock)
    running = asyncio.ensure_future(run_turn(first, agent_for(mock, model), "a", streamed=True))
    await holding.wait()
    impatient = agent_for(mock, model, retry=retry(max_retries=0))
    with pytest.raises(ConversationLockedError) as info:
        await run_turn(second, impatient, "b", streamed=streamed)
    error = info.value
    assert isinstance(error, openai.BadRequestError)
    assert (error.status_code, error.code) == (400, "conversation_locked")
    assert error.param == "conversation"
    assert error.conversation_id == conv
    assert texts(error.pending) == ["user:b"]
    release.set()
    await running
    await run_turn(second, impatient, "c", streamed=streamed)
    assert [wire(b) for b in mock.response_requests] == [
        (None, conv, ["user:a"]),
        (None, conv, ["user:b"]),
        (None, conv, ["user:b", "user:c"]),
    ]
    assert spoken(mock.conversation_items(conv)) == [
        "user:a",
        "assistant:echo: a",
        "user:b",
        "user:c",
        "assistant:echo: c",
    ]
