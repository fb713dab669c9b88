"""SQLiteStore beyond the conformance suite: its thread, WAL, schema, read-only, processes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from agents_state_ext._attempts import AttemptRecord
from agents_state_ext._graph import ConversationGraph
from agents_state_ext._nodes import Node, Role
from agents_state_ext.errors import (
    NodeNotFoundError,
    StoredDataError,
    StoreError,
    StoreUnavailableError,
)
from agents_state_ext.stores import SQLiteStore, sqlite
from agents_state_ext.stores.conformance import sample_graph
from agents_state_ext.types import AttemptStatus

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[1]
THREAD_PREFIX = "agents-state-ext-sqlite"


def raw(path: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        with conn:
            return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def chain(length: int) -> list[Node]:
    nodes = [Node("n0", None, "system", "complete")]
    for i in range(1, length):
        role: Role = "user" if i % 2 else "assistant"
        nodes.append(Node(f"n{i}", f"n{i - 1}", role, "complete", [{"content": str(i)}]))
    return nodes


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, str]]]:
    """Every SQL statement the stores opened from now on send to SQLite, with its thread."""
    statements: list[tuple[int, str]] = []
    real = sqlite3.connect

    def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real(*args, **kwargs)  # type: ignore[call-overload]
        conn.set_trace_callback(lambda sql: statements.append((threading.get_ident(), sql)))
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    yield statements


# -- the worker thread -------------------------------------------------------------------------


async def test_every_sqlite_call_runs_on_the_stores_own_thread(
    tmp_path: Path, traced: list[tuple[int, str]]
) -> None:
    async with SQLiteStore(tmp_path / "a.db") as first, SQLiteStore(tmp_path / "b.db") as second:
        for store in (first, second):
            await store.create_conversation("c1", strategy="replay")
            await store.commit("c1", chain(3), expected_head=None, new_head="n2")
            await store.active_path("c1")
            await store.load_graph("c1")
    threads = {ident for ident, _ in traced}
    assert len(threads) == 2  # one per store
    assert threading.get_ident() not in threads


async def test_a_call_waiting_for_a_lock_leaves_the_event_loop_free(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    async with SQLiteStore(db, timeout=30) as store:
        await store.create_conversation("c1", strategy="replay")
        other = sqlite3.connect(db, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            commit = asyncio.create_task(
                store.commit("c1", chain(2), expected_head=None, new_head="n1")
            )
            # Had the commit blocked the loop, this sleep would end only after the 30 s busy
            # timeout, with the commit failed.
            await asyncio.sleep(0.2)
            assert not commit.done()
            other.execute("COMMIT")
            await commit
        finally:
            other.close()
        assert await store.get_head("c1") == "n1"


async def test_a_writer_gives_up_after_the_busy_timeout(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    async with SQLiteStore(db, timeout=0.05) as store:
        await store.create_conversation("c1", strategy="replay")
        other = sqlite3.connect(db, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            # another writer's lock is transient: unavailable, to retry, not the caller's mistake
            with pytest.raises(StoreUnavailableError, match="locked"):
                await store.create_conversation("c2", strategy="replay")
        finally:
            other.close()
        assert await store.list_conversations() == ["c1"]


async def test_a_corrupt_database_is_stored_data_error(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    async with SQLiteStore(db) as store:
        for i in range(40):  # enough rows for pages beyond the schema's
            await store.create_conversation(f"c{i}", strategy="replay", meta={"pad": "x" * 500})
    data = bytearray(db.read_bytes())
    page = 4096
    data[2 * page : len(data)] = b"\xff" * (len(data) - 2 * page)  # every page past the second
    db.write_bytes(bytes(data))
    async with SQLiteStore(db) as store:
        with pytest.raises(StoredDataError, match="malformed"):
            await store.list_conversations()


async def test_aclose_stops_the_thread_and_twice_is_fine(tmp_path: Path) -> None:
    def workers() -> int:
        return sum(t.name.startswith(THREAD_PREFIX) for t in threading.enumerate())

    before = workers()
    store = SQLiteStore(tmp_path / "db.sqlite")
    await store.list_conversations()
    assert workers() == before + 1
    await store.aclose()
    await store.aclose()
    assert workers() == before
    with pytest.raises(StoreError, match="closed"):
        await store.list_conversations()


def test_a_failed_open_leaves_no_thread(tmp_path: Path) -> None:
    before = sum(t.name.startswith(THREAD_PREFIX) for t in threading.enumerate())
    with pytest.raises(StoreError):
        SQLiteStore(tmp_path / "missing.db", read_only=True)
    assert sum(t.name.startswith(THREAD_PREFIX) for t in threading.enumerate()) == before


# -- files, URLs, queries ----------------------------------------------------------------------


async def test_a_file_database_is_in_wal_mode(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "db.sqlite"):
        pass
    assert raw(tmp_path / "db.sqlite", "PRAGMA journal_mode") == [("wal",)]


async def test_a_reopened_database_returns_the_same_graph_and_attempts(tmp_path: Path) -> None:
    graph = sample_graph("c1")
    attempts = [
        AttemptRecord(n.id, n.attempt_id or "", parent_user_id=n.parent_id, started_at=n.created_at)
        for n in graph.nodes()
        if n.role == "assistant"
    ]
    attempts[0].included = {"msg_1": 5, "msg_2": 9}
    async with SQLiteStore(tmp_path / "db.sqlite") as store:
        await store.create_conversation("c1", strategy="replay", meta={"title": "Weather"})
        await store.commit(
            "c1",
            graph.take_changes(),
            expected_head=None,
            new_head=graph.active_leaf,
            attempts=attempts,
        )
        await store.put_ledger("c1", "ledger", expected_version=0, holder="w", held_until=5.0)
        await store.put_token_counts("c1", "o200k_base", {"msg_1": 4})
    async with SQLiteStore.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}") as store:
        assert (await store.load_graph("c1")).to_dict() == graph.to_dict()
        listed = await store.list_attempts("c1")
        assert [r.to_dict() for r in listed] == [r.to_dict() for r in attempts]
        assert (await store.get_conversation("c1")).meta == {"title": "Weather"}
        ledger = await store.get_ledger("c1")
        assert ledger is not None and (ledger.blob, ledger.version) == ("ledger", 1)
        assert await store.get_token_counts("c1", "o200k_base") == {"msg_1": 4}


async def test_from_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("sqlite://", "sqlite:///:memory:"):
        async with SQLiteStore.from_url(url) as store:
            assert store.path == ":memory:"
    async with SQLiteStore.from_url("sqlite:///relative.db") as store:
        assert store.path == "relative.db" and (tmp_path / "relative.db").exists()
    async with SQLiteStore.from_url(f"sqlite:///{tmp_path / 'absolute.db'}", timeout=1.0) as store:
        assert store.path == str(tmp_path / "absolute.db")
    for bad in ("postgresql://host/db", "sqlite://host/db", "sqlite:///x.db?mode=ro", "x.db"):
        with pytest.raises(StoreError):
            SQLiteStore.from_url(bad)


async def test_a_10000_node_path_is_one_query_whole_or_limited(
    tmp_path: Path, traced: list[tuple[int, str]]
) -> None:
    nodes = chain(10_000)
    async with SQLiteStore(tmp_path / "db.sqlite") as store:
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", nodes, expected_head=None, new_head="n9999")
        calls = {
            "whole": lambda: store.active_path("c1"),
            "from a leaf": lambda: store.active_path("c1", "n5000"),
            "last 50": lambda: store.active_path("c1", limit=50),
        }
        paths = {}
        for name, call in calls.items():
            traced.clear()
            paths[name] = await call()
            assert len(traced) == 1, (name, traced)
    assert [n.id for n in paths["whole"]] == [n.id for n in nodes]
    assert [n.id for n in paths["from a leaf"]] == [f"n{i}" for i in range(5001)]
    assert [n.id for n in paths["last 50"]] == [f"n{i}" for i in range(9950, 10_000)]


async def test_parents_written_after_their_children_are_linked(tmp_path: Path) -> None:
    nodes = chain(6)
    async with SQLiteStore(tmp_path / "db.sqlite") as store:
        await store.create_conversation("c1", strategy="replay")
        # Children before parents in one batch; a node whose parent is not stored is refused.
        await store.commit("c1", nodes[3::-1], expected_head=None, new_head="n3")
        with pytest.raises(NodeNotFoundError, match="parent of node 'n5'"):
            await store.commit("c1", [nodes[5]], expected_head="n3", new_head="n3")
        await store.commit("c1", [nodes[5], nodes[4]], expected_head="n3", new_head="n5")
        assert [n.id for n in await store.active_path("c1")] == [n.id for n in nodes]
        assert [n.id for n in await store.active_path("c1", limit=2)] == ["n4", "n5"]


async def test_a_broken_parent_chain_is_reported(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    async with SQLiteStore(db) as store:
        await store.create_conversation("c1", strategy="replay")
        orphan = Node("orphan", None, "user", "complete")
        await store.commit("c1", [orphan], expected_head=None, new_head="orphan")
    # Break the file behind the store's back (the store refuses to store an orphan).
    data = orphan.to_dict() | {"parent_id": "gone"}
    raw(
        db, "UPDATE nodes SET parent_id = 'gone', data = ? WHERE id = 'orphan'", (json.dumps(data),)
    )
    async with SQLiteStore(db) as store:
        with pytest.raises(StoreError, match="broken parent chain"):
            await store.active_path("c1")
        with pytest.raises(StoreError, match="broken"):
            await store.load_graph("c1")


async def test_a_cycle_written_into_the_file_is_a_store_error(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    nodes = chain(2_000)
    async with SQLiteStore(db) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", nodes, expected_head=None, new_head="n1999")
    # Corrupt the file behind the store's back: the root's parent becomes the leaf.
    root = nodes[0].to_dict() | {"parent_id": "n1999"}
    raw(
        db,
        "UPDATE nodes SET parent_id = 'n1999', data = ?,"
        " parent_seq = (SELECT seq FROM nodes WHERE id = 'n1999') WHERE id = 'n0'",
        (json.dumps(root),),
    )
    async with SQLiteStore(db) as store:
        for call in (
            lambda: store.active_path("c1"),
            lambda: store.active_path("c1", "n7"),
            lambda: store.active_path("c1", limit=5_000),
            lambda: store.load_graph("c1"),
        ):
            with pytest.raises(StoreError, match=r"broken|cycle"):
                await call()
        assert [n.id for n in await store.active_path("c1", limit=3)] == ["n1997", "n1998", "n1999"]


async def test_text_sqlite_cannot_encode_is_refused_with_nothing_written(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "db.sqlite") as store:
        with pytest.raises(StoreError, match="JSON"):
            await store.create_conversation("c1", strategy="replay", meta={"when": object()})
        await store.create_conversation("c1", strategy="replay")
        bad = [Node("ok", None, "user", "complete"), Node("bad", "ok", "user", "complete")]
        bad[1].items.append({"type": "message", "content": "lone \ud800 surrogate"})
        with pytest.raises(StoreError):
            await store.commit("c1", bad, expected_head=None, new_head="bad")
        assert len(await store.load_graph("c1")) == 0
        assert await store.get_head("c1") is None


async def test_two_stores_on_one_file_one_ledger_writer_wins(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    async with SQLiteStore(db) as first, SQLiteStore(db) as second:
        await first.put_ledger("k", "v1", expected_version=0, holder=None, held_until=None)
        results = await asyncio.gather(
            first.put_ledger("k", "first", expected_version=1, holder="a", held_until=9.0),
            second.put_ledger("k", "second", expected_version=1, holder="b", held_until=9.0),
            return_exceptions=True,
        )
        assert sorted(type(r).__name__ for r in results) == ["ConcurrentUpdateError", "int"]
        winner = "first" if results[0] == 2 else "second"
        for store in (first, second):
            record = await store.get_ledger("k")
            assert record is not None and (record.blob, record.version) == (winner, 2)


# -- schema versions ---------------------------------------------------------------------------

LATEST = sqlite.MIGRATIONS[-1][0]
NEXT = LATEST + 1

# The schema as releases before version 3 wrote it, frozen here: old files look like this.
OLD_SCHEMA = {
    1: """
        CREATE TABLE conversations (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
            strategy TEXT NOT NULL, meta TEXT NOT NULL, created_at REAL NOT NULL, head TEXT);
        CREATE TABLE nodes (seq INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations (id), id TEXT NOT NULL,
            parent_id TEXT, data TEXT NOT NULL, UNIQUE (conversation_id, id));
        CREATE TABLE attempts (seq INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations (id),
            attempt_id TEXT NOT NULL, message_id TEXT NOT NULL, started_at REAL,
            data TEXT NOT NULL, UNIQUE (conversation_id, attempt_id));
        CREATE INDEX attempts_by_message ON attempts (conversation_id, message_id)
    """,
    2: """
        CREATE TABLE run_states (conversation_id TEXT NOT NULL REFERENCES conversations (id),
            attempt_id TEXT NOT NULL, data TEXT NOT NULL, updated_at REAL NOT NULL,
            PRIMARY KEY (conversation_id, attempt_id))
    """,
}


def ended(node: Node) -> AttemptStatus:
    """The status the attempt record of ``node`` holds: an edit that made the node invalid
    leaves its attempt's final status as it was."""
    status = (
        node.meta.get("status_before_invalid", "complete")
        if node.status == "invalid"
        else node.status
    )
    return cast(AttemptStatus, status)


def old_database(
    path: Path, version: int, *, journal: str = "wal"
) -> tuple[dict[str, ConversationGraph], list[AttemptRecord]]:
    """A database as a release at schema ``version`` left it: two conversations, attempts."""
    graphs = {cid: sample_graph(cid) for cid in ("c1", "c2")}
    attempts = [
        AttemptRecord(n.id, n.attempt_id or "", started_at=n.created_at, status=ended(n))
        for n in graphs["c1"].nodes()
        if n.role == "assistant"
    ]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.execute(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    for v in range(1, version + 1):
        for statement in OLD_SCHEMA[v].split(";"):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?, 0)", (v,))
    for cid, graph in graphs.items():
        conn.execute(
            "INSERT INTO conversations (id, strategy, meta, created_at, head) VALUES (?,?,?,?,?)",
            (cid, "replay", json.dumps({"title": cid}), 12.5, graph.active_leaf),
        )
        # c2's rows are written children first: the migration must link them all the same.
        order = graph.nodes() if cid == "c1" else graph.nodes()[::-1]
        conn.executemany(
            "INSERT INTO nodes (conversation_id, id, parent_id, data) VALUES (?, ?, ?, ?)",
            [(cid, n.id, n.parent_id, json.dumps(n.to_dict())) for n in order],
        )
    conn.executemany(
        "INSERT INTO attempts (conversation_id, attempt_id, message_id, started_at, data)"
        " VALUES ('c1', ?, ?, ?, ?)",
        [(r.attempt_id, r.message_id, r.started_at, json.dumps(r.to_dict())) for r in attempts],
    )
    if version >= 2:
        conn.execute(
            "INSERT INTO run_states VALUES ('c1', ?, 'paused run', 3.0)", (attempts[0].attempt_id,)
        )
    conn.close()
    return graphs, attempts


async def read_back(
    store: SQLiteStore, graphs: dict[str, ConversationGraph], attempts: list[AttemptRecord]
) -> None:
    """Everything ``old_database`` wrote reads back the same, paths walked pointer by pointer."""
    assert await store.list_conversations() == ["c1", "c2"]
    for cid, graph in graphs.items():
        loaded = await store.load_graph(cid)
        by_id = sorted((n.to_dict() for n in loaded.nodes()), key=lambda d: d["id"])
        assert by_id == sorted((n.to_dict() for n in graph.nodes()), key=lambda d: d["id"])
        assert loaded.active_leaf == graph.active_leaf
        for leaf in graph.branches():
            path = await store.active_path(cid, leaf)
            assert [n.to_dict() for n in path] == [n.to_dict() for n in graph.path_to(leaf)]
        assert (await store.get_conversation(cid)).meta == {"title": cid}
    listed = await store.list_attempts("c1")
    assert [r.to_dict() for r in listed] == [r.to_dict() for r in attempts]


def test_migrations_one_and_two_are_the_released_ones() -> None:
    def words(sql: str) -> list[str]:
        return sql.replace("(", " ( ").replace(")", " ) ").replace(",", " , ").split()

    released = [words(OLD_SCHEMA[v]) for v in (1, 2)]
    assert [words(sql) for _, sql in sqlite.MIGRATIONS[:2]] == released


async def test_a_new_database_records_every_migration_once(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    await SQLiteStore(db).aclose()
    await SQLiteStore(db).aclose()
    versions = [v for v, _ in raw(db, "SELECT version, applied_at FROM schema_version")]
    assert versions == [v for v, _ in sqlite.MIGRATIONS] == [1, 2, 3]


@pytest.mark.parametrize("version", [1, 2])
async def test_an_old_database_migrates_in_place_losing_nothing(
    tmp_path: Path, version: int
) -> None:
    db = tmp_path / "db.sqlite"
    graphs, attempts = old_database(db, version)
    async with SQLiteStore(db) as store:
        await read_back(store, graphs, attempts)
        expected_run = "paused run" if version >= 2 else None
        assert await store.get_run_state("c1", attempts[0].attempt_id) == expected_run
        # New writes link to migrated rows.
        graph = graphs["c1"]
        head = graph.active_leaf
        graph.add_user("after the migration")
        await store.commit(
            "c1", graph.take_changes(), expected_head=head, new_head=graph.active_leaf
        )
        path = await store.active_path("c1")
        assert [n.id for n in path] == [n.id for n in graph.active_path()]
        assert await store.active_path("c1", limit=1) == path[-1:]
        await store.put_ledger("c1", "x", expected_version=0, holder=None, held_until=None)
        await store.put_token_counts("c1", "o200k_base", {path[0].id: 3})
    assert [v for (v,) in raw(db, "SELECT version FROM schema_version")] == [1, 2, 3]


async def test_a_newer_migration_is_applied_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "db.sqlite"
    async with SQLiteStore(db) as store:
        await store.create_conversation("c1", strategy="replay")
    extra = (NEXT, "ALTER TABLE conversations ADD COLUMN title TEXT; CREATE TABLE notes (x TEXT)")
    monkeypatch.setattr(sqlite, "MIGRATIONS", [*sqlite.MIGRATIONS, extra])
    async with SQLiteStore(db) as store:
        assert await store.list_conversations() == ["c1"]
    assert [v for (v,) in raw(db, "SELECT version FROM schema_version")] == [*range(1, NEXT + 1)]
    assert raw(db, "SELECT title FROM conversations") == [(None,)]


async def test_a_failing_migration_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "db.sqlite"
    await SQLiteStore(db).aclose()
    broken = (NEXT, "CREATE TABLE half (x TEXT); CREATE TABLE nodes (x TEXT)")
    monkeypatch.setattr(sqlite, "MIGRATIONS", [*sqlite.MIGRATIONS, broken])
    with pytest.raises(StoreError, match="already exists"):
        SQLiteStore(db)
    assert [v for (v,) in raw(db, "SELECT version FROM schema_version")] == [*range(1, NEXT)]
    assert raw(db, "SELECT name FROM sqlite_master WHERE name = 'half'") == []


def test_migrations_out_of_order_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite, "MIGRATIONS", [(2, "SELECT 1"), (1, "SELECT 1")])
    with pytest.raises(StoreError, match="increasing"):
        SQLiteStore(tmp_path / "db.sqlite")


@pytest.mark.parametrize("read_only", [False, True])
async def test_a_database_from_a_newer_version_fails_fast(tmp_path: Path, read_only: bool) -> None:
    db = tmp_path / "db.sqlite"
    await SQLiteStore(db).aclose()
    raw(db, "INSERT INTO schema_version VALUES (999, 0)")
    with pytest.raises(StoreError, match="schema version 999 is newer"):
        SQLiteStore(db, read_only=read_only)


@pytest.mark.parametrize("read_only", [False, True])
def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path, read_only: bool) -> None:
    db = tmp_path / "db.sqlite"
    db.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError):
        SQLiteStore(db, read_only=read_only)
    assert db.read_bytes() == b"not a database at all" * 100


def foreign_database(path: Path) -> str:
    """Another application's database (rollback journal, its own tables); its digest."""
    raw(path, "CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, message_data TEXT)")
    raw(path, "INSERT INTO agent_messages (message_data) VALUES ('hello')")
    return digest(path)


@pytest.mark.parametrize("read_only", [False, True])
def test_a_foreign_database_is_refused_and_left_alone(tmp_path: Path, read_only: bool) -> None:
    db = tmp_path / "other-app.db"
    before = foreign_database(db)
    with pytest.raises(StoreError, match="is not an agents-state-ext database"):
        SQLiteStore(db, read_only=read_only)
    assert digest(db) == before
    assert raw(db, "PRAGMA journal_mode") == [("delete",)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-app.db"]


# -- read-only ---------------------------------------------------------------------------------


def test_read_only_refuses_a_missing_file_and_memory(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        SQLiteStore(tmp_path / "missing.db", read_only=True)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(StoreError, match="needs a database file"):
        SQLiteStore(":memory:", read_only=True)


def test_read_only_refuses_an_empty_file_or_database(tmp_path: Path) -> None:
    empty_file = tmp_path / "empty.db"
    empty_file.touch()
    empty_db = tmp_path / "empty-db.db"
    raw(empty_db, "CREATE TABLE t (x)")
    raw(empty_db, "DROP TABLE t")
    for db in (empty_file, empty_db):
        before = digest(db)
        with pytest.raises(StoreError, match="is not an agents-state-ext database"):
            SQLiteStore(db, read_only=True)
        assert digest(db) == before


async def test_read_only_reads_everything_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    graph = sample_graph("c1")
    async with SQLiteStore(db) as store:
        await store.create_conversation("c1", strategy="replay", meta={"title": "t"})
        await store.commit("c1", graph.nodes(), expected_head=None, new_head=graph.active_leaf)
        await store.put_attempt("c1", AttemptRecord("m1", "a1", started_at=1.0))
        await store.put_run_state("c1", "a1", "paused")
        await store.put_ledger("c1", "ledger", expected_version=0, holder=None, held_until=None)
        await store.put_token_counts("c1", "enc", {"m1": 3})
    before, schema = digest(db), raw(db, "SELECT name, sql FROM sqlite_master ORDER BY name")
    async with SQLiteStore(db, read_only=True) as store:
        assert await store.list_conversations() == ["c1"]
        assert (await store.load_graph("c1")).to_dict() == graph.to_dict()
        path = await store.active_path("c1")
        assert [n.id for n in path] == [n.id for n in graph.active_path()]
        assert [r.attempt_id for r in await store.list_attempts("c1")] == ["a1"]
        assert await store.get_run_state("c1", "a1") == "paused"
        ledger = await store.get_ledger("c1")
        assert ledger is not None and ledger.blob == "ledger"
        assert await store.get_token_counts("c1", "enc") == {"m1": 3}
        writes = {
            "create_conversation": lambda: store.create_conversation("c2", strategy="replay"),
            "update_conversation_meta": lambda: store.update_conversation_meta("c1", {"x": 1}),
            "delete_conversation": lambda: store.delete_conversation("c1"),
            "commit": lambda: store.commit("c1", [], expected_head=path[-1].id, new_head=None),
            "put_attempt": lambda: store.put_attempt("c1", AttemptRecord("m1", "a2")),
            "put_run_state": lambda: store.put_run_state("c1", "a1", "x"),
            "delete_run_state": lambda: store.delete_run_state("c1", "a1"),
            "put_ledger": lambda: store.put_ledger(
                "c1", "x", expected_version=1, holder=None, held_until=None
            ),
            "delete_ledger": lambda: store.delete_ledger("c1"),
            "put_token_counts": lambda: store.put_token_counts("c1", "enc", {"m1": 4}),
        }
        for write in writes.values():
            with pytest.raises(StoreError, match="read-only"):
                await write()
    assert digest(db) == before
    assert raw(db, "SELECT name, sql FROM sqlite_master ORDER BY name") == schema
    # SQLite creates the shared-memory index beside a WAL database even for a reader (see
    # the module docs); the write-ahead log it leaves is empty.
    wal = tmp_path / "db.sqlite-wal"
    assert not wal.exists() or wal.stat().st_size == 0


async def test_read_only_never_switches_the_journal_or_adds_side_files(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    old_database(db, 2, journal="delete")
    before = digest(db)
    async with SQLiteStore(db, read_only=True) as store:
        await store.list_conversations()
    assert digest(db) == before
    assert raw(db, "PRAGMA journal_mode") == [("delete",)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.sqlite"]


@pytest.mark.parametrize("version", [1, 2])
async def test_read_only_reads_an_old_schema_without_migrating_it(
    tmp_path: Path, version: int
) -> None:
    db = tmp_path / "db.sqlite"
    graphs, attempts = old_database(db, version)
    before = digest(db)
    async with SQLiteStore(db, read_only=True) as store:
        await read_back(store, graphs, attempts)
        expected_run = "paused run" if version >= 2 else None
        assert await store.get_run_state("c1", attempts[0].attempt_id) == expected_run
        assert await store.get_ledger("c1") is None
        assert await store.get_token_counts("c1", "o200k_base") == {}
        last = await store.active_path("c1", limit=2)
        assert [n.id for n in last] == [n.id for n in graphs["c1"].active_path()[-2:]]
    assert digest(db) == before
    versions = [v for (v,) in raw(db, "SELECT version FROM schema_version")]
    assert versions == list(range(1, version + 1))


# -- several processes -------------------------------------------------------------------------

CHILD = """
import asyncio, sys, time
from pathlib import Path
from agents_state_ext.errors import ConcurrentUpdateError
from agents_state_ext.stores import SQLiteStore

async def main():
{body}

asyncio.run(main())
"""

RACE = """
    db, name, sync = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    async with SQLiteStore(db, timeout=30) as store:
        graph = await store.load_graph("c1")
        head = graph.active_leaf
        graph.add_user(name)
        (sync / f"ready-{name}").touch()
        while not (sync / "go").exists():
            await asyncio.sleep(0.005)
        try:
            await store.commit(
                "c1", graph.take_changes(), expected_head=head, new_head=graph.active_leaf
            )
            print("won")
        except ConcurrentUpdateError:
            print("lost")
"""

APPEND = """
    db, name, turns, sync = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    conflicts = 0
    async with SQLiteStore(db, timeout=30) as store:
        (sync / f"ready-{name}").touch()
        while not (sync / "go").exists():
            await asyncio.sleep(0.005)
        for i in range(turns):
            while True:
                graph = await store.load_graph("c1")
                head = graph.active_leaf
                graph.add_user(f"{name}-{i}")
                reply = graph.start_attempt()
                graph.complete(reply.id, items=[{"content": f"re {name}-{i}"}])
                try:
                    await store.commit(
                        "c1", graph.take_changes(), expected_head=head, new_head=reply.id
                    )
                    break
                except ConcurrentUpdateError:
                    conflicts += 1
    print(conflicts)
"""


def run_children(body: str, argvs: list[list[str]], sync: Path) -> list[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    code = CHILD.format(body=body)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", code, *argv],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    deadline = time.monotonic() + 60
    while len(list(sync.glob("ready-*"))) < len(argvs) and time.monotonic() < deadline:
        if any(child.poll() not in (None, 0) for child in children):
            break
        time.sleep(0.01)
    (sync / "go").touch()
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        outputs.append(out.strip())
    return outputs


async def seeded(tmp_path: Path) -> Path:
    db = tmp_path / "db.sqlite"
    async with SQLiteStore(db) as store:
        await store.create_conversation("c1", strategy="replay")
        system = Node("sys", None, "system", "complete", [{"content": "Be brief."}])
        await store.commit("c1", [system], expected_head=None, new_head="sys")
    (tmp_path / "sync").mkdir()
    return db


async def test_two_processes_from_the_same_head_exactly_one_wins(tmp_path: Path) -> None:
    db = await seeded(tmp_path)
    sync = tmp_path / "sync"
    argvs = [[str(db), "a", str(sync)], [str(db), "b", str(sync)]]
    results = await asyncio.to_thread(run_children, RACE, argvs, sync)
    assert sorted(results) == ["lost", "won"]
    async with SQLiteStore(db) as store:
        path = await store.active_path("c1")
        assert len(await store.load_graph("c1")) == 2
    winner = "a" if results[0] == "won" else "b"
    assert [n.text() for n in path] == ["Be brief.", winner]


async def test_two_processes_appending_with_retry_loops_lose_nothing(tmp_path: Path) -> None:
    db = await seeded(tmp_path)
    sync, turns = tmp_path / "sync", 40
    argvs = [[str(db), name, str(turns), str(sync)] for name in ("a", "b")]
    # Each child prints how many commits it lost and retried: usually some, never guaranteed
    # (the race test above is the deterministic proof that a loser sees the error).
    conflicts = await asyncio.to_thread(run_children, APPEND, argvs, sync)
    async with SQLiteStore(db) as store:
        path = await store.active_path("c1")
        graph = await store.load_graph("c1")
    assert len(graph) == len(path) == 1 + 2 * 2 * turns  # no orphaned or lost node
    users = [n.text() for n in path if n.role == "user"]
    for name in ("a", "b"):
        assert [u for u in users if u.startswith(name)] == [f"{name}-{i}" for i in range(turns)]
    assert all(c.isdigit() for c in conflicts)
