"""Import and export round-trips for every SDK session kind, on every store backend, and the CLI.

Sources: ``SQLiteSession`` on a real file, ``SQLAlchemySession`` on the PostgreSQL service
(``postgresql+psycopg``; the SQLite form needs ``aiosqlite``, which is not installed here),
``RedisSession`` on the Redis service, and ``OpenAIConversationsSession`` on the mock's
conversation items routes.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import BACKENDS, postgres_url, redis_url, unique_name
from agents import Agent, OpenAIConversationsSession, Runner, SQLiteSession, set_tracing_disabled
from test_session_import import THANKS, WEATHER, fill

from agents_state_ext import export_session, import_session
from agents_state_ext._session_export import item_fingerprint
from agents_state_ext.testing import MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


def alchemy_url() -> str:
    """The PostgreSQL service as an async SQLAlchemy URL (psycopg 3 is its driver)."""
    url = postgres_url()
    return "postgresql+psycopg://" + url.split("://", 1)[1]


async def sqlalchemy_session(session_id: str) -> Any:
    pytest.importorskip("sqlalchemy", reason="SQLAlchemySession needs the sqlalchemy package")
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

    return SQLAlchemySession.from_url(session_id, url=alchemy_url(), create_tables=True)


async def close(session: Any) -> None:
    if hasattr(session, "engine"):
        await session.clear_session()
        await session.engine.dispose()
    elif hasattr(session, "close"):
        await session.clear_session()
        result = session.close()
        if result is not None:
            await result


SOURCES = ["sqlite-session", "sqlalchemy-postgres"]


async def make_source(kind: str, tmp_path: Path, name: str) -> Any:
    if kind == "sqlite-session":
        return SQLiteSession(name, tmp_path / "sessions.db")
    return await sqlalchemy_session(f"{name}_{uuid.uuid4().hex[:8]}")


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("source", SOURCES)
async def test_a_session_round_trips_through_every_store(
    mock: MockResponsesAPI, tmp_path: Path, backend: str, source: str
) -> None:
    original = await make_source(source, tmp_path, "src")
    copy = await make_source(source, tmp_path, "copy")
    store = await BACKENDS[backend](tmp_path)()
    try:
        await fill(original, mock, WEATHER, THANKS)
        items = await original.get_items()
        report = await import_session(original, store=store)
        assert report.nodes == {"user": 2, "assistant": 2}
        assert (await import_session(original, store=store)).nodes == {}  # idempotent
        assert len(await store.list_attempts(report.conversation_id)) == 2
        written = await export_session(store, report.conversation_id, copy)
        assert written.added == len(items)
        assert await copy.get_items() == items
        assert (await export_session(store, report.conversation_id, copy)).added == 0
    finally:
        await store.aclose()
        await close(original)
        await close(copy)


async def test_a_redis_session_round_trips(mock: MockResponsesAPI) -> None:
    from agents.extensions.memory.redis_session import RedisSession

    prefix = unique_name("i29_session")
    original = RedisSession.from_url("src", url=redis_url(), key_prefix=prefix)
    copy = RedisSession.from_url("copy", url=redis_url(), key_prefix=prefix)
    store = await BACKENDS["memory"](Path("."))()
    try:
        await fill(original, mock, WEATHER)
        report = await import_session(original, store=store)
        assert report.source == "RedisSession:src" and report.attempts == 1
        assert (await import_session(original, store=store)).nodes == {}
        await export_session(store, report.conversation_id, copy)
        assert await copy.get_items() == await original.get_items()
    finally:
        await close(original)
        await close(copy)


async def test_an_openai_conversations_session_round_trips_on_the_mock(
    mock: MockResponsesAPI,
) -> None:
    original = OpenAIConversationsSession(openai_client=mock.client())
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    mock.enqueue(Reply.text("hello"), Reply.text("fine"))
    await Runner.run(agent, "hi", session=original)
    await Runner.run(agent, "how are you?", session=original)
    store = await BACKENDS["memory"](Path("."))()
    report = await import_session(original, store=store)
    assert report.source == f"OpenAIConversationsSession:{original.session_id}"
    assert (report.nodes, report.attempts) == ({"user": 2, "assistant": 2}, 2)
    assert (await import_session(original, store=store)).nodes == {}

    target = mock.create_conversation()
    copy = OpenAIConversationsSession(conversation_id=target, openai_client=mock.client())
    assert (await export_session(store, report.conversation_id, copy)).added == 4
    # The server gives what it stores ids and shapes of its own; what they say is the same.
    said = [item_fingerprint(i) for i in mock.conversation_items(target)]
    assert said == [item_fingerprint(i) for i in mock.conversation_items(original.session_id)]
    assert (await export_session(store, report.conversation_id, copy)).added == 0
