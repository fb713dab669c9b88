"""A chat reopened from its store selects its context without counting a stored message again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent

from agents_state_ext import SQLiteStore, TokenCounter
from agents_state_ext.chat import open_conversation
from agents_state_ext.stores import TokenCountStore
from agents_state_ext.stores.memory import InMemoryStore
from agents_state_ext.testing import MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio


def agent_for(mock: MockResponsesAPI) -> Agent[Any]:
    return Agent(name="assistant", model=mock.model("gpt-4.1"))


@pytest.mark.parametrize("strategy", ["replay", "previous_response"])
async def test_a_reopened_chat_counts_only_what_is_new(
    mock: MockResponsesAPI, tmp_path: Path, strategy: str
) -> None:
    path = tmp_path / "chat.db"
    mock.enqueue(*(Reply.text(f"answer number {n}") for n in range(4)))
    async with SQLiteStore(path) as store:
        first = TokenCounter("gpt-4.1")
        chat = await open_conversation(
            store, "c1", strategy=strategy, agent=agent_for(mock), counter=first, system="hi"
        )
        for text in ("one question", "a second question", "a third question"):
            await chat.send(text)
        before = await chat.attempts()

    async with SQLiteStore(path) as store:
        reopened = TokenCounter("gpt-4.1")
        chat = await open_conversation(store, "c1", agent=agent_for(mock), counter=reopened)
        await chat.send("a fourth question")
        record = (await chat.attempts())[-1]
    # Encoded: only the new user message (and, once stored, the new answer) — nothing stored.
    assert reopened.cache_info().misses == 2
    # The trusted counts are the counts the first counter made for the same messages.
    for old in before:
        for message_id, tokens in old.included.items():
            if message_id in record.included:
                assert record.included[message_id] == tokens
    if strategy == "replay":  # the whole history went again, from trusted counts
        assert set(record.included) >= {n for old in before for n in old.included}


async def test_counts_are_stored_per_encoding(mock: MockResponsesAPI) -> None:
    store = InMemoryStore()
    assert isinstance(store, TokenCountStore)
    mock.enqueue(Reply.text("fine"))
    chat = await open_conversation(
        store, "c2", strategy="replay", agent=agent_for(mock), counter=TokenCounter("gpt-4.1")
    )
    await chat.send("how are you")
    counts = await store.get_token_counts("c2", "o200k_base")
    path = chat.active_path()
    assert set(counts) == {n.id for n in path}
    assert all(counts[n.id] == TokenCounter("gpt-4.1").count(n.id, n.items) for n in path)
    assert await store.get_token_counts("c2", "cl100k_base") == {}
