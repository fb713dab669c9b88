"""The ledger in the store: any worker continues any conversation, one drives it at a time.

Each "worker" is its own ``HeldState`` (its own holder token) on the store; on SQLite the
workers also use separate store objects on one file, as separate processes would. Everything
is asserted on what the mock server received and holds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent

from agents_state_ext import ConcurrentUpdateError, ConversationState, StateBlobError
from agents_state_ext.errors import ConversationNotFoundError
from agents_state_ext.stores import InMemoryStore, SQLiteStore
from agents_state_ext.stores.base import StoreBase
from agents_state_ext.stores.held import HeldState
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply
from tests._backends import (
    postgres_cleanup,
    postgres_url,
    redis_cleanup,
    redis_url,
    unique_name,
)

from ._support import STREAMED, run_turn, texts, wire

pytestmark = pytest.mark.anyio

Stores = Callable[[], Awaitable[StoreBase]]
SERVER = pytest.mark.parametrize("strategy", ["previous_response", "conversation"])


class Clock:
    """A settable clock shared by the workers of a test, so a lease lapses on demand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """``await stores()`` gives each worker its store: one shared object in memory, else a new
    store object (a new connection pool or client) on one database, as separate processes do."""
    backend = request.param
    opened: list[StoreBase] = []
    shared = InMemoryStore()
    name = unique_name("held")
    if backend == "postgres":
        url = postgres_url()
    elif backend == "redis":
        url = redis_url()

    async def make() -> StoreBase:
        store: StoreBase
        if backend == "memory":
            return shared
        if backend == "sqlite":
            store = SQLiteStore(tmp_path / "ledgers.db")
        elif backend == "postgres":
            from agents_state_ext.stores.postgres import PostgresStore

            store = await PostgresStore.connect(url, schema=name)
        else:
            from agents_state_ext.stores.redis import RedisStore

            store = await RedisStore.connect(url, namespace=name)
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.aclose()
    await shared.aclose()
    if backend == "postgres":
        await postgres_cleanup([name])
    elif backend == "redis":
        await redis_cleanup([name])


async def fresh(strategy: str, mock: MockResponsesAPI) -> ConversationState:
    if strategy == "previous_response":
        return ConversationState.previous_response()
    conversation = await mock.client().conversations.create()
    return ConversationState.conversation(conversation.id)


def worker(
    store: StoreBase, clock: Clock, name: str, new: ConversationState | None = None
) -> HeldState:
    return HeldState(store, "chat-1", new=new, lease=30.0, holder=name, clock=clock)


def model_agent(mock: MockResponsesAPI) -> Agent[Any]:
    return Agent(name="assistant", model=mock.model("gpt-4.1"))


@SERVER
@STREAMED
async def test_a_second_worker_continues_from_the_stored_ledger(
    mock: MockResponsesAPI,
    stores: Stores,
    strategy: str,
    streamed: bool,
) -> None:
    agent, clock = model_agent(mock), Clock()
    mock.enqueue(Reply.text("Hello!"), Reply.text("Still here."))
    async with worker(await stores(), clock, "a", await fresh(strategy, mock)) as state:
        await run_turn(state, agent, "hi", streamed=streamed)
    async with worker(await stores(), clock, "b") as state:
        await run_turn(state, agent, "again", streamed=streamed)
    first, second = mock.response_requests
    previous, conversation, sent = wire(second)
    assert sent == ["user:again"]  # only what the server lacks
    if strategy == "previous_response":
        assert previous == mock.response_ids[0]
    else:
        assert conversation == wire(first)[1]
        assert texts(mock.conversation_items(str(conversation))) == [
            "user:hi", "assistant:Hello!", "user:again", "assistant:Still here.",
        ]  # fmt: skip


@SERVER
async def test_another_worker_is_refused_before_any_request_while_one_holds(
    mock: MockResponsesAPI, stores: Stores, strategy: str
) -> None:
    agent, clock = model_agent(mock), Clock()
    mock.enqueue(Reply.text("Hello!"))
    async with worker(await stores(), clock, "a", await fresh(strategy, mock)) as state:
        with pytest.raises(ConcurrentUpdateError, match="held by another worker"):
            async with worker(await stores(), clock, "b") as intruder:
                await intruder.run(agent, "from b")  # never reached
        assert mock.response_requests == []
        await state.run(agent, "hi")
    assert [wire(body)[2] for body in mock.response_requests] == [["user:hi"]]


@SERVER
@STREAMED
async def test_a_worker_that_dies_after_an_answer_leaves_it_acknowledged(
    mock: MockResponsesAPI,
    stores: Stores,
    strategy: str,
    streamed: bool,
) -> None:
    """The save after each answer stands when the worker dies before its block ends."""
    agent, clock = model_agent(mock), Clock()
    mock.enqueue(Reply.text("Hello!"), Reply.text("Back."))
    dying = worker(await stores(), clock, "a", await fresh(strategy, mock))
    state = await dying.__aenter__()
    await run_turn(state, agent, "hi", streamed=streamed)
    await dying.abandon()  # the process is gone: no save on exit, the hold stays
    with pytest.raises(ConcurrentUpdateError):
        await worker(await stores(), clock, "b").__aenter__()
    clock.now += 31  # the lease lapses
    async with worker(await stores(), clock, "b") as state:
        await run_turn(state, agent, "again", streamed=streamed)
    previous, conversation, sent = wire(mock.response_requests[1])
    assert sent == ["user:again"]
    if strategy == "previous_response":
        assert previous == mock.response_ids[0]
    else:
        assert texts(mock.conversation_items(str(conversation))) == [
            "user:hi", "assistant:Hello!", "user:again", "assistant:Back.",
        ]  # fmt: skip


@SERVER
@STREAMED
@pytest.mark.parametrize("accepted", [True, False], ids=["accepted", "never-arrived"])
async def test_a_worker_that_dies_with_a_request_unheard_duplicates_and_loses_nothing(
    mock: MockResponsesAPI,
    stores: Stores,
    strategy: str,
    streamed: bool,
    accepted: bool,
) -> None:
    """A request failed unheard (the server took it, or never got it) and the worker died.

    The save before the request went out holds it as maybe-accepted (conversation: checked
    against the conversation's items, re-sent only if absent) or pending (previous_response:
    re-sent once, from the cursor before it, so the new chain holds it exactly once).
    """
    agent, clock = model_agent(mock), Clock()
    mock.enqueue(Reply.text("lost answer"), Reply.text("Back."))
    mock.inject(Fault.status(500, commit=accepted))
    dying = worker(await stores(), clock, "a", await fresh(strategy, mock))
    state = await dying.__aenter__()
    with pytest.raises(Exception):  # noqa: B017 - whichever error the SDK surfaces
        await run_turn(state, agent, "hi", streamed=streamed, max_turns=1)
    await dying.abandon()
    clock.now += 31
    async with worker(await stores(), clock, "b") as state:
        await run_turn(state, agent, "again", streamed=streamed)
    last = mock.response_requests[-1]
    previous, conversation, sent = wire(last)
    if strategy == "previous_response":
        assert previous is None and sent == ["user:hi", "user:again"]
        chain = texts(mock.transcript(mock.response_ids[-1]))
        assert chain[:2] == ["user:hi", "user:again"] and len(chain) == 3
    else:
        # Found in the conversation: not re-sent; absent: sent now, once.
        assert sent == (["user:again"] if accepted else ["user:hi", "user:again"])
        items = texts(mock.conversation_items(str(conversation)))
        assert items.count("user:hi") == 1 and items.count("user:again") == 1
        assert items[-2] == "user:again" and items[-1].startswith("assistant:")


@SERVER
async def test_a_worker_whose_hold_was_taken_over_sends_nothing(
    mock: MockResponsesAPI, stores: Stores, strategy: str
) -> None:
    """Fencing: after the lease lapsed and another worker took over, the old one cannot send."""
    agent, clock = model_agent(mock), Clock()
    mock.enqueue(Reply.text("Hello!"), Reply.text("From b."))
    slow = worker(await stores(), clock, "a", await fresh(strategy, mock))
    stale = await slow.__aenter__()
    clock.now += 31  # "a" stalls past its lease (a long GC pause, a frozen VM)
    async with worker(await stores(), clock, "b") as state:
        await state.run(agent, "from b")
    with pytest.raises(ConcurrentUpdateError):
        await stale.run(agent, "from a")
    assert [wire(body)[2] for body in mock.response_requests] == [["user:from b"]]
    with pytest.raises(ConcurrentUpdateError):
        await slow.__aexit__(None, None, None)  # its ledger never overwrites b's
    mock.enqueue(Reply.text("Still b."))
    async with worker(await stores(), clock, "c") as state:
        await state.run(agent, "then c")
    assert wire(mock.response_requests[-1])[2] == ["user:then c"]


async def test_a_missing_ledger_needs_new_and_replay_states_are_refused() -> None:
    store = InMemoryStore()
    with pytest.raises(ConversationNotFoundError, match="new="):
        async with store.state("nobody"):
            pass
    with pytest.raises(ValueError, match="keeps no ledger"):
        store.state("x", new=ConversationState.replay())
    assert await store.get_ledger("nobody") is None


async def test_a_ledger_round_trips_and_a_damaged_one_is_refused() -> None:
    state = ConversationState.previous_response("resp_9", prompt_cache_key="k")
    again = ConversationState.loads_ledger(state.dumps_ledger(key="s3cret"), key="s3cret")
    assert again.tracker is not None and again.tracker.previous_response_id == "resp_9"
    assert again.tracker.prompt_cache_key == "k"
    with pytest.raises(StateBlobError):
        ConversationState.loads_ledger(state.dumps_ledger(key="s3cret"), key="other")
    with pytest.raises(StateBlobError):
        ConversationState.loads_ledger('{"format": "agents-state-ext/ledger", "version": 1}')
    with pytest.raises(ValueError, match="keeps no ledger"):
        ConversationState.replay().dumps_ledger()
