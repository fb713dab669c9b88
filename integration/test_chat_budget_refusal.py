"""A send, edit or retry over the token budget is refused before anything is stored or sent.

Under every strategy, streamed and not, on gpt-4.1 and on a reasoning model, with the exact
counts of the model's encoding: the refusal is ``ContextOverflowError`` with the counts, no
request reaches the mock, the store (read by a new handle) and the chat in memory are as
before, the same overflowing text refused twice leaves nothing either, and the next action
that fits goes out as if nothing had been refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent

from agents_state_ext import ContextOverflowError, TokenCounter
from agents_state_ext.chat import Attempt, Conversation, open_conversation
from agents_state_ext.stores import export_conversation
from agents_state_ext.testing import MockResponsesAPI, Reply

from ._chat import open_chat
from ._reasoning import STRATEGIES, reasoning_agent
from ._support import STREAMED, texts, wire

pytestmark = pytest.mark.anyio

SYSTEM = "be brief"
LONG = "Tell me everything about " + " ".join(f"topic{i}" for i in range(300))
BUDGET = 120

ALL = pytest.mark.parametrize("strategy", STRATEGIES)
MODELS = pytest.mark.parametrize("model", ["gpt-4.1", "gpt-5"])


def agent_for(mock: MockResponsesAPI, model: str) -> Agent[Any]:
    if model == "gpt-4.1":
        return Agent(name="assistant", model=mock.model(model))
    return reasoning_agent(mock, model=model)


def tokens(model: str, role: str, text: str) -> int:
    """The exact count of one message of ``text``, as the chat's counter makes it."""
    return TokenCounter(model).count_items([{"type": "message", "role": role, "content": text}])


async def answered(act: Callable[[], Attempt], *, streamed: bool) -> Attempt:
    """Start an action and wait for its answer, reading its stream when ``streamed``."""
    attempt = act()
    if streamed:
        async for _ in attempt:
            pass
    return await attempt


async def snapshot(chat: Conversation) -> tuple[Any, ...]:
    """What a new handle reads of the chat, the whole stored document, and the chat in memory."""
    reopened = await open_conversation(chat.store, chat.id, create=False)
    records = [r.to_dict() for r in await reopened.attempts()]
    document = await export_conversation(chat.store, chat.id)
    return reopened.graph.to_dict(), records, document, chat.graph.to_dict()


async def refused(
    chat: Conversation, mock: MockResponsesAPI, act: Callable[[], Attempt], *, streamed: bool
) -> ContextOverflowError:
    """Run ``act`` twice: each time refused, nothing sent, nothing changed; the error."""
    before, sent = await snapshot(chat), len(mock.requests)
    errors = []
    for _ in range(2):  # the same overflowing action again: still nothing of it anywhere
        with pytest.raises(ContextOverflowError) as caught:
            await answered(act, streamed=streamed)
        errors.append(caught.value)
        assert len(mock.requests) == sent
        assert await snapshot(chat) == before
        assert chat.in_flight is None
    first, second = errors
    assert (first.required_tokens, first.message_tokens, first.budget) == (
        second.required_tokens,
        second.message_tokens,
        second.budget,
    )
    return first


def each_once(path_texts: list[str]) -> bool:
    return len(path_texts) == len(set(path_texts))


@ALL
@MODELS
@STREAMED
async def test_an_overflowing_send_is_refused_before_anything_is_stored(
    mock: MockResponsesAPI, strategy: str, model: str, streamed: bool
) -> None:
    chat = await open_chat(
        mock, strategy, agent=agent_for(mock, model), counter=None, budget=BUDGET, fork=True
    )
    mock.enqueue(Reply.text("hello"), Reply.text("fine"))
    await answered(lambda: chat.send("hi", stream=streamed), streamed=streamed)

    error = await refused(chat, mock, lambda: chat.send(LONG, stream=streamed), streamed=streamed)
    message = tokens(model, "user", LONG)
    # The server holds the system message under previous_response; a fork would seed it.
    system = 0 if strategy == "previous_response" else tokens(model, "system", SYSTEM)
    assert (error.required_tokens, error.message_tokens, error.budget) == (
        system + message,
        message,
        BUDGET,
    )
    assert f"over the budget of {BUDGET}" in str(error)

    last = await answered(lambda: chat.send("thanks", stream=streamed), streamed=streamed)
    path = [f"{n.role}:{n.text()}" for n in chat.active_path()]
    assert path == [
        "system:be brief",
        "user:hi",
        "assistant:hello",
        "user:thanks",
        "assistant:fine",
    ]
    assert len(mock.response_requests) == 2
    assert LONG not in str(mock.response_requests)
    record = await chat.record(last.id)
    assert record.response_id is not None
    transcript = texts(mock.transcript(record.response_id))
    assert [t for t in transcript if not t.startswith("reasoning")] == path
    reopened = await open_conversation(chat.store, chat.id, create=False)
    assert [f"{n.role}:{n.text()}" for n in reopened.active_path()] == path
    assert [r.status for r in await reopened.attempts()] == ["complete", "complete"]
    assert len(reopened.graph) == len(path)


@ALL
@MODELS
@STREAMED
async def test_an_overflowing_edit_is_refused_and_the_old_version_stays_valid(
    mock: MockResponsesAPI, strategy: str, model: str, streamed: bool
) -> None:
    chat = await open_chat(
        mock, strategy, agent=agent_for(mock, model), counter=None, budget=BUDGET, fork=True
    )
    mock.enqueue(Reply.text("hello"), Reply.text("sure"), Reply.text("edited"))
    first = await answered(lambda: chat.send("hi", stream=streamed), streamed=streamed)
    second = await answered(lambda: chat.send("more", stream=streamed), streamed=streamed)

    error = await refused(
        chat, mock, lambda: chat.edit(second.user_id, LONG, stream=streamed), streamed=streamed
    )
    assert (error.message_tokens, error.budget) == (tokens(model, "user", LONG), BUDGET)
    assert chat.node(second.id).status == "complete"  # its answer was never marked invalid
    assert chat.node(second.user_id).meta == {}

    edit = await answered(
        lambda: chat.edit(second.user_id, "less", stream=streamed), streamed=streamed
    )
    path = [f"{n.role}:{n.text()}" for n in chat.active_path()]
    assert path == [
        "system:be brief",
        "user:hi",
        "assistant:hello",
        "user:less",
        "assistant:edited",
    ]
    assert [n.status for n in chat.siblings(second.id)] == ["invalid"]
    assert chat.node(second.id).meta["invalidated_by"] == edit.user_id
    assert len(mock.response_requests) == 3
    assert wire(mock.response_requests[-1])[2][-1] == "user:less"
    reopened = await open_conversation(chat.store, chat.id, create=False)
    assert [f"{n.role}:{n.text()}" for n in reopened.active_path()] == path
    assert len(reopened.graph) == 7  # system, two turns, and the edit's turn: each once
    assert [r.message_id for r in await reopened.attempts()] == [first.id, second.id, edit.id]


@ALL
@MODELS
@STREAMED
async def test_an_overflowing_retry_is_refused_and_raising_the_budget_is_the_way_out(
    mock: MockResponsesAPI, strategy: str, model: str, streamed: bool
) -> None:
    chat = await open_chat(
        mock, strategy, agent=agent_for(mock, model), counter=None, budget=BUDGET, fork=True
    )
    mock.enqueue(Reply.text("hello"), Reply.text("again"))
    text = "a question of some twenty words or so, long enough to be over a budget of five"
    first = await answered(lambda: chat.send(text, stream=streamed), streamed=streamed)
    leaf = chat.graph.active_leaf
    await chat.set_budget(5)

    error = await refused(chat, mock, lambda: chat.retry(stream=streamed), streamed=streamed)
    message = tokens(model, "user", text)
    system = tokens(model, "system", SYSTEM)
    assert (error.required_tokens, error.message_tokens, error.budget) == (
        system + message,
        message,
        5,
    )
    assert chat.graph.active_leaf == leaf
    assert [n.id for n in chat.siblings(first.id)] == [first.id]

    await chat.set_budget(BUDGET)
    retry = await answered(lambda: chat.retry(stream=streamed), streamed=streamed)
    assert retry.text == "again"
    assert [n.id for n in chat.siblings(first.id)] == [first.id, retry.id]
    assert len(mock.response_requests) == 2
    reopened = await open_conversation(chat.store, chat.id, create=False)
    assert [r.status for r in await reopened.attempts()] == ["complete", "complete"]
    assert len(reopened.graph) == 4
