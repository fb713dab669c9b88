"""One failed store write leaves the chat as it was: the handle goes on, the store stays readable.

A store write fails the way a cut PostgreSQL connection or a full SQLite disk fails it
(``StoreError``, nothing of it written; see ``_store_faults.FaultyStore``): the commit of an
attempt's start, the commit of its end, or the conversation strategy's registry of server
conversations (at the attempt's start, or at its end). Then the app does what a user would:
an attempt that failed before its answer is sent again on the same handle; an answer that
arrived is stored by the handle's next action. The conversation is then reopened from the
store in a new handle and goes on. What must hold, on the mock's transcript and in the store:
every user message reached the model once (no server conversation holds one twice), the graph
loads with no orphan node, every attempt ended in a final status (node and record agree), and
every answer the user saw is stored.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from agents import Agent

from agents_state_ext import SQLiteStore, open_conversation
from agents_state_ext.errors import StoreError
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI

from ._chat import open_chat
from ._store_faults import FaultKind, FaultyStore
from ._support import STREAMED, texts, wire

pytestmark = pytest.mark.anyio

STRATEGIES = ["replay", "session", "previous_response", "conversation"]
MODELS = pytest.mark.parametrize("model", ["gpt-4.1", "gpt-5"])
FINAL = ("complete", "cancelled", "failed")

# (kind, writes of that kind let through after arming): the failed write of the second turn.
FAULTS: list[tuple[str, FaultKind, int]] = [
    ("start", "start", 0),
    ("end", "end", 0),
    ("registry-at-start", "registry", 0),  # the conversation strategy places the attempt
    ("registry-at-end", "registry", 1),  # and notes its completion
]
CASES = [
    pytest.param(strategy, kind, skip, id=f"{strategy}-{name}")
    for strategy in STRATEGIES
    for name, kind, skip in FAULTS
    if kind != "registry" or strategy == "conversation"  # only it keeps a registry
]


def _agent(mock: MockResponsesAPI, model: str) -> Agent[Any]:
    return Agent(name="assistant", model=mock.model(model))


def _users(items: list[dict[str, Any]]) -> list[str]:
    return [t[len("user:") :] for t in texts(items) if t.startswith("user:")]


def _contexts(mock: MockResponsesAPI) -> list[list[str]]:
    """The user messages of the whole context each answered request put before the model."""
    stored = set(mock.response_ids)
    out = []
    for request in mock.requests:
        if request.method != "POST" or request.path != "/responses" or request.status != 200:
            continue
        if request.response_id in stored:
            out.append(_users(mock.transcript(str(request.response_id))))
        else:  # not stored on the server: the request carried the whole context
            out.append([t[len("user:") :] for t in wire(request.json)[2] if t.startswith("user:")])
    return out


async def _check_store(db: Path, chat_id: str, seen: list[str]) -> None:
    """The stored chat loads, has no orphan, ended every attempt, and holds every answer seen."""
    async with SQLiteStore(db) as store:
        graph = await store.load_graph(chat_id)
        nodes = {n.id: n for n in graph.nodes()}
        assert all(n.parent_id is None or n.parent_id in nodes for n in nodes.values())
        assistants = [n for n in nodes.values() if n.role == "assistant"]
        assert all(n.status in (*FINAL, "invalid") for n in assistants), [
            (n.id, n.status) for n in assistants
        ]
        records = await store.list_attempts(chat_id)
        assert sorted(r.message_id for r in records) == sorted(n.id for n in assistants)
        for record in records:
            assert record.status in FINAL, (record.message_id, record.status)
            node = nodes[record.message_id]  # an invalid one: the status it ended in
            ended = node.meta.get("status_before_invalid") if node.status == "invalid" else None
            assert (ended or node.status) == record.status, (record.message_id, node.status)
        answered = [n.text() for n in assistants if n.status == "complete"]
        assert all(text in answered for text in seen), (seen, answered)


@pytest.mark.parametrize(("strategy", "kind", "skip"), CASES)
@MODELS
@STREAMED
async def test_one_failed_write_leaves_the_chat_usable_and_its_store_readable(
    mock: MockResponsesAPI,
    tmp_path: Path,
    strategy: str,
    kind: FaultKind,
    skip: int,
    model: str,
    streamed: bool,
) -> None:
    db = tmp_path / "chat.sqlite"
    seen: list[str] = []
    async with FaultyStore(db) as store:
        chat = await open_chat(mock, strategy, store=store, agent=_agent(mock, model))
        seen.append((await chat.send("one", stream=streamed)).text)

        store.fail(kind, skip=skip)
        attempt = chat.send("two", stream=streamed)
        with pytest.raises(StoreError, match="disk is full"):
            await attempt
        assert store.raised == [kind]
        if attempt.status == "complete":
            # The answer arrived and the user saw it: the handle's next action stores it.
            seen.append(attempt.text)
            records = await chat.attempts()
            assert [r.status for r in records] == ["complete", "complete"]
        else:
            # Nothing was answered: the user sends the message again, on the same handle.
            retried = await chat.send("two", stream=streamed)
            seen.append(retried.text)
            assert attempt.status == "failed"  # the attempt whose start was not stored
        assert len(store.raised) == 1
        two = chat.active_path()[-1].parent_id
        chat_id = chat.id

    await _check_store(db, chat_id, seen)

    # Another handle reopens the chat from the store, regenerates the answer to "two" (a new
    # attempt beside the stored one) and goes on.
    async with SQLiteStore(db) as store:
        again = await open_conversation(
            store, chat_id, agent=_agent(mock, model), counter=FixedTokenCounter()
        )
        seen.append((await again.retry(two, stream=streamed)).text)
        seen.append((await again.send("three", stream=streamed)).text)
    await _check_store(db, chat_id, seen)

    contexts = _contexts(mock)
    assert contexts[-1] == ["one", "two", "three"]
    for users in contexts:
        assert len(users) == len(set(users)), users  # no user message twice before the model
    if strategy == "conversation":
        for conversation in {b["conversation"] for b in mock.response_requests}:
            held = Counter(_users(mock.conversation_items(conversation)))
            assert all(n == 1 for n in held.values()), held


@pytest.mark.parametrize("strategy", STRATEGIES)
@STREAMED
async def test_after_a_failed_start_a_retry_answers_the_same_message_and_nothing_is_orphaned(
    mock: MockResponsesAPI, tmp_path: Path, strategy: str, streamed: bool
) -> None:
    db = tmp_path / "chat.sqlite"
    async with FaultyStore(db) as store:
        chat = await open_chat(mock, strategy, store=store)
        await chat.send("one", stream=streamed)
        store.fail("start", times=2)  # the store stays down for the first retry too
        failed = chat.send("two", stream=streamed)
        with pytest.raises(StoreError):
            await failed
        with pytest.raises(StoreError):
            await chat.retry(stream=streamed)
        answer = await chat.retry(stream=streamed)  # the store is back
        assert answer.user_id == failed.user_id
        assert store.raised == ["start", "start"]
    await _check_store(db, chat.id, [answer.text])
    async with SQLiteStore(db) as store:
        graph = await store.load_graph(chat.id)
        two = graph.get(failed.user_id)
        assert [n.status for n in graph.children(two.id)] == ["failed", "failed", "complete"]
    users = _contexts(mock)
    assert users == [["one"], ["one", "two"]]


@pytest.mark.parametrize("strategy", STRATEGIES)
@STREAMED
async def test_a_failed_start_on_a_handle_then_dropped_leaves_the_store_as_it_was(
    mock: MockResponsesAPI, tmp_path: Path, strategy: str, streamed: bool
) -> None:
    db = tmp_path / "chat.sqlite"
    async with FaultyStore(db) as store:
        chat = await open_chat(mock, strategy, store=store)
        first = await chat.send("one", stream=streamed)
        store.fail("start")
        with pytest.raises(StoreError):
            await chat.send("two", stream=streamed)
    async with SQLiteStore(db) as store:
        path = await store.active_path(chat.id)
        assert [n.id for n in path][-2:] == [first.user_id, first.id]
        again = await open_conversation(
            store, chat.id, agent=_agent(mock, "gpt-4.1"), counter=FixedTokenCounter()
        )
        await again.send("two", stream=streamed)
    await _check_store(db, chat.id, [])
    assert _contexts(mock)[-1] == ["one", "two"]


@pytest.mark.parametrize("strategy", STRATEGIES)
@STREAMED
async def test_an_edit_after_a_failed_end_stores_the_end_not_the_stored_start(
    mock: MockResponsesAPI, tmp_path: Path, strategy: str, streamed: bool
) -> None:
    """The edit marks the answers it invalidates in their stored records: for the one whose end
    waits in memory, that end is what gets marked and stored (issue 33 item 2)."""
    db = tmp_path / "chat.sqlite"
    async with FaultyStore(db) as store:
        chat = await open_chat(mock, strategy, store=store)
        await chat.send("one", stream=streamed)
        store.fail("end")
        answered = chat.send("two", stream=streamed)
        with pytest.raises(StoreError):
            await answered
        edited = await chat.edit(answered.user_id, "two again", stream=streamed)
    await _check_store(db, chat.id, [edited.text])
    async with SQLiteStore(db) as store:
        record = await store.get_attempt(chat.id, answered.attempt_id)
        assert (record.status, record.invalidated_by) == ("complete", edited.user_id)


@STREAMED
async def test_a_failed_end_is_stored_in_the_background_without_another_action(
    mock: MockResponsesAPI, tmp_path: Path, streamed: bool
) -> None:
    """The user never acts on the handle again: its answered attempt must not stay ``queued``
    in the store (no other handle can tell it from one in flight; issue 33 item 2)."""
    db = tmp_path / "chat.sqlite"
    async with FaultyStore(db) as store:
        chat = await open_chat(mock, "replay", store=store)
        store.fail("end")
        answered = chat.send("one", stream=streamed)
        with pytest.raises(StoreError):
            await answered
        for _ in range(200):  # the handle's background tries, waited for (bounded), not timed
            if (await store.get_attempt(chat.id, answered.attempt_id)).status != "queued":
                break
            await asyncio.sleep(0.05)
        assert (await store.get_attempt(chat.id, answered.attempt_id)).status == "complete"
    await _check_store(db, chat.id, [answered.text])
