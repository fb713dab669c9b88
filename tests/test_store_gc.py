"""Loading a path pauses the garbage collector only for the decode, and leaves it as it found it."""

from __future__ import annotations

import asyncio
import gc

from agents_state_ext import ConversationGraph, SQLiteStore


async def _stored(store: SQLiteStore) -> None:
    graph = ConversationGraph("c1")
    graph.add_user("hi")
    answer = graph.start_attempt()
    graph.complete(answer.id)
    await store.create_conversation("c1", strategy="replay")
    await store.commit("c1", graph.nodes(), expected_head=None, new_head=answer.id)


def test_a_load_leaves_the_collector_enabled_or_disabled_as_it_was() -> None:
    asyncio.run(_load_twice())


async def _load_twice() -> None:
    async with SQLiteStore(":memory:") as store:
        await _stored(store)
        assert gc.isenabled()
        assert [n.role for n in await store.active_path("c1")] == ["user", "assistant"]
        assert gc.isenabled()
        gc.disable()
        try:
            assert len(await store.active_path("c1")) == 2
            assert not gc.isenabled()  # the caller's choice holds
        finally:
            gc.enable()
