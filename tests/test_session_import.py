"""``import_session`` / ``export_session``: SDK session data comes along into a chat, and back.

The sessions are filled by real Agents SDK runs (a tool call, reasoning items) against the
mock, so their items are what an app adopting the library already has on disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.memory import SessionSettings

from agents_state_ext import (
    InMemoryStore,
    SQLiteStore,
    StoreError,
    TokenCounter,
    export_session,
    import_session,
    open_conversation,
)
from agents_state_ext._session_import import split_turns
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def fill(session: Any, mock: MockResponsesAPI, *turns: tuple[str, Reply, ...]) -> None:
    """Real SDK runs on ``session``: per turn, the user's text and the model's replies."""
    agent = Agent(name="assistant", model=mock.model("gpt-5"), tools=[weather])
    for text, *replies in turns:
        mock.enqueue(*replies)
        await Runner.run(agent, text, session=session)


WEATHER = ("weather?", Reply.tool_call("weather", {"city": "Paris"}), Reply.text("Sunny."))
THANKS = ("thanks", Reply.text("You are welcome."))


@pytest.fixture
def session(tmp_path: Path) -> Any:
    opened = SQLiteSession("s1", tmp_path / "sessions.db")
    yield opened
    opened.close()


async def test_a_session_becomes_turns_with_imported_records_and_counts(
    mock: MockResponsesAPI, session: Any, tmp_path: Path
) -> None:
    await fill(session, mock, WEATHER, THANKS)
    items = await session.get_items()
    async with SQLiteStore(tmp_path / "chats.db") as store:
        report = await import_session(session, store=store)
        assert (report.created, report.nodes, report.attempts) == (
            True,
            {"user": 2, "assistant": 2},
            2,
        )
        chat = await open_conversation(store, report.conversation_id)
        path = chat.active_path()
        assert [n.role for n in path] == ["user", "assistant", "user", "assistant"]
        assert all(n.status == "complete" for n in path)
        assert [item for n in path for item in n.items] == items  # every item, in order
        kinds = [i.get("type") for i in path[1].items]
        assert kinds == [
            "reasoning",
            "function_call",
            "function_call_output",
            "reasoning",
            "message",
        ]
        counter = TokenCounter("gpt-4.1")
        counts = {n.id: counter.count(n.id, n.items) for n in path}
        assert report.tokens == sum(counts.values())
        records = await chat.attempts()
        assert [(r.status, r.imported_from, r.exact) for r in records] == [
            ("complete", "SQLiteSession:s1", True)
        ] * 2
        assert records[1].included == {n.id: counts[n.id] for n in path[:3]}
        assert records[1].message_id == path[3].id and records[1].parent_user_id == path[2].id
        stored = await store.get_token_counts(report.conversation_id, "o200k_base")
        assert stored == counts


async def test_importing_twice_creates_nothing_and_a_grown_session_adds_its_new_turns(
    mock: MockResponsesAPI, session: Any
) -> None:
    await fill(session, mock, WEATHER)
    store = InMemoryStore()
    first = await import_session(session, store=store)
    again = await import_session(session, store=store)
    assert again.nodes == {} and again.attempts == 0 and not again.created
    assert again.text().startswith("nothing new")
    assert await store.list_conversations() == [first.conversation_id]
    assert len(await store.list_attempts(first.conversation_id)) == 1

    await fill(session, mock, THANKS)
    grown = await import_session(session, store=store)
    assert (grown.created, grown.nodes, grown.attempts) == (False, {"user": 1, "assistant": 1}, 1)
    path = await store.active_path(first.conversation_id)
    assert [item for n in path for item in n.items] == await session.get_items()
    assert len(await store.list_attempts(first.conversation_id)) == 2


async def test_a_dry_run_says_what_it_would_create_and_writes_nothing(
    mock: MockResponsesAPI, session: Any
) -> None:
    await fill(session, mock, WEATHER, THANKS)
    store = InMemoryStore()
    dry = await import_session(session, store=store, dry_run=True)
    assert await store.list_conversations() == []
    assert dry.text().splitlines()[:2] == [
        f"would create chat {dry.conversation_id} from SQLiteSession:s1 (9 session items)",
        "would add 2 user, 2 assistant messages and 2 imported attempt records",
    ]
    real = await import_session(session, store=store)
    assert (real.nodes, real.attempts, real.tokens) == (dry.nodes, dry.attempts, dry.tokens)


async def test_an_imported_chat_goes_on_with_the_session_history_as_its_context(
    mock: MockResponsesAPI, session: Any
) -> None:
    await fill(session, mock, WEATHER)
    store = InMemoryStore()
    report = await import_session(session, store=store, strategy="session")
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    chat = await open_conversation(store, report.conversation_id, agent=agent)
    mock.enqueue(Reply.text("More sun."))
    await chat.send("tomorrow?")
    sent = mock.response_requests[-1]["input"]
    said = [i.get("type", "message") for i in sent]
    assert said == ["message", "function_call", "function_call_output", "message", "message"]
    assert sent[-1]["content"] == "tomorrow?"

    await fill(session, mock, THANKS)
    with pytest.raises(StoreError, match="went on after its import"):
        await import_session(session, store=store)  # its new turn would fork the chat
    assert len(await store.active_path(report.conversation_id)) == 4


async def test_a_conversation_id_that_holds_another_chat_is_refused(
    mock: MockResponsesAPI, session: Any
) -> None:
    await fill(session, mock, THANKS)
    store = InMemoryStore()
    await open_conversation(store, "mine", strategy="replay", system="be brief")
    with pytest.raises(StoreError, match="was not imported from SQLiteSession:s1"):
        await import_session(session, store=store, conversation_id="mine")
    with pytest.raises(ValueError, match="strategy must be replay or session"):
        await import_session(session, store=store, strategy="previous_response")
    windowed = SQLiteSession("s1", session.db_path, session_settings=SessionSettings(limit=2))
    with pytest.raises(ValueError, match="reads only its last 2 items"):
        await import_session(windowed, store=store)  # it would import a truncated history
    windowed.close()
    assert await store.list_conversations() == ["mine"]


def test_turns_start_with_instructions_and_a_user_message() -> None:
    system = {"role": "system", "content": "be brief"}
    user = {"role": "user", "content": "hi"}
    answer = {"type": "message", "role": "assistant", "content": "hello"}
    developer = {"role": "developer", "content": "now in French"}
    turns = split_turns([system, user, user, answer, developer, answer, user])
    assert [(role, len(items)) for role, items in turns] == [
        ("system", 1),
        ("user", 2),
        ("assistant", 3),  # a message said between answers stays in its turn
        ("user", 1),
    ]
    with pytest.raises(ValueError, match=r"item 1 \(message\) comes before the first user"):
        split_turns([system, answer, user])


async def test_export_writes_the_active_branch_into_a_session_once(
    mock: MockResponsesAPI, session: Any, tmp_path: Path
) -> None:
    await fill(session, mock, WEATHER)
    store = InMemoryStore()
    report = await import_session(session, store=store)
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    chat = await open_conversation(store, report.conversation_id, agent=agent)
    mock.enqueue(Reply.text("More sun."))
    await chat.send("tomorrow?")
    mock.inject(Fault.status(500))
    with pytest.raises(Exception, match="500"):
        await chat.send("and after?")  # a failed attempt: its user message goes, it does not

    target = SQLiteSession("copy", tmp_path / "copy.db")
    try:
        dry = await export_session(store, report.conversation_id, target, dry_run=True)
        assert (dry.added, dry.skipped) == (9, 1) and await target.get_items() == []
        written = await export_session(store, report.conversation_id, target)
        assert (written.added, written.already) == (9, 0)
        branch = [item for n in chat.active_path() if n.status == "complete" for item in n.items]
        assert branch[-1] == {"type": "message", "role": "user", "content": "and after?"}
        assert await target.get_items() == branch
        again = await export_session(store, report.conversation_id, target)
        assert again.added == 0 and again.text().startswith("nothing new")
        # Back the other way: the exported session imports as the same turns.
        copied = await import_session(target, store=store)
        path = await store.active_path(copied.conversation_id)
        assert [item for n in path for item in n.items] == branch
    finally:
        target.close()
    with pytest.raises(StoreError, match="not the beginning"):
        other = SQLiteSession("other", tmp_path / "copy.db")
        await other.add_items([{"role": "user", "content": "something else"}])
        await export_session(store, report.conversation_id, other)
