"""SyncStore: an async store driven from synchronous code, on its own loop and thread."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from agents_state_ext._attempts import AttemptRecord
from agents_state_ext._nodes import Node
from agents_state_ext.errors import (
    ConcurrentUpdateError,
    ConversationNotFoundError,
    NodeNotFoundError,
    StoreError,
)
from agents_state_ext.stores import InMemoryStore, SQLiteStore, SyncStore
from agents_state_ext.stores.conformance import sample_graph

THREAD_NAME = "agents-state-ext-sync-store"


def sync_threads() -> int:
    return sum(t.name == THREAD_NAME for t in threading.enumerate())


def test_every_method_reaches_the_wrapped_store(tmp_path: Path) -> None:
    graph = sample_graph("c1")
    record = AttemptRecord("m1", "a1", started_at=1.0)
    with SyncStore(SQLiteStore(tmp_path / "db.sqlite")) as store:
        store.create_conversation("c1", strategy="replay", meta={"title": "t"})
        store.update_conversation_meta("c1", {"n": 1})
        assert store.get_conversation("c1").meta == {"title": "t", "n": 1}
        assert store.list_conversations() == ["c1"]
        store.commit(
            "c1", graph.nodes(), expected_head=None, new_head=graph.active_leaf, attempts=[record]
        )
        assert store.get_head("c1") == graph.active_leaf
        assert store.load_graph("c1").to_dict() == graph.to_dict()
        path = store.active_path("c1")
        assert [n.id for n in path] == [n.id for n in graph.active_path()]
        assert store.active_path("c1", path[1].id, limit=1) == [path[1]]
        assert store.get_node("c1", path[0].id) == path[0]
        store.put_attempt("c1", AttemptRecord("m1", "a2", started_at=2.0))
        assert store.get_attempt("c1", "a1") == record
        assert [r.attempt_id for r in store.list_attempts("c1", message_id="m1")] == ["a1", "a2"]
        store.put_run_state("c1", "a1", "paused")
        assert store.get_run_state("c1", "a1") == "paused"
        store.delete_run_state("c1", "a1")
        assert store.get_run_state("c1", "a1") is None
        assert store.put_ledger("c1", "x", expected_version=0, holder="w", held_until=3.0) == 1
        ledger = store.get_ledger("c1")
        assert ledger is not None and (ledger.blob, ledger.holder) == ("x", "w")
        store.delete_ledger("c1")
        assert store.get_ledger("c1") is None
        store.put_token_counts("c1", "enc", {"m1": 4, "m2": 5})
        assert store.get_token_counts("c1", "enc", ["m2"]) == {"m2": 5}
        store.delete_conversation("c1")
        assert store.list_conversations() == []


def test_errors_keep_their_types() -> None:
    with SyncStore(InMemoryStore()) as store:
        with pytest.raises(ConversationNotFoundError):
            store.get_conversation("nope")
        store.create_conversation("c1", strategy="replay")
        with pytest.raises(NodeNotFoundError):
            store.get_node("c1", "nope")
        store.commit("c1", [Node("a", None, "user", "complete")], expected_head=None, new_head="a")
        with pytest.raises(ConcurrentUpdateError):
            store.commit("c1", [], expected_head=None, new_head="a")
        with pytest.raises(StoreError):
            store.get_head("\ud800")


def test_close_closes_the_store_and_stops_the_thread(tmp_path: Path) -> None:
    before = sync_threads()
    inner = SQLiteStore(tmp_path / "db.sqlite")
    store = SyncStore(inner)
    store.create_conversation("c1", strategy="replay")
    assert sync_threads() == before + 1
    store.close()
    store.close()
    assert sync_threads() == before
    with pytest.raises(StoreError, match="closed"):
        store.list_conversations()
    with pytest.raises(StoreError, match="closed"):
        asyncio.run(inner.list_conversations())


def test_the_with_block_closes_even_on_error() -> None:
    inner = InMemoryStore()
    with pytest.raises(ConversationNotFoundError), SyncStore(inner) as store:
        store.get_head("nope")
    with pytest.raises(StoreError, match="closed"):
        asyncio.run(inner.list_conversations())


def test_open_connects_on_its_own_loop(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    with SyncStore.open(f"sqlite:///{db}") as store:
        store.create_conversation("c1", strategy="replay")
        assert isinstance(store.store, SQLiteStore)
    with SyncStore.open(db) as store:
        assert store.list_conversations() == ["c1"]
    with SyncStore.open("memory:") as store:
        assert isinstance(store.store, InMemoryStore)
    before = sync_threads()
    with pytest.raises(StoreError):
        SyncStore.open("mysql://host/db")
    assert sync_threads() == before


@pytest.mark.anyio
async def test_it_works_from_inside_a_running_event_loop() -> None:
    with SyncStore(InMemoryStore()) as store:
        store.create_conversation("c1", strategy="replay")
        assert store.list_conversations() == ["c1"]


class CoreOnly(InMemoryStore):
    """The core protocol only: the capability methods are hidden (``None`` is "absent")."""

    get_ledger = put_ledger = delete_ledger = None  # type: ignore[assignment]
    put_token_counts = get_token_counts = None  # type: ignore[assignment]


def test_capability_methods_on_a_store_without_them_are_store_errors() -> None:
    with SyncStore(CoreOnly()) as store:
        store.create_conversation("c1", strategy="replay")
        with pytest.raises(StoreError, match="no ledger capability"):
            store.get_ledger("c1")
        with pytest.raises(StoreError, match="no ledger capability"):
            store.put_ledger("c1", "x", expected_version=0, holder=None, held_until=None)
        with pytest.raises(StoreError, match="no ledger capability"):
            store.delete_ledger("c1")
        with pytest.raises(StoreError, match="no token-count capability"):
            store.put_token_counts("c1", "enc", {"m": 1})
        with pytest.raises(StoreError, match="no token-count capability"):
            store.get_token_counts("c1", "enc")
        assert store.list_conversations() == ["c1"]
