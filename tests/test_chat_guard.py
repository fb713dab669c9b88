"""A chat's WriteGuard: its commits carry the guard's fence, its requests wait for its word.

A guard of the test's own (not the server's lease) shows the public protocol: the fence is a
ledger record the test owns; "taking over" is bumping that record's version.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from agents import Agent, set_tracing_disabled

from agents_state_ext.chat import WriteGuard, open_conversation
from agents_state_ext.errors import FencedOutError
from agents_state_ext.stores import Fence, InMemoryStore
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


class Owner:
    """Holds the ledger record ``owner`` at the version it last wrote."""

    def __init__(self, store: InMemoryStore) -> None:
        self.store = store
        self.token = 0
        self.requests_allowed = True
        self.asked = 0

    async def take(self) -> None:
        self.token = await self.store.put_ledger(
            "owner", "me", expected_version=self.token, holder="me", held_until=None
        )

    @contextlib.asynccontextmanager
    async def fenced(self) -> AsyncIterator[Fence]:
        yield Fence("owner", self.token)

    async def before_request(self) -> None:
        self.asked += 1
        if not self.requests_allowed:
            raise FencedOutError("not mine any more")


async def taken_over(store: InMemoryStore) -> None:
    record = await store.get_ledger("owner")
    assert record is not None
    await store.put_ledger(
        "owner", "them", expected_version=record.version, holder="them", held_until=None
    )


@pytest.mark.parametrize("strategy", ["replay", "previous_response"])
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_fenced_out_chat_stores_nothing_more(strategy: str, streamed: bool) -> None:
    store = InMemoryStore()
    owner = Owner(store)
    await owner.take()
    assert isinstance(owner, WriteGuard)
    async with MockResponsesAPI() as mock:
        chat = await open_conversation(
            store,
            strategy=strategy,  # type: ignore[arg-type]
            agent=Agent(name="a", model=mock.model()),
            counter=FixedTokenCounter(),
        )
        chat.guard = owner
        first = await chat.send("hello", stream=streamed)
        assert first.error is None and first.status == "complete"

        await taken_over(store)
        second = chat.send("again", stream=streamed)
        with pytest.raises(FencedOutError, match="version 2, not 1"):
            await second  # its start was refused: the store holds the other owner's version
        assert second.status == "failed"

    assert len(mock.response_requests) == 1  # the start was refused before anything was sent
    stored = await store.load_graph(chat.id)
    assert [n.text() for n in stored.nodes()] == ["hello", "echo: hello"]
    assert [r.status for r in await store.list_attempts(chat.id)] == ["complete"]
    if strategy == "previous_response":
        assert owner.asked >= 1  # asked before the first request went out


async def test_a_guard_that_refuses_a_request_keeps_it_unsent() -> None:
    store = InMemoryStore()
    owner = Owner(store)
    await owner.take()
    async with MockResponsesAPI() as mock:
        chat = await open_conversation(
            store,
            strategy="previous_response",
            agent=Agent(name="a", model=mock.model()),
            counter=FixedTokenCounter(),
        )
        chat.guard = owner
        owner.requests_allowed = False
        attempt = chat.send("hello")
        with pytest.raises(FencedOutError, match="not mine"):
            await attempt
    assert mock.response_requests == []
    records = await store.list_attempts(chat.id)
    assert [(r.status, r.response_id) for r in records] == [("failed", None)]
