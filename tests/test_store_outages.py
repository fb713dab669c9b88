"""The served app when its PostgreSQL or Redis fails: typed 503s, workers that heal, lost data.

Against a PostgreSQL and a redis-server each test module starts itself (``tests/_outage.py``),
never the machine's services, behind a proxy that cuts and blackholes connections. Each test
kills, restarts, cuts or blackholes one and asserts what the app answers over HTTP:

- an unreachable store is ``503`` with ``Retry-After`` and a typed error body, never a 400;
- a worker heals by itself once the store is back (the next request succeeds, same app);
- Redis restarted without persistence is ``StoreDataLostError``, never an empty conversation;
- a blackholed PostgreSQL answers as unavailable once the store's timeout is up.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, TypeVar
from uuid import uuid4

import pytest
from _asgi_client import ASGIClient
from _outage import FaultProxy, Postgres, Redis, postgres_store, proxied, running_postgres
from agents import Agent, set_tracing_disabled

from agents_state_ext import InMemoryStore, StoreUnavailableError
from agents_state_ext.server import RedisStopBus, create_app
from agents_state_ext.stores import ConversationStore
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)

T = TypeVar("T")
TIMEOUT = 2.0  # the PostgreSQL store's statement timeout in these tests, in seconds


postgres = pytest.fixture(scope="module", name="postgres")(running_postgres)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[Redis]:
    server = Redis(tmp_path)
    server.start()
    yield server
    server.stop()


async def bounded(waiting: Any, seconds: float = 30) -> Any:
    """``waiting``, or a failure instead of a hung test."""
    return await asyncio.wait_for(waiting, seconds)


@pytest.fixture
async def pg_proxy(postgres: Postgres) -> AsyncIterator[FaultProxy]:
    async for proxy in proxied(postgres.port):
        yield proxy


@pytest.fixture
async def redis_proxy(redis_server: Redis) -> AsyncIterator[FaultProxy]:
    async for proxy in proxied(redis_server.port):
        yield proxy


class Served:
    """An app (one worker) over a store, and the store to close after the test."""

    def __init__(self, client: ASGIClient, app: Any, store: ConversationStore) -> None:
        self.client, self.app, self.store = client, app, store
        self.closers: list[Any] = []

    async def create(self) -> str:
        status, body = await bounded(self.client.post("/api/conversations", {"system": "hi"}))
        assert status == 201, body
        return str(body["id"])

    async def send(self, cid: str, text: str) -> tuple[int, Any]:
        """A non-streamed send: its status and, for 200, the last SSE event's data."""
        response = await bounded(
            self.client.open("POST", f"/api/conversations/{cid}/messages", {"content": text})
        )
        if response.status != 200:
            return response.status, await response.json()
        events = await bounded(response.all_events())
        return 200, events[-1]

    async def aclose(self) -> None:
        await self.app.state.chat_server.aclose()
        for close in self.closers:
            await close()
        await self.store.aclose()


async def serve(store: ConversationStore, mock: MockResponsesAPI, **options: Any) -> Served:
    app = create_app(
        store=store,
        agent=Agent(name="assistant", model=mock.model()),
        chat_options={"counter": FixedTokenCounter()},
        **options,
    )
    return Served(ASGIClient(app), app, store)


@pytest.fixture
async def pg_app(pg_proxy: FaultProxy, mock: MockResponsesAPI) -> AsyncIterator[Served]:
    from agents_state_ext.stores.postgres import PostgresStore

    url = f"postgresql://postgres@127.0.0.1:{pg_proxy.port}/postgres"
    kwargs: dict[str, Any] = {"max_size": 4, "timeout": TIMEOUT}
    try:
        store = await PostgresStore.connect(url, **kwargs, statement_timeout=TIMEOUT)
    except TypeError:  # a store without the option: the blackhole test shows what that does
        store = await PostgresStore.connect(url, **kwargs)
    served = await serve(store, mock)
    yield served
    pg_proxy.heal()
    await served.aclose()


@pytest.fixture
async def redis_app(redis_proxy: FaultProxy, mock: MockResponsesAPI) -> AsyncIterator[Served]:
    from agents_state_ext.stores.redis import RedisStore

    url = f"redis://127.0.0.1:{redis_proxy.port}/0"
    store = await RedisStore.connect(url, socket_timeout=TIMEOUT)
    bus = await RedisStopBus.connect(url)
    served = await serve(store, mock, stop_bus=bus)
    served.closers.append(bus.aclose)
    yield served
    redis_proxy.heal()
    await served.aclose()


def assert_unavailable(status: int, headers: dict[str, str], body: Any) -> None:
    assert (status, body["error"]["type"]) == (503, "StoreUnavailableError"), body
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}
    assert int(headers["retry-after"]) >= 1


async def get(served: Served, path: str) -> tuple[int, dict[str, str], Any]:
    response = await bounded(served.client.open("GET", path))
    return response.status, response.headers, await response.json()


# -- PostgreSQL --------------------------------------------------------------------------------


async def test_a_postgres_refusing_connections_is_503_with_retry_after(
    pg_app: Served, pg_proxy: FaultProxy
) -> None:
    cid = await pg_app.create()
    pg_proxy.refuse()
    status, headers, body = await get(pg_app, f"/api/conversations/{cid}")
    assert_unavailable(status, headers, body)
    sent = await pg_app.send(cid, "hello")
    assert sent[0] == 503 and sent[1]["error"]["type"] == "StoreUnavailableError"
    status, _, health = await get(pg_app, "/api/health")
    assert (status, health["status"], health["store"]) == (503, "degraded", "unavailable")

    pg_proxy.heal()
    status, _, shown = await get(pg_app, f"/api/conversations/{cid}")
    assert status == 200 and shown["id"] == cid
    status, _, health = await get(pg_app, "/api/health")
    assert (status, health["status"], health["store"]) == (200, "ok", "ok")


async def test_a_killed_postgres_is_503_then_the_worker_heals_after_its_restart(
    pg_app: Served, postgres: Postgres
) -> None:
    cid = await pg_app.create()
    assert (await pg_app.send(cid, "one"))[0] == 200
    postgres.kill()
    try:
        status, headers, body = await get(pg_app, f"/api/conversations/{cid}")
        assert_unavailable(status, headers, body)
    finally:
        postgres.start()
    # the pooled connections all died with the server: the same app answers without a restart
    status, _, shown = await get(pg_app, f"/api/conversations/{cid}")
    assert status == 200 and shown["id"] == cid
    sent = await pg_app.send(cid, "two")
    assert sent[0] == 200 and sent[1][0] == "record", sent


async def test_a_blackholed_postgres_is_503_once_the_statement_timeout_is_up(
    pg_app: Served, pg_proxy: FaultProxy
) -> None:
    cid = await pg_app.create()
    pg_proxy.blackhole()
    # bounded at a few timeouts: without one the request would hang for as long as TCP lets it
    response = await bounded(pg_app.client.open("GET", f"/api/conversations/{cid}"), TIMEOUT * 4)
    assert_unavailable(response.status, response.headers, await response.json())
    pg_proxy.heal()
    pg_proxy.cut()  # the blackholed connections hold half-answered requests
    status, _, _ = await get(pg_app, f"/api/conversations/{cid}")
    assert status == 200


# -- Redis -------------------------------------------------------------------------------------


async def test_a_cut_redis_connection_heals_on_the_next_request(
    redis_app: Served, redis_proxy: FaultProxy
) -> None:
    cid = await redis_app.create()
    assert (await redis_app.send(cid, "one"))[0] == 200
    redis_proxy.cut()  # every pooled connection dies; Redis itself is fine
    status, _, shown = await get(redis_app, f"/api/conversations/{cid}")
    assert status == 200 and shown["id"] == cid
    redis_proxy.cut()
    sent = await redis_app.send(cid, "two")
    assert sent[0] == 200 and sent[1][0] == "record", sent


async def test_a_redis_down_is_503_with_retry_after(
    redis_app: Served, redis_proxy: FaultProxy
) -> None:
    cid = await redis_app.create()
    redis_proxy.refuse()
    status, headers, body = await get(redis_app, f"/api/conversations/{cid}")
    assert_unavailable(status, headers, body)
    sent = await redis_app.send(cid, "hello")
    assert sent[0] == 503 and sent[1]["error"]["type"] == "StoreUnavailableError", sent
    status, _, health = await get(redis_app, "/api/health")
    assert (status, health["status"]) == (503, "degraded")
    assert (health["store"], health["stop_bus"]) == ("unavailable", "unavailable")
    redis_proxy.heal()
    status, _, health = await get(redis_app, "/api/health")
    assert (status, health["status"]) == (200, "ok")
    assert (health["store"], health["stop_bus"]) == ("ok", "ok")
    assert (await redis_app.send(cid, "again"))[0] == 200


async def test_a_redis_restart_without_persistence_is_lost_data_and_new_conversations_work(
    redis_app: Served, redis_server: Redis
) -> None:
    cid = await redis_app.create()
    assert (await redis_app.send(cid, "one"))[0] == 200
    redis_server.kill()
    redis_server.start()  # no RDB, no AOF: every key is gone
    status, _, body = await get(redis_app, f"/api/conversations/{cid}")
    assert (status, body["error"]["type"]) == (500, "StoreDataLostError"), body
    sent = await redis_app.send(cid, "two")
    assert sent[0] == 500 and sent[1]["error"]["type"] == "StoreDataLostError", sent
    # never an empty history under the old id, and the worker serves new conversations
    status, _, body = await get(redis_app, f"/api/conversations/{cid}")
    assert body["error"]["type"] == "StoreDataLostError"
    fresh = await redis_app.create()
    sent = await redis_app.send(fresh, "three")
    assert sent[0] == 200 and sent[1][0] == "record", sent


async def test_a_blackholed_redis_is_503_once_the_socket_timeout_is_up(
    redis_app: Served, redis_proxy: FaultProxy
) -> None:
    cid = await redis_app.create()
    redis_proxy.blackhole()
    response = await bounded(redis_app.client.open("GET", f"/api/conversations/{cid}"), TIMEOUT * 4)
    assert_unavailable(response.status, response.headers, await response.json())
    redis_proxy.heal()
    redis_proxy.cut()  # the blackholed connections hold half-answered requests
    status, _, _ = await get(redis_app, f"/api/conversations/{cid}")
    assert status == 200


# -- in process: a store that fails on demand (no server needed) --------------------------------


class FailingCommits(InMemoryStore):
    """Commits fail as unavailable while ``down`` is set."""

    down = False

    async def commit(self, conversation_id: str, *args: Any, **kwargs: Any) -> None:
        if self.down:
            raise StoreUnavailableError("PostgreSQL: server closed the connection unexpectedly")
        await super().commit(conversation_id, *args, **kwargs)


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_commit_failing_as_unavailable_is_503_in_the_answer(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    store = FailingCommits()
    served = await serve(store, mock)
    try:
        cid = await served.create()
        store.down = True
        response = await bounded(
            served.client.open(
                "POST", f"/api/conversations/{cid}/messages", {"content": "hi", "stream": streamed}
            )
        )
        if response.status == 200:  # the stream had begun: its closing event says it
            name, data = (await bounded(response.all_events()))[-1]
            assert (name, data["status"], data["type"]) == ("error", 503, "StoreUnavailableError")
            assert data["message"] == "the conversation store is unavailable; retry later"
        else:
            assert_unavailable(response.status, response.headers, await response.json())
    finally:
        await served.aclose()


class Gate:
    """A mock frame hook holding a streamed answer after its first text delta until opened."""

    def __init__(self) -> None:
        self.reached, self.opened = asyncio.Event(), asyncio.Event()

    async def __call__(self, request: Any, sent: int) -> None:
        if sent == 3 and not self.opened.is_set():
            self.reached.set()
            await self.opened.wait()


async def test_a_stop_routed_over_an_unreachable_stop_bus_is_503(
    mock: MockResponsesAPI, redis_server: Redis, redis_proxy: FaultProxy
) -> None:
    store = InMemoryStore()  # shared by both workers; only worker b's stop bus is proxied
    direct = await RedisStopBus.connect(redis_server.url)
    proxied = await RedisStopBus.connect(f"redis://127.0.0.1:{redis_proxy.port}/0")
    a = await serve(store, mock, stop_bus=direct, worker_id="worker-a")
    b = await serve(store, mock, stop_bus=proxied, worker_id="worker-b")
    gate = Gate()
    try:
        cid = await a.create()
        mock.frame_hook = gate
        mock.enqueue(Reply.text("one two three", chunks=["one ", "two ", "three"]))
        body = {"content": "go", "stream": True}
        streaming = await bounded(a.client.open("POST", f"/api/conversations/{cid}/messages", body))
        await bounded(gate.reached.wait())
        redis_proxy.refuse()
        stop = await bounded(b.client.open("POST", f"/api/conversations/{cid}/stop"))
        assert_unavailable(stop.status, stop.headers, await stop.json())
        gate.opened.set()
        events = await bounded(streaming.all_events())
        assert events[-1][1]["status"] == "complete"
    finally:
        gate.opened.set()
        mock.frame_hook = None
        await a.app.state.chat_server.aclose()
        await b.app.state.chat_server.aclose()
        await direct.aclose()
        await proxied.aclose()
        await store.aclose()


# -- PostgreSQL writes across a restart and a lost commit answer (item 2) --------------------


@pytest.fixture
async def pg_store(pg_proxy: FaultProxy) -> AsyncIterator[Any]:
    options = {"max_size": 2, "timeout": TIMEOUT, "statement_timeout": TIMEOUT}
    async for made in postgres_store(pg_proxy, **options):
        yield made


def _turn(parent: str | None, node_id: str) -> Any:
    from agents_state_ext import Node

    return Node.from_dict(
        {"id": node_id, "parent_id": parent, "role": "user", "status": "complete", "items": []}
    )


async def test_writes_right_after_a_postgres_restart_go_through(
    pg_store: Any, postgres: Postgres
) -> None:
    """The pooled connections died with the server: the first write of each kind finds a dead
    one at ``BEGIN`` (nothing sent), and is sent again on a fresh one instead of a 503."""
    from agents_state_ext import AttemptRecord

    c1, c2, l1 = uuid4().hex, uuid4().hex, uuid4().hex
    await pg_store.create_conversation(c1, strategy="replay")
    await pg_store.commit(c1, [_turn(None, "m1")], expected_head=None, new_head="m1")
    writes: list[tuple[str, Any]] = [
        (
            "commit",
            lambda: pg_store.commit(c1, [_turn("m1", "m2")], expected_head="m1", new_head="m2"),
        ),
        ("meta", lambda: pg_store.update_conversation_meta(c1, {"k": 1})),
        (
            "attempt",
            lambda: pg_store.put_attempt(c1, AttemptRecord(message_id="m2", attempt_id="a1")),
        ),
        (
            "ledger",
            lambda: pg_store.put_ledger(l1, "{}", expected_version=0, holder=None, held_until=None),
        ),
        ("create", lambda: pg_store.create_conversation(c2, strategy="replay")),
    ]
    for name, write in writes:
        postgres.kill()
        postgres.start()
        try:
            await bounded(write())
        except StoreUnavailableError as exc:
            raise AssertionError(f"the {name} write after a restart: {exc}") from exc
    assert [n.id for n in await pg_store.active_path(c1)] == ["m1", "m2"]
    assert (await pg_store.get_conversation(c1)).meta == {"k": 1}
    assert (await pg_store.get_attempt(c1, "a1")).message_id == "m2"
    assert (await pg_store.get_ledger(l1)).version == 1
    assert c2 in await pg_store.list_conversations()


async def test_a_commit_applied_whose_answer_was_lost_in_a_kill_returns_as_stored(
    pg_store: Any, pg_proxy: FaultProxy, postgres: Postgres
) -> None:
    """``COMMIT`` reached the server, which was SIGKILLed before its answer came back: the
    store asks the restarted server what became of the transaction and reports it stored
    (it did not: a 503 for a stored commit left a chat's attempt stored ``queued`` for good)."""
    c1 = uuid4().hex
    await pg_store.create_conversation(c1, strategy="replay")
    held = pg_proxy.lose_reply_to(b"COMMIT\x00")
    committing = asyncio.ensure_future(
        pg_store.commit(c1, [_turn(None, "m1")], expected_head=None, new_head="m1")
    )
    await bounded(held.wait())
    postgres.kill()
    postgres.start()
    await bounded(committing)
    assert await pg_store.get_head(c1) == "m1"


async def test_a_commit_cut_before_its_commit_was_sent_is_sent_again(
    pg_store: Any, pg_proxy: FaultProxy
) -> None:
    """A connection cut between ``BEGIN`` and ``COMMIT``: the server rolled it back, the store
    sends it once more, and it is stored once."""
    c1 = uuid4().hex
    await pg_store.create_conversation(c1, strategy="replay")
    held = pg_proxy.lose_reply_to(b"txid_current")
    await bounded(pg_store.commit(c1, [_turn(None, "m1")], expected_head=None, new_head="m1"))
    assert held.is_set()
    assert [n.id for n in await pg_store.active_path(c1)] == ["m1"]


# -- Redis writes whose answer was lost (item 2 for Redis) ------------------------------------


@pytest.fixture
async def redis_store(redis_proxy: FaultProxy) -> AsyncIterator[Any]:
    from agents_state_ext.stores.redis import RedisStore

    store = await RedisStore.connect(
        redis_proxy.proxied("redis://127.0.0.1:1/0"), socket_timeout=TIMEOUT
    )
    yield store
    redis_proxy.heal()
    await store.aclose()


async def test_a_redis_commit_applied_whose_answer_was_lost_returns_as_stored(
    redis_store: Any, redis_proxy: FaultProxy
) -> None:
    """The commit's script ran on the server and the connection died before its answer came
    back: the store asks the server on a new connection, finds the write noted and reports it
    stored. (Before: a 503 for a stored commit, and a retry lost its own compare-and-set.)"""
    c1, head = uuid4().hex, f"m-{uuid4().hex}"
    await redis_store.create_conversation(c1, strategy="replay")
    held = redis_proxy.lose_reply_to(head.encode())
    await bounded(redis_store.commit(c1, [_turn(None, head)], expected_head=None, new_head=head))
    assert held.is_set()
    assert [n.id for n in await redis_store.active_path(c1)] == [head]
    nxt = f"m-{uuid4().hex}"  # the head moved once: the next commit builds on it
    await bounded(redis_store.commit(c1, [_turn(head, nxt)], expected_head=head, new_head=nxt))
    assert [n.id for n in await redis_store.active_path(c1)] == [head, nxt]


async def test_a_redis_attempt_put_whose_answer_was_lost_returns_as_stored(
    redis_store: Any, redis_proxy: FaultProxy
) -> None:
    """An attempt record put whose answer was lost: looked up and reported stored, not a 503
    (a chat that took it for failed left its attempt ``queued``)."""
    from agents_state_ext import AttemptRecord

    c1 = uuid4().hex
    await redis_store.create_conversation(c1, strategy="replay")
    await redis_store.commit(c1, [_turn(None, "m1")], expected_head=None, new_head="m1")
    attempt = f"a-{uuid4().hex}"
    held = redis_proxy.lose_reply_to(attempt.encode())
    record = AttemptRecord(message_id="m1", attempt_id=attempt, status="queued")
    await bounded(redis_store.put_attempt(c1, record))
    assert held.is_set()
    assert [a.attempt_id for a in await redis_store.list_attempts(c1)] == [attempt]
