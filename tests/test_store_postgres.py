"""What only PostgresStore must show: migrations, schemas, cross-process compare-and-set.

The conformance suite runs against PostgreSQL from ``test_store_conformance.py``. These tests
need ``STATE_EXT_POSTGRES_URL`` (they skip visibly without it); each uses fresh schemas and
drops them afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from _backends import postgres_cleanup, postgres_url, unique_name

from agents_state_ext._attempts import AttemptRecord
from agents_state_ext._graph import ConversationGraph
from agents_state_ext._nodes import Node, Role
from agents_state_ext.errors import ConcurrentUpdateError, NodeNotFoundError, StoreError

pytestmark = pytest.mark.anyio

psycopg = pytest.importorskip("psycopg")
postgres = pytest.importorskip("agents_state_ext.stores.postgres")
PostgresStore = postgres.PostgresStore

WORKER = Path(__file__).with_name("_pg_worker.py")
FINAL_STATUSES = {"complete", "cancelled", "failed"}


@pytest.fixture
def url() -> str:
    return postgres_url()


@pytest.fixture
async def new_schema(url: str) -> AsyncIterator[Callable[[], str]]:
    """Makes fresh schema names; every one is dropped after the test."""
    made: list[str] = []

    def make() -> str:
        made.append(unique_name("pgtest"))
        return made[-1]

    yield make
    await postgres_cleanup(made)


async def query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of one statement run on a connection of its own, outside any store."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(sql, params)
        return await cur.fetchall() if cur.description else []


def chain(*ids: str) -> list[Node]:
    """Nodes each answering the one before (user, assistant, user, ...)."""
    roles: tuple[Role, Role] = ("user", "assistant")
    return [
        Node(node_id, ids[i - 1] if i else None, roles[i % 2], "complete")
        for i, node_id in enumerate(ids)
    ]


# -- migrations ----------------------------------------------------------------------------------


async def test_connect_creates_the_schema_with_every_table(
    url: str, new_schema: Callable[[], str]
) -> None:
    schema = new_schema()
    async with await PostgresStore.connect(url, schema=schema) as store:
        await store.create_conversation("c1", strategy="replay")
    tables = await query(
        url, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
    )
    assert {t for (t,) in tables} == {
        "schema_version",
        "conversations",
        "nodes",
        "attempts",
        "run_states",
        "ledgers",
        "token_counts",
    }
    versions = await query(url, f'SELECT version FROM "{schema}".schema_version ORDER BY 1')
    assert [v for (v,) in versions] == [v for v, _ in postgres.MIGRATIONS]
    rows = await query(url, f'SELECT id FROM "{schema}".conversations')
    assert rows == [("c1",)]


async def test_concurrent_connects_migrate_once(url: str, new_schema: Callable[[], str]) -> None:
    schema = new_schema()
    stores = await asyncio.gather(
        *(PostgresStore.connect(url, schema=schema, max_size=2) for _ in range(4))
    )
    try:
        await stores[0].create_conversation("c1", strategy="replay")
        for store in stores:
            assert await store.list_conversations() == ["c1"]
    finally:
        for store in stores:
            await store.aclose()
    versions = await query(url, f'SELECT version FROM "{schema}".schema_version ORDER BY 1')
    assert [v for (v,) in versions] == [v for v, _ in postgres.MIGRATIONS]


async def test_migrations_apply_in_order_and_once(
    url: str, new_schema: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = new_schema()
    await (await PostgresStore.connect(url, schema=schema)).aclose()
    latest = postgres.MIGRATIONS[-1][0]
    newer = [
        *postgres.MIGRATIONS,
        (latest + 1, "CREATE TABLE extra (a integer)"),
        (latest + 2, "ALTER TABLE extra ADD COLUMN b integer; INSERT INTO extra VALUES (1, 2)"),
    ]
    monkeypatch.setattr(postgres, "MIGRATIONS", newer)
    for _ in range(2):  # the second connect applies nothing (a rerun would fail or add a row)
        await (await PostgresStore.connect(url, schema=schema)).aclose()
    assert await query(url, f'SELECT a, b FROM "{schema}".extra') == [(1, 2)]
    versions = await query(url, f'SELECT version FROM "{schema}".schema_version ORDER BY 1')
    assert [v for (v,) in versions] == [v for v, _ in newer]


async def test_a_database_from_a_newer_version_is_refused(
    url: str, new_schema: Callable[[], str]
) -> None:
    schema = new_schema()
    async with await PostgresStore.connect(url, schema=schema) as store:
        await store.create_conversation("c1", strategy="replay")
    newer = postgres.MIGRATIONS[-1][0] + 1
    await query(url, f'INSERT INTO "{schema}".schema_version VALUES (%s, 0)', (newer,))
    with pytest.raises(StoreError, match=f"schema version {newer} is newer"):
        await PostgresStore.connect(url, schema=schema)
    assert await query(url, f'SELECT id FROM "{schema}".conversations') == [("c1",)]


async def test_migrations_out_of_order_are_refused(
    url: str, new_schema: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "MIGRATIONS", [(2, "SELECT 1"), (1, "SELECT 1")])
    with pytest.raises(StoreError, match="strictly increasing"):
        await PostgresStore.connect(url, schema=new_schema())


# -- schemas and addresses -----------------------------------------------------------------------


async def test_schemas_keep_stores_apart(url: str, new_schema: Callable[[], str]) -> None:
    first, second = new_schema(), new_schema()
    async with (
        await PostgresStore.connect(url, schema=first) as a,
        await PostgresStore.connect(url, schema=second) as b,
    ):
        await a.create_conversation("c1", strategy="replay", meta={"store": "a"})
        await b.create_conversation("c1", strategy="previous_response")
        await a.commit("c1", chain("m1", "m2"), expected_head=None, new_head="m2")
        await a.put_ledger("c1", "ledger a", expected_version=0, holder=None, held_until=None)
        assert await b.get_head("c1") is None
        assert len(await b.load_graph("c1")) == 0
        assert await b.get_ledger("c1") is None
        assert (await b.get_conversation("c1")).strategy == "previous_response"
        assert (await a.get_conversation("c1")).meta == {"store": "a"}


async def test_without_a_schema_the_search_path_is_used(
    url: str, new_schema: Callable[[], str]
) -> None:
    schema = new_schema()
    await query(url, f'CREATE SCHEMA "{schema}"')
    conninfo = psycopg.conninfo.make_conninfo(url, options=f"-c search_path={schema}")
    async with await PostgresStore.connect(conninfo) as store:
        await store.create_conversation("c1", strategy="replay")
    assert await query(url, f'SELECT id FROM "{schema}".conversations') == [("c1",)]


async def test_a_sqlalchemy_style_url_is_accepted(url: str, new_schema: Callable[[], str]) -> None:
    if not url.startswith("postgresql://"):
        pytest.skip("needs a postgresql:// URL to rewrite")
    driver_url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    async with await PostgresStore.connect(driver_url, schema=new_schema()) as store:
        await store.create_conversation("c1", strategy="replay")
        assert await store.list_conversations() == ["c1"]


@pytest.mark.parametrize("schema", ["", "a\x00b", "x" * 64])
async def test_a_bad_schema_name_is_refused(url: str, schema: str) -> None:
    with pytest.raises(StoreError):
        await PostgresStore.connect(url, schema=schema)


async def test_an_unreachable_server_is_a_one_line_store_error() -> None:
    with pytest.raises(StoreError) as caught:
        await PostgresStore.connect("postgresql://postgres@127.0.0.1:1/test", timeout=2)
    assert "\n" not in str(caught.value)
    assert "PostgreSQL" in str(caught.value)


async def test_a_database_error_is_a_one_line_store_error(
    url: str, new_schema: Callable[[], str]
) -> None:
    schema = new_schema()
    async with await PostgresStore.connect(url, schema=schema) as store:
        await store.create_conversation("c1", strategy="replay")
        await query(url, f'DROP TABLE "{schema}".attempts')
        with pytest.raises(StoreError) as caught:
            await store.list_attempts("c1")
        assert "\n" not in str(caught.value)
        assert "attempts" in str(caught.value)
        assert await store.list_conversations() == ["c1"]  # the pool still works


async def test_a_closed_store_refuses_work(url: str, new_schema: Callable[[], str]) -> None:
    store = await PostgresStore.connect(url, schema=new_schema())
    await store.aclose()
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.list_conversations()


# -- data ----------------------------------------------------------------------------------------


async def test_json_comes_back_exactly_as_given(url: str, new_schema: Callable[[], str]) -> None:
    meta = {"z": 1, "a": {"y": [1.5, 1e100, 2**70], "b": None}, "text": "NUL \x00 ☕ 𝄞"}
    items = [{"type": "message", "role": "user", "content": "\x00 and \\u0000", "z": 0, "a": 1}]
    node = Node("m1", None, "user", "complete", items, meta=dict(meta))
    async with await PostgresStore.connect(url, schema=new_schema()) as store:
        await store.create_conversation("c1", strategy="replay", meta=meta)
        await store.commit("c1", [node], expected_head=None, new_head="m1")
        stored = await store.get_node("c1", "m1")
        assert json.dumps(stored.to_dict()) == json.dumps(node.to_dict())  # same key order
        assert json.dumps((await store.get_conversation("c1")).meta) == json.dumps(meta)
        assert [n.to_dict() for n in await store.active_path("c1")] == [node.to_dict()]


@pytest.mark.parametrize("bad", ["a\x00b", "\ud800", "", 7, ["c1"]])
async def test_an_id_that_is_not_storable_text_is_a_store_error(
    url: str, new_schema: Callable[[], str], bad: Any
) -> None:
    async with await PostgresStore.connect(url, schema=new_schema()) as store:
        await store.create_conversation("c1", strategy="replay")
        with pytest.raises(StoreError, match="id"):
            await store.create_conversation(bad, strategy="replay")
        with pytest.raises(StoreError, match="node id"):
            await store.commit("c1", [Node(bad, None, "user", "complete")], **_from_start("m1"))
        with pytest.raises(StoreError, match="attempt id"):
            await store.put_attempt("c1", AttemptRecord("m1", bad))
        with pytest.raises(StoreError, match="ledger key"):
            await store.put_ledger(bad, "x", expected_version=0, holder=None, held_until=None)
        assert await store.list_conversations() == ["c1"]
        assert len(await store.load_graph("c1")) == 0


async def test_text_that_is_not_valid_unicode_is_a_store_error(
    url: str, new_schema: Callable[[], str]
) -> None:
    node = Node("m1", None, "user", "complete", [{"content": "lone \ud800"}])
    async with await PostgresStore.connect(url, schema=new_schema()) as store:
        await store.create_conversation("c1", strategy="replay")
        with pytest.raises(StoreError, match="Unicode"):
            await store.commit("c1", [node], expected_head=None, new_head="m1")
        assert await store.get_head("c1") is None


def _from_start(new_head: str) -> dict[str, Any]:
    return {"expected_head": None, "new_head": new_head}


# -- the integer parent pointer ------------------------------------------------------------------


async def test_a_parent_cycle_is_a_store_error_at_once(
    url: str, new_schema: Callable[[], str]
) -> None:
    schema = new_schema()
    async with await PostgresStore.connect(url, schema=schema) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", chain("m1", "m2", "m3", "m4"), **_from_start("m4"))
        # Corrupt the stored tree behind the store's back: m1's parent becomes m3.
        await query(
            url,
            f'UPDATE "{schema}".nodes SET parent_id = %s, parent_seq ='
            f' (SELECT seq FROM "{schema}".nodes WHERE id = %s),'
            ' data = replace(data, \'"parent_id":null\', \'"parent_id":"m3"\')'
            " WHERE id = %s",
            ("m3", "m3", "m1"),
        )
        for limit in (None, 5, 1000, 10**12):
            with pytest.raises(StoreError, match="broken parent chain"):
                await store.active_path("c1", limit=limit)
        with pytest.raises(StoreError, match="broken"):
            await store.load_graph("c1")
        # A limit that stops before the walk comes round answers, as the in-memory store does.
        assert [n.id for n in await store.active_path("c1", limit=3)] == ["m2", "m3", "m4"]


async def test_a_node_before_its_parent_is_refused_and_linked_when_written_with_it(
    url: str, new_schema: Callable[[], str]
) -> None:
    nodes = chain("m1", "m2", "m3")
    async with await PostgresStore.connect(url, schema=new_schema()) as store:
        await store.create_conversation("c1", strategy="replay")
        with pytest.raises(NodeNotFoundError, match=r"'m2' .* parent of node 'm3'"):
            await store.commit("c1", nodes[2:], **_from_start("m3"))  # m3 before its parents
        assert (await store.get_head("c1"), len(await store.load_graph("c1"))) == (None, 0)
        await store.commit("c1", nodes[::-1], **_from_start("m3"))  # children first, one commit
        assert [n.id for n in await store.active_path("c1")] == ["m1", "m2", "m3"]
        assert [n.id for n in (await store.load_graph("c1")).nodes()] == ["m3", "m2", "m1"]


async def test_a_rewritten_node_keeps_its_place_and_links(
    url: str, new_schema: Callable[[], str]
) -> None:
    async with await PostgresStore.connect(url, schema=new_schema()) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", chain("m1", "m2", "m3"), **_from_start("m3"))
        moved = Node("m3", "m1", "user", "complete", meta={"moved": True})
        await store.commit("c1", [moved], expected_head="m3", new_head="m3")
        assert [n.id for n in await store.active_path("c1")] == ["m1", "m3"]
        assert [n.id for n in (await store.load_graph("c1")).nodes()] == ["m1", "m2", "m3"]


# -- compare-and-set across pools ----------------------------------------------------------------


async def test_commit_compare_and_set_holds_across_two_pools(
    url: str, new_schema: Callable[[], str]
) -> None:
    schema = new_schema()
    async with (
        await PostgresStore.connect(url, schema=schema) as one,
        await PostgresStore.connect(url, schema=schema) as two,
    ):
        await one.create_conversation("c1", strategy="replay")
        await one.commit("c1", chain("root"), **_from_start("root"))
        stale = await two.get_head("c1")
        await one.commit("c1", chain("root", "a")[1:], expected_head=stale, new_head="a")
        with pytest.raises(ConcurrentUpdateError):
            await two.commit(
                "c1",
                chain("root", "b")[1:],
                expected_head=stale,
                new_head="b",
                attempts=[AttemptRecord("b", "att_b")],
            )
        assert await one.get_head("c1") == "a"
        assert "b" not in await two.load_graph("c1")
        assert await one.list_attempts("c1") == []

        # Many racing commits from both pools, all from the same head: exactly one wins.
        async def attempt(store: Any, n: int) -> str | None:
            node = Node(f"r{n}", "a", "user", "complete")
            record = AttemptRecord(node.id, f"att_{n}")
            try:
                await store.commit(
                    "c1", [node], expected_head="a", new_head=node.id, attempts=[record]
                )
            except ConcurrentUpdateError:
                return None
            return node.id

        outcomes = await asyncio.gather(*(attempt((one, two)[n % 2], n) for n in range(12)))
        winners = [o for o in outcomes if o is not None]
        assert len(winners) == 1
        graph = await one.load_graph("c1")
        assert graph.active_leaf == winners[0]
        assert [n.id for n in graph.nodes() if n.id[1:].isdigit()] == winners
        assert [r.attempt_id for r in await two.list_attempts("c1")] == ["att_" + winners[0][1:]]


async def test_ledger_compare_and_set_holds_across_two_pools(
    url: str, new_schema: Callable[[], str]
) -> None:
    schema = new_schema()
    async with (
        await PostgresStore.connect(url, schema=schema) as one,
        await PostgresStore.connect(url, schema=schema) as two,
    ):

        async def write(store: Any, n: int, expected: int) -> int | None:
            try:
                return int(
                    await store.put_ledger(
                        "k", f"w{n}", expected_version=expected, holder=f"w{n}", held_until=9.5
                    )
                )
            except ConcurrentUpdateError:
                return None

        for expected in (0, 1, 2):
            outcomes = await asyncio.gather(
                *(write((one, two)[n % 2], n, expected) for n in range(8))
            )
            assert [o for o in outcomes if o is not None] == [expected + 1]
            winner = next(n for n, o in enumerate(outcomes) if o is not None)
            record = await two.get_ledger("k")
            assert record is not None
            assert (record.blob, record.version, record.holder, record.held_until) == (
                f"w{winner}",
                expected + 1,
                f"w{winner}",
                9.5,
            )


# -- several OS processes on one conversation ----------------------------------------------------


async def test_many_processes_on_one_conversation_lose_no_write(
    url: str, new_schema: Callable[[], str]
) -> None:
    workers, ops = 4, int(os.environ.get("STATE_EXT_MULTIPROC_OPS", "6"))
    schema = new_schema()
    store = await PostgresStore.connect(url, schema=schema)
    async with store:
        await store.create_conversation("shared", strategy="replay")
        seed = ConversationGraph("shared")
        seed.add_system("Be brief.")
        await store.commit("shared", seed.take_changes(), **_from_start(str(seed.active_leaf)))

        paths = [str(WORKER.parents[1]), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
        args = (url, schema, "shared", str(workers), str(ops))
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                str(WORKER),
                *args[:3],
                str(index),
                *args[3:],
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
            for index in range(workers)
        ]
        outputs = await asyncio.wait_for(
            asyncio.gather(*(proc.communicate() for proc in procs)), timeout=600
        )
        for proc, (_, err) in zip(procs, outputs, strict=True):
            assert proc.returncode == 0, err.decode()
        reports = [json.loads(out) for out, _ in outputs]

        graph = await store.load_graph("shared")  # loads: the stored graph is a tree
        stored = {node.id: node for node in graph.nodes()}
        committed: dict[str, str] = {}
        for report in reports:
            committed.update(report["nodes"])
        # Zero lost writes: every committed node is there, with the text its worker wrote.
        assert {i: stored[i].text() for i in committed if i in stored} == committed
        assert all(stored[i].status == "complete" for i in committed)
        # A lost compare-and-set left nothing behind.
        lost = {i for report in reports for i in report["lost_nodes"]}
        assert lost and not lost & stored.keys()
        assert len(stored) == len(committed) + 1  # + the seed
        # Every attempt record is there and final; none of the lost ones is.
        records = await store.list_attempts("shared")
        done = [a for report in reports for a in report["attempts"]]
        assert sorted(r.attempt_id for r in records) == sorted(done)
        assert {r.status for r in records} <= FINAL_STATUSES
        lost_attempts = {a for report in reports for a in report["lost_attempts"]}
        assert not lost_attempts & {r.attempt_id for r in records}
        # Conflicts surfaced: at least every worker but one lost its first commit.
        assert sum(report["conflicts"] for report in reports) >= workers - 1
        # The head is a stored node and the one-query path agrees with the graph.
        assert graph.active_leaf in stored
        path = await store.active_path("shared")
        assert [n.to_dict() for n in path] == [n.to_dict() for n in graph.active_path()]
        # The ledger counter saw every increment exactly once.
        ledger = await store.get_ledger("counter")
        increments = sum(report["increments"] for report in reports)
        assert ledger is not None and increments == workers * ops
        assert json.loads(ledger.blob) == {"count": increments}
        assert ledger.version == increments
