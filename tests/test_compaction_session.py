"""Compaction under the session strategy rewrites the session, its one owner; nothing twice."""

from __future__ import annotations

from typing import Any

import pytest
from _runs import STREAMED, compact_bodies, turn
from agents import Agent, SQLiteSession, set_tracing_disabled

from agents_state_ext import ConversationState, MixedStateOwnerError
from agents_state_ext.testing import MockResponsesAPI, Reply, decode_compaction, describe_items

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


async def compacted_session(
    mock: MockResponsesAPI, streamed: bool
) -> tuple[ConversationState, SQLiteSession, Agent[Any], Any]:
    session = SQLiteSession("compaction")
    state = ConversationState.session(session)
    agent = Agent(name="a", model=mock.model("gpt-4.1"))
    mock.enqueue(Reply.text("one"), Reply.text("two"))
    await turn(state, agent, "first", streamed)
    await turn(state, agent, "second", streamed)
    result = await state.compact(client=mock.client(), model="gpt-4.1")
    return state, session, agent, result


@STREAMED
async def test_compaction_uses_the_session_items_and_rewrites_the_session(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state, session, agent, result = await compacted_session(mock, streamed)
    assert result.mode == "input"
    (body,) = compact_bodies(mock)
    assert "previous_response_id" not in body
    assert describe_items(body["input"]) == [
        "user: first",
        "assistant: one",
        "user: second",
        "assistant: two",
    ]
    stored = await session.get_items()
    assert describe_items(stored) == describe_items(result.items)
    assert [item.get("type") for item in stored][-1] == "compaction"
    replaced = decode_compaction(stored[-1]["encrypted_content"])  # type: ignore[typeddict-item]
    assert describe_items(replaced)[-1] == "assistant: two"

    mock.enqueue(Reply.text("three"))
    await turn(state, agent, "third", streamed)
    sent = describe_items(mock.response_requests[-1]["input"])
    assert sent == [*describe_items(result.items), "user: third"]
    assert "assistant: one" not in sent
    after = describe_items(await session.get_items())
    assert after == [*describe_items(result.items), "user: third", "assistant: three"]


@STREAMED
async def test_passing_the_window_back_as_input_duplicates_nothing(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    state, session, agent, result = await compacted_session(mock, streamed)
    mock.enqueue(Reply.text("three"))
    await turn(state, agent, [*result.items, {"role": "user", "content": "third"}], streamed)
    sent = describe_items(mock.response_requests[-1]["input"])
    assert sent.count("user: first") == 1 and sent.count("user: second") == 1
    assert sum(line.startswith("compaction") for line in sent) == 1
    stored = describe_items(await session.get_items())
    assert stored.count("user: first") == 1
    assert sum(line.startswith("compaction") for line in stored) == 1
    assert stored[-2:] == ["user: third", "assistant: three"]


async def test_items_other_than_the_session_s_are_refused_before_any_request(
    mock: MockResponsesAPI,
) -> None:
    session = SQLiteSession("other-items")
    state = ConversationState.session(session)
    agent = Agent(name="a", model=mock.model("gpt-4.1"))
    await state.run(agent, "first")
    held = await session.get_items()
    with pytest.raises(MixedStateOwnerError, match="session"):
        await state.compact(
            client=mock.client(), model="gpt-4.1", items=[{"role": "user", "content": "other"}]
        )
    assert compact_bodies(mock) == []
    assert await session.get_items() == held
    # The session's own items, given explicitly, are accepted.
    result = await state.compact(client=mock.client(), model="gpt-4.1", items=held)
    assert describe_items(await session.get_items()) == describe_items(result.items)


async def test_an_empty_session_has_nothing_to_compact(mock: MockResponsesAPI) -> None:
    state = ConversationState.session(SQLiteSession("empty"))
    with pytest.raises(ValueError, match="nothing to compact"):
        await state.compact(client=mock.client(), model="gpt-4.1")
    assert compact_bodies(mock) == []


class FailingOnce(SQLiteSession):
    """A session whose first write after a clear fails, as a store that went away would."""

    failures = 1
    cleared = False

    async def clear_session(self) -> None:
        await super().clear_session()
        self.cleared = True

    async def add_items(self, items: list[Any]) -> None:
        if self.cleared and self.failures:
            self.failures -= 1
            raise OSError("the store went away")
        await super().add_items(items)


async def test_a_failed_rewrite_puts_the_session_s_items_back(mock: MockResponsesAPI) -> None:
    session = FailingOnce("failing")
    state = ConversationState.session(session)
    agent = Agent(name="a", model=mock.model("gpt-4.1"))
    await state.run(agent, "first")
    held = await session.get_items()
    with pytest.raises(OSError, match="went away"):
        await state.compact(client=mock.client(), model="gpt-4.1")
    assert await session.get_items() == held
    await state.run(agent, "second")
    sent = describe_items(mock.response_requests[-1]["input"])
    assert sent == ["user: first", "assistant: echo: first", "user: second"]


@STREAMED
async def test_the_last_result_dumped_after_compaction_loads_on_the_rewritten_session(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    session = SQLiteSession("checkpoint")
    state = ConversationState.session(session)
    agent = Agent(name="a", model=mock.model("gpt-4.1"))
    await turn(state, agent, "first", streamed)
    last = await turn(state, agent, "second", streamed)
    result = await state.compact(client=mock.client(), model="gpt-4.1")
    restored, _ = await ConversationState.loads(agent, state.dumps(last), session=session)
    await turn(restored, agent, "third", streamed)
    sent = describe_items(mock.response_requests[-1]["input"])
    assert sent == [*describe_items(result.items), "user: third"]


async def test_a_chats_graph_session_is_refused_before_anything_is_sent(
    mock: MockResponsesAPI,
) -> None:
    from agents_state_ext import InMemoryStore, InvalidTargetError, open_conversation

    agent = Agent(name="a", model=mock.model("gpt-4.1"))
    chat = await open_conversation(InMemoryStore(), strategy="session", agent=agent)
    await chat.send("first")
    state = ConversationState.session(chat.session())
    sent = len(mock.requests)
    with pytest.raises(InvalidTargetError, match="keeps every item"):
        await state.compact(client=mock.client(), model="gpt-4.1")
    assert len(mock.requests) == sent  # no /responses/compact request went out
    assert [n.text() for n in chat.active_path()][-2:] == ["first", "echo: first"]
