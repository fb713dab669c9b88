"""A chat's prompt version is stored with it: every attempt's record carries it, reopened too."""

from __future__ import annotations

from pathlib import Path

import pytest
from agents import Agent

from agents_state_ext import Conversation, SQLiteStore, open_conversation
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI

pytestmark = pytest.mark.anyio


async def reopen(
    mock: MockResponsesAPI, store: SQLiteStore, chat_id: str, prompt_version: str | None = None
) -> Conversation:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    return await open_conversation(
        store,
        chat_id,
        agent=agent,
        counter=FixedTokenCounter(),
        create=False,
        prompt_version=prompt_version,
    )


async def test_the_prompt_version_survives_reopening_and_a_new_one_is_kept(
    mock: MockResponsesAPI, tmp_path: Path
) -> None:
    db = tmp_path / "chat.db"
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    async with SQLiteStore(db) as store:
        chat = await open_conversation(
            store, strategy="replay", agent=agent, counter=FixedTokenCounter(), prompt_version="v1"
        )
        await chat.send("hi")
    async with SQLiteStore(db) as store:
        again = await reopen(mock, store, chat.id)
        assert again.prompt_version == "v1"
        await again.send("still v1?")
    async with SQLiteStore(db) as store:
        newer = await reopen(mock, store, chat.id, prompt_version="v2")
        await newer.send("now v2")
    async with SQLiteStore(db) as store:
        last = await reopen(mock, store, chat.id)
        records = await last.attempts()
        assert [r.prompt_version for r in records] == ["v1", "v1", "v2"]
        assert last.prompt_version == "v2"


async def test_a_prompt_version_that_is_not_text_is_refused(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "chat.db") as store:
        chat = await open_conversation(store, strategy="replay", prompt_version="v1")
        with pytest.raises(TypeError):
            await chat.set_prompt_version(3)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await open_conversation(store, chat.id, prompt_version=3)  # type: ignore[arg-type]
        assert chat.prompt_version == "v1"
        assert (await store.get_conversation(chat.id)).meta["prompt_version"] == "v1"
