"""Two handles on one SQLite chat: a lost compare-and-set never leaves an attempt in flight.

Each handle commits with a compare-and-set on the branch head. When the other handle moved it
while an attempt ran, the attempt still ends in a final status in the store (off the active
branch the other handle chose), its caller gets ``ConcurrentUpdateError``, and the handle
re-reads the store so its next action works.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from agents import Agent

from agents_state_ext import ConcurrentUpdateError, SQLiteStore, open_conversation
from agents_state_ext.chat import Attempt, Conversation
from agents_state_ext.testing import Fault, FixedTokenCounter, MockResponsesAPI

from ._chat import SLOW, slow_reply
from ._support import STREAMED, texts

pytestmark = pytest.mark.anyio

FINAL = {"complete", "cancelled", "failed"}


async def handle(
    mock: MockResponsesAPI, store: SQLiteStore, chat_id: str | None = None
) -> Conversation:
    """A chat on ``store``: a new one, or the stored ``chat_id`` opened again."""
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    counter = FixedTokenCounter()
    if chat_id is None:
        return await open_conversation(store, strategy="replay", agent=agent, counter=counter)
    return await open_conversation(store, chat_id, agent=agent, counter=counter, create=False)


async def in_flight(attempt: Attempt, *, streamed: bool) -> None:
    """Return once the attempt's request is on the wire (its first delta when streamed)."""
    if streamed:
        async for _ in attempt:
            return
    await asyncio.sleep(0.05)


@dataclass
class Race:
    """Two handles on one SQLite chat, the first with a "story" attempt in flight."""

    db: Path
    one: Conversation
    two: Conversation
    story: Attempt


@asynccontextmanager
async def racing(
    mock: MockResponsesAPI, tmp_path: Path, *, streamed: bool, fault: Fault | None = None
) -> AsyncIterator[Race]:
    """Handle one says "hi", then starts "story" (slow, or failing with ``fault``); handle two
    opens the same chat while that attempt is in flight."""
    db = tmp_path / "chat.db"
    async with SQLiteStore(db) as one_store, SQLiteStore(db) as two_store:
        one = await handle(mock, one_store)
        await one.send("hi")
        if fault is None:
            mock.enqueue(slow_reply(streamed=streamed))
        else:
            mock.inject(fault)
        story = one.send("story", stream=streamed)
        if fault is None:
            await in_flight(story, streamed=streamed)
        else:
            await asyncio.sleep(0.05)
        yield Race(db, one, await handle(mock, two_store, one.id), story)


async def reopened(db: Path, chat_id: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """A third handle's view: node and attempt-record statuses, and the active branch's texts."""
    async with SQLiteStore(db) as store:
        chat = await open_conversation(store, chat_id, create=False)
        nodes = {n.id: n.status for n in chat.graph.nodes() if n.role == "assistant"}
        records = {r.message_id: r.status for r in await chat.attempts()}
        return nodes, records, [n.text() for n in chat.active_path()]


@STREAMED
async def test_a_retry_on_another_handle_does_not_leave_the_slow_attempt_queued(
    mock: MockResponsesAPI, streamed: bool, tmp_path: Path
) -> None:
    async with racing(mock, tmp_path, streamed=streamed) as race:
        db, one, slow = race.db, race.one, race.story
        retried = await race.two.retry()
        with pytest.raises(ConcurrentUpdateError):
            await slow
        assert slow.status == "complete"

        nodes, records, branch = await reopened(db, one.id)
        assert set(nodes.values()) <= FINAL and set(records.values()) <= FINAL
        assert (nodes[slow.id], records[slow.id]) == ("complete", "complete")
        assert (nodes[retried.id], records[retried.id]) == ("complete", "complete")
        # The other handle's retry keeps the active branch; the slow answer is its sibling.
        assert branch == ["hi", "echo: hi", "story", "echo: story"]
        async with SQLiteStore(db) as store:
            assert (await store.get_node(one.id, slow.id)).text() == SLOW

        # The first handle has re-read the store: it continues on the branch now active.
        after = await one.send("thanks")
        assert texts(mock.response_requests[-1]["input"]) == [
            "user:hi",
            "assistant:echo: hi",
            "user:story",
            "assistant:echo: story",
            "user:thanks",
        ]
        assert (await reopened(db, one.id))[1][after.id] == "complete"


@STREAMED
async def test_a_stop_after_another_handle_moved_the_head_is_stored_as_cancelled(
    mock: MockResponsesAPI, streamed: bool, tmp_path: Path
) -> None:
    async with racing(mock, tmp_path, streamed=streamed) as race:
        slow = race.story
        await race.two.retry()
        await slow.stop()
        with pytest.raises(ConcurrentUpdateError):
            await slow
        nodes, records, _ = await reopened(race.db, race.one.id)
        assert (nodes[slow.id], records[slow.id]) == ("cancelled", "cancelled")


@STREAMED
async def test_a_failure_after_another_handle_moved_the_head_is_stored_as_failed(
    mock: MockResponsesAPI, streamed: bool, tmp_path: Path
) -> None:
    fault = Fault.timeout(after=0.5)
    async with racing(mock, tmp_path, streamed=streamed, fault=fault) as race:
        failing = race.story
        await race.two.retry()
        with pytest.raises(Exception, match="timed out"):  # the model's error, not the conflict
            await failing
        nodes, records, _ = await reopened(race.db, race.one.id)
        assert (nodes[failing.id], records[failing.id]) == ("failed", "failed")


@STREAMED
async def test_an_edit_on_another_handle_keeps_the_slow_attempt_invalid_and_final(
    mock: MockResponsesAPI, streamed: bool, tmp_path: Path
) -> None:
    async with racing(mock, tmp_path, streamed=streamed) as race:
        slow = race.story
        await race.two.edit(slow.user_id, "poem")
        with pytest.raises(ConcurrentUpdateError):
            await slow
        nodes, records, branch = await reopened(race.db, race.one.id)
        # The edit invalidated the attempt; it stays invalid, and its record is final.
        assert (nodes[slow.id], records[slow.id]) == ("invalid", "complete")
        assert branch == ["hi", "echo: hi", "poem", "echo: poem"]


@STREAMED
async def test_an_attempt_invalidated_in_flight_is_stored_with_the_status_it_ended_in(
    mock: MockResponsesAPI, streamed: bool, tmp_path: Path
) -> None:
    """Its node says, as its record does, that it ended ``complete`` (the edit saw it queued or
    streaming): an invalid node and its record agree on how the attempt ended (issue 33)."""
    async with racing(mock, tmp_path, streamed=streamed) as race:
        slow = race.story
        await race.two.edit(slow.user_id, "poem")
        with pytest.raises(ConcurrentUpdateError):
            await slow
    async with SQLiteStore(race.db) as store:
        node = await store.get_node(race.one.id, slow.id)
        record = await store.get_attempt(race.one.id, slow.attempt_id)
    assert (node.status, node.meta["status_before_invalid"]) == ("invalid", record.status)
    assert record.status == "complete"


async def test_an_action_that_loses_the_race_changes_nothing_and_the_handle_recovers(
    mock: MockResponsesAPI, tmp_path: Path
) -> None:
    db = tmp_path / "chat.db"
    async with SQLiteStore(db) as one_store, SQLiteStore(db) as two_store:
        one = await handle(mock, one_store)
        first = await one.send("hi")
        two = await handle(mock, two_store, one.id)
        await two.send("from two")
        sent = len(mock.response_requests)
        lost = one.send("from one")
        with pytest.raises(ConcurrentUpdateError):  # raised when awaited, before any request
            await lost
        assert lost.status == "failed"  # and nothing of it was stored
        await two.send("two again")
        with pytest.raises(ConcurrentUpdateError):
            await one.switch(first.id)
        assert len(mock.response_requests) == sent + 1
        nodes, records, branch = await reopened(db, one.id)
        assert set(nodes.values()) == set(records.values()) == {"complete"}
        assert branch == [
            "hi",
            "echo: hi",
            "from two",
            "echo: from two",
            "two again",
            "echo: two again",
        ]
        # Re-read after each lost race, the first handle now acts on the current branch.
        await one.send("from one")
        assert (await reopened(db, one.id))[2][-2:] == ["from one", "echo: from one"]
