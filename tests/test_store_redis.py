"""RedisStore: the conformance suite, and what only a shared server can get wrong.

Namespaces, compare-and-set between separate clients and between OS processes, scripts the
server forgot, errors. Needs ``STATE_EXT_REDIS_URL`` (skips visibly without it), except the
tests of a refused connection.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("redis")

import redis.asyncio as aioredis
from _backends import redis_cleanup, redis_url, unique_name

from agents_state_ext._attempts import AttemptRecord
from agents_state_ext._graph import ConversationGraph
from agents_state_ext._nodes import Node, Role
from agents_state_ext.errors import (
    ConcurrentUpdateError,
    NodeNotFoundError,
    StoreDataLostError,
    StoreError,
)
from agents_state_ext.stores._redis_keys import Keys
from agents_state_ext.stores.base import (
    AttemptNotFoundError,
    ConversationStore,
    LedgerStore,
    TokenCountStore,
)
from agents_state_ext.stores.redis import RedisStore

pytestmark = pytest.mark.anyio

WORKER = Path(__file__).with_name("_redis_worker.py")
FINAL = {"complete", "failed", "cancelled"}
Opener = Callable[..., Awaitable[RedisStore]]


@pytest.fixture
def url() -> str:
    return redis_url()


@pytest.fixture
async def open_store(url: str) -> AsyncIterator[Opener]:
    """Opens stores on a namespace (a fresh one unless given); closes and drops them after."""
    stores: list[RedisStore] = []
    namespaces: list[str] = []

    async def open_(namespace: str | None = None) -> RedisStore:
        namespace = namespace or unique_name("test")
        namespaces.append(namespace)
        stores.append(await RedisStore.connect(url, namespace=namespace))
        return stores[-1]

    yield open_
    for store in stores:
        await store.aclose()
    await redis_cleanup(namespaces)


@pytest.fixture
async def raw(url: str) -> AsyncIterator[aioredis.Redis]:
    """A plain client, to do to the server what the store never would."""
    client = aioredis.Redis.from_url(url, decode_responses=True)
    yield client
    await client.aclose()


def chain(length: int, prefix: str = "n") -> list[Node]:
    """A linear branch of ``length`` nodes, root first."""
    nodes: list[Node] = []
    for i in range(length):
        parent = nodes[-1].id if nodes else None
        role: Role = "user" if i % 2 == 0 else "assistant"
        nodes.append(Node(f"{prefix}{i}", parent, role, "complete", [{"content": f"#{i}"}]))
    return nodes


async def stored_graph(store: RedisStore, conversation_id: str = "c1") -> ConversationGraph:
    graph = ConversationGraph(conversation_id)
    graph.add_user("hello")
    graph.complete(graph.start_attempt().id, items=[{"role": "assistant", "content": "hi"}])
    await store.create_conversation(conversation_id, strategy="replay")
    await store.commit(
        conversation_id, graph.take_changes(), expected_head=None, new_head=graph.active_leaf
    )
    return graph


# -- the shared suite ------------------------------------------------------------------------


async def test_conformance(url: str) -> None:
    from agents_state_ext.stores.conformance import run_conformance

    namespaces: list[str] = []

    async def factory() -> ConversationStore:
        namespaces.append(unique_name("conformance"))
        return await RedisStore.connect(url, namespace=namespaces[-1])

    try:
        await run_conformance(factory)
    finally:
        await redis_cleanup(namespaces)


async def test_it_is_a_store_with_both_capabilities(open_store: Opener) -> None:
    store = await open_store()
    assert isinstance(store, ConversationStore)
    assert isinstance(store, LedgerStore)
    assert isinstance(store, TokenCountStore)


# -- namespaces and keys ---------------------------------------------------------------------


async def test_namespaces_keep_stores_apart(open_store: Opener) -> None:
    first, second = await open_store(), await open_store()
    await stored_graph(first, "c1")
    await second.create_conversation("c1", strategy="previous_response", meta={"who": "second"})
    await first.put_ledger("c1", "first ledger", expected_version=0, holder=None, held_until=None)
    await first.put_token_counts("c1", "o200k_base", {"a": 1})

    assert len(await second.load_graph("c1")) == 0
    assert (await second.get_conversation("c1")).meta == {"who": "second"}
    assert await second.get_ledger("c1") is None
    assert await second.get_token_counts("c1", "o200k_base") == {}

    await second.delete_conversation("c1")
    assert await first.list_conversations() == ["c1"]
    assert await second.list_conversations() == []


async def test_every_key_lives_under_the_namespace(open_store: Opener) -> None:
    namespace = unique_name("test")
    store, bystander = await open_store(namespace), await open_store()
    await stored_graph(store, "c1")
    await stored_graph(bystander, "c1")
    await store.put_attempt("c1", AttemptRecord("m1", "att_1"))
    await store.put_run_state("c1", "att_1", "paused run")
    await store.put_token_counts("c1", "o200k_base", {"m1": 3})
    await store.put_ledger("c1", "ledger", expected_version=0, holder=None, held_until=None)
    await store.put_ledger("elsewhere", "x", expected_version=0, holder=None, held_until=None)

    assert await redis_cleanup([namespace]) > 0

    assert await store.list_conversations() == []
    # the namespace's epoch mark went with the rest: to this store, c1 was lost, not deleted
    with pytest.raises(StoreDataLostError):
        await store.get_conversation("c1")
    assert await store.get_ledger("c1") is None
    assert await store.get_ledger("elsewhere") is None
    assert len(await bystander.load_graph("c1")) == 2


async def test_delete_removes_every_key_of_the_conversation(
    open_store: Opener, raw: aioredis.Redis
) -> None:
    namespace = unique_name("test")
    store = await open_store(namespace)
    await stored_graph(store, "c1")
    kept = await stored_graph(store, "c2")
    for conversation in ("c1", "c2"):
        await store.put_attempt(conversation, AttemptRecord("m1", "att_1"))
        await store.put_run_state(conversation, "att_1", "paused run")
        await store.put_token_counts(conversation, "o200k_base", {"m1": 3})
        await store.put_token_counts(conversation, "cl100k_base", {"m1": 4})
        await store.put_ledger(conversation, "l", expected_version=0, holder="w", held_until=1.0)

    await store.delete_conversation("c1")

    left = [key async for key in raw.scan_iter(match=f"{namespace}:*")]
    assert [key for key in left if "{2:c1}" in key] == []
    assert any("{2:c2}" in key for key in left)
    assert await store.list_conversations() == ["c2"]
    assert await store.get_ledger("c1") is None
    assert (await store.load_graph("c2")).to_dict() == kept.to_dict()
    assert await store.get_token_counts("c2", "cl100k_base") == {"m1": 4}
    await store.create_conversation("c1", strategy="replay")
    assert len(await store.load_graph("c1")) == 0
    assert await store.list_attempts("c1") == []
    assert await store.get_run_state("c1", "att_1") is None
    assert await store.get_token_counts("c1", "o200k_base") == {}


async def test_ids_that_look_like_key_syntax_stay_apart(open_store: Opener) -> None:
    store = await open_store()
    ids = ["a", "a}:nodes", "a}:tokens:x", "a}", "{a}", "a:b", "*", "2:a"]
    for conversation in ids:
        await store.create_conversation(conversation, strategy=conversation)
        await store.put_token_counts(conversation, "x}:nodes", {"n": len(conversation)})
    for conversation in ids:
        node = Node("n", None, "user", "complete", [{"content": conversation}])
        await store.commit(conversation, [node], expected_head=None, new_head="n")
    assert await store.list_conversations() == ids
    for conversation in ids:
        assert (await store.get_conversation(conversation)).strategy == conversation
        assert await store.get_token_counts(conversation, "x}:nodes") == {"n": len(conversation)}
        nodes = (await store.load_graph(conversation)).nodes()
        assert [n.items for n in nodes] == [[{"content": conversation}]]


# -- compare-and-set between clients ---------------------------------------------------------


async def test_compare_and_set_holds_between_two_clients(open_store: Opener) -> None:
    namespace = unique_name("test")
    mine, theirs = await open_store(namespace), await open_store(namespace)
    await stored_graph(mine, "c1")
    head = await mine.get_head("c1")
    a, b = await mine.load_graph("c1"), await theirs.load_graph("c1")
    a.add_user("from mine")
    b.add_user("from theirs")
    record = AttemptRecord("x", "att_theirs", status="queued")
    await mine.commit("c1", a.take_changes(), expected_head=head, new_head=a.active_leaf)
    lost = b.take_changes()
    with pytest.raises(ConcurrentUpdateError):
        await theirs.commit(
            "c1", lost, expected_head=head, new_head=b.active_leaf, attempts=[record]
        )

    assert await theirs.get_head("c1") == a.active_leaf
    with pytest.raises(NodeNotFoundError):
        await mine.get_node("c1", lost[0].id)
    with pytest.raises(AttemptNotFoundError):
        await mine.get_attempt("c1", "att_theirs")

    await mine.put_ledger("k", "mine", expected_version=0, holder="m", held_until=None)
    with pytest.raises(ConcurrentUpdateError):
        await theirs.put_ledger("k", "theirs", expected_version=0, holder="t", held_until=None)
    record_now = await theirs.get_ledger("k")
    assert record_now is not None
    assert (record_now.blob, record_now.version, record_now.holder) == ("mine", 1, "m")


async def test_of_many_racing_commits_exactly_one_wins(open_store: Opener) -> None:
    namespace = unique_name("test")
    stores = [await open_store(namespace) for _ in range(3)]
    graph = await stored_graph(stores[0], "c1")
    head = graph.active_leaf
    attempts = []
    for i in range(12):
        node = Node(f"racer{i}", head, "user", "complete", [{"content": str(i)}])
        attempts.append(stores[i % 3].commit("c1", [node], expected_head=head, new_head=node.id))
    results = await asyncio.gather(*attempts, return_exceptions=True)

    winners = [i for i, result in enumerate(results) if result is None]
    assert len(winners) == 1
    assert all(isinstance(r, ConcurrentUpdateError) for r in results if r is not None)
    loaded = await stores[1].load_graph("c1")
    assert loaded.active_leaf == f"racer{winners[0]}"
    assert [n.id for n in loaded.nodes() if n.id.startswith("racer")] == [loaded.active_leaf]


async def test_meta_merges_from_several_clients_lose_nothing(open_store: Opener) -> None:
    namespace = unique_name("test")
    stores = [await open_store(namespace) for _ in range(2)]
    await stores[0].create_conversation("c1", strategy="replay", meta={"base": True})
    updates = [stores[i % 2].update_conversation_meta("c1", {f"k{i}": i}) for i in range(20)]
    await asyncio.gather(*updates)
    meta = (await stores[1].get_conversation("c1")).meta
    assert meta == {"base": True, **{f"k{i}": i for i in range(20)}}


async def test_scripts_come_back_after_script_flush(
    open_store: Opener, raw: aioredis.Redis
) -> None:
    store = await open_store()
    graph = await stored_graph(store, "c1")
    await store.put_ledger("k", "v1", expected_version=0, holder=None, held_until=None)

    await raw.script_flush()

    graph.add_user("after the flush")
    head = graph.active_leaf
    await store.commit(
        "c1", graph.take_changes(), expected_head=(await store.get_head("c1")), new_head=head
    )
    assert [n.id for n in await store.active_path("c1", limit=1)] == [head]
    assert await store.put_ledger("k", "v2", expected_version=1, holder=None, held_until=None) == 2
    await store.create_conversation("c2", strategy="replay")
    await store.delete_conversation("c2")
    assert await store.list_conversations() == ["c1"]


# -- walking the graph -----------------------------------------------------------------------


async def test_active_path_walks_a_long_branch_in_one_call(open_store: Opener) -> None:
    store = await open_store()
    nodes = chain(3000)
    await store.create_conversation("c1", strategy="replay")
    await store.commit("c1", nodes, expected_head=None, new_head=nodes[-1].id)
    await store.put_token_counts("c1", "o200k_base", {n.id: i for i, n in enumerate(nodes)})

    full = await store.active_path("c1")
    assert [n.to_dict() for n in full] == [n.to_dict() for n in nodes]
    last = await store.active_path("c1", limit=50)
    assert [n.id for n in last] == [n.id for n in nodes[-50:]]
    middle = await store.active_path("c1", nodes[99].id, limit=10)
    assert [n.id for n in middle] == [n.id for n in nodes[90:100]]
    counts = await store.get_token_counts("c1", "o200k_base")
    assert len(counts) == 3000
    assert counts[nodes[2999].id] == 2999


async def test_a_parent_cycle_or_a_missing_parent_is_a_store_error(
    open_store: Opener, raw: aioredis.Redis
) -> None:
    namespace = unique_name("test")
    store = await open_store(namespace)
    await store.create_conversation("c1", strategy="replay")
    loop = [Node("a", "b", "user", "complete"), Node("b", "a", "assistant", "complete")]
    await store.commit("c1", loop, expected_head=None, new_head="a")
    with pytest.raises(StoreError, match="broken parent chain"):
        await store.active_path("c1")
    with pytest.raises(StoreError):
        await store.load_graph("c1")
    assert [n.id for n in await store.active_path("c1", limit=2)] == ["b", "a"]

    await store.create_conversation("c2", strategy="replay")
    orphan = Node("o", "ghost", "user", "complete")
    with pytest.raises(NodeNotFoundError, match=r"'ghost' .* parent of node 'o'"):
        await store.commit("c2", [orphan], expected_head=None, new_head="o")
    assert await store.get_head("c2") is None
    # Break the data behind the store's back: its root gets a parent nobody stored.
    await store.commit(
        "c2", [Node("o", None, "user", "complete")], expected_head=None, new_head="o"
    )
    await raw.hset(Keys(namespace, "c2").parents, "o", "ghost")
    with pytest.raises(StoreError, match="broken parent chain at 'ghost'"):
        await store.active_path("c2")


# -- errors ----------------------------------------------------------------------------------

BAD_IDS = ["\ud800", "a\x00b", "", ["c1"], 7]


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
async def test_bad_ids_are_refused_before_any_write(open_store: Opener, bad: Any) -> None:
    store = await open_store()
    await store.create_conversation("c1", strategy="replay")
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.create_conversation(bad, strategy="replay"),
        lambda: store.get_conversation(bad),
        lambda: store.commit(
            "c1", [Node(bad, None, "user", "complete")], expected_head=None, new_head=None
        ),
        lambda: store.commit("c1", [], expected_head=bad, new_head=None),
        lambda: store.commit(
            "c1", [], expected_head=None, new_head=None, attempts=[AttemptRecord("m", bad)]
        ),
        lambda: store.active_path("c1", bad),
        lambda: store.put_attempt("c1", AttemptRecord("m", bad)),
        lambda: store.put_run_state("c1", bad, "blob"),
        lambda: store.put_ledger(bad, "blob", expected_version=0, holder=None, held_until=None),
        lambda: store.get_ledger(bad),
        lambda: store.put_token_counts("c1", bad, {"n": 1}),
        lambda: store.get_token_counts("c1", "enc", [bad]),
    ]
    if not isinstance(bad, list):  # a list cannot even be a dict key
        calls.append(lambda: store.put_token_counts("c1", "enc", {bad: 1}))
    for call in calls:
        with pytest.raises(StoreError):
            await call()
    assert await store.list_conversations() == ["c1"]
    assert await store.get_head("c1") is None
    assert await store.list_attempts("c1") == []


async def test_text_redis_cannot_encode_is_a_store_error(open_store: Opener) -> None:
    store = await open_store()
    await store.create_conversation("c1", strategy="replay")
    node = Node("n1", None, "user", "complete", [{"content": "half a pair \ud800"}])
    with pytest.raises(StoreError):
        await store.commit("c1", [node], expected_head=None, new_head="n1")
    assert len(await store.load_graph("c1")) == 0


async def test_a_redis_error_is_a_one_line_store_error(
    open_store: Opener, raw: aioredis.Redis
) -> None:
    namespace = unique_name("test")
    store = await open_store(namespace)
    await store.create_conversation("c1", strategy="replay")
    await raw.set(f"{namespace}:conv:{{2:c1}}:nodes", "not a hash")
    with pytest.raises(StoreError) as caught:
        await store.commit("c1", chain(1), expected_head=None, new_head="n0")
    assert not isinstance(caught.value, ConcurrentUpdateError)
    assert "WRONGTYPE" in str(caught.value)
    assert "\n" not in str(caught.value)


async def test_a_refused_connection_is_a_one_line_store_error() -> None:
    with pytest.raises(StoreError, match="cannot connect to Redis") as caught:
        await RedisStore.connect("redis://user:s3cret@127.0.0.1:1/0", socket_connect_timeout=5)
    assert "\n" not in str(caught.value)
    assert "s3cret" not in str(caught.value)
    with pytest.raises(StoreError, match="cannot use Redis URL"):
        await RedisStore.connect("http://127.0.0.1:6379/0")


async def test_close_is_idempotent_and_a_closed_store_refuses_work(open_store: Opener) -> None:
    store = await open_store()
    await store.create_conversation("c1", strategy="replay")
    await store.aclose()
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.get_conversation("c1")


async def test_a_client_of_your_own_stays_open(url: str, open_store: Opener) -> None:
    namespace = unique_name("test")
    await open_store(namespace)  # registers the namespace for cleanup
    with pytest.raises(StoreError, match="decode_responses"):
        RedisStore(aioredis.Redis.from_url(url), namespace=namespace)
    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        async with RedisStore(client, namespace=namespace) as store:
            await store.create_conversation("c1", strategy="replay")
        assert await client.ping()
    finally:
        await client.aclose()


# -- several OS processes --------------------------------------------------------------------


async def run_workers(url: str, namespace: str, count: int, ops: int) -> list[dict[str, Any]]:
    """Start ``count`` worker processes, release them together, and collect their reports."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(WORKER.parents[1]), *sys.path])}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER),
            url,
            namespace,
            "c1",
            str(worker),
            str(ops),
            str(count),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        for worker in range(count)
    ]
    # No socket timeout (redis-py's default is 5 s): the barrier waits as long as BLPOP says.
    client = aioredis.Redis.from_url(url, decode_responses=True, socket_timeout=None)
    try:
        for _ in range(count):  # the timeout only stops a hang if a worker died early
            assert await client.blpop([f"{namespace}:test:ready"], timeout=120) is not None
        await client.rpush(f"{namespace}:test:go", *["go"] * count)
        outputs = [await proc.communicate() for proc in procs]
    finally:
        await client.aclose()
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    reports = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
        reports.append(json.loads(out))
    return reports


async def test_several_processes_on_one_conversation_lose_nothing(
    url: str, open_store: Opener
) -> None:
    workers = 4
    ops = int(os.environ.get("STATE_EXT_MULTIPROC_OPS", "10"))
    namespace = unique_name("multiproc")
    store = await open_store(namespace)
    await store.create_conversation("c1", strategy="replay")

    reports = await run_workers(url, namespace, workers, ops)

    commits = [commit for report in reports for commit in report["commits"]]
    assert len(commits) == workers * ops
    written = {n["id"]: n for commit in commits for n in commit["nodes"]}
    finals = {a["attempt_id"]: a for commit in commits for a in commit["attempts"]}
    lost = [lost for commit in commits for lost in commit["lost"]]
    lost_nodes = {i for attempt in lost for i in attempt["nodes"]}
    lost_attempts = {i for attempt in lost for i in attempt["attempts"]}
    ledger_conflicts = sum(report["ledger_conflicts"] for report in reports)
    assert lost and ledger_conflicts, "the workers never raced: nothing was tested"

    graph = await store.load_graph("c1")  # raises if the stored graph is not a tree
    assert {n.id: n.to_dict() for n in graph.nodes()} == written  # none lost, none extra
    assert not lost_nodes & set(written)
    assert len([n for n in graph.nodes() if n.parent_id is None]) == 1

    stored = {a.attempt_id: a.to_dict() for a in await store.list_attempts("c1")}
    assert stored == finals
    assert {a["status"] for a in stored.values()} <= FINAL
    assert not lost_attempts & set(stored)

    # Each successful commit moved the head from where the previous one had left it.
    balance: Counter[str | None] = Counter()
    for commit in commits:
        balance[commit["expected"]] -= 1
        balance[commit["new"]] += 1
    head = await store.get_head("c1")
    assert {k: v for k, v in balance.items() if v} == {None: -1, head: 1}

    ledger = await store.get_ledger("c1")
    increments = sum(report["increments"] for report in reports)
    assert ledger is not None
    assert json.loads(ledger.blob) == {"count": increments}
    assert ledger.version == increments == workers * ops
