"""The stop bus: a stop asked on any worker reaches the watch of the worker that streams."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import redis.asyncio as aioredis
from _backends import redis_url, unique_name

from agents_state_ext.errors import StoreError
from agents_state_ext.server.stops import LocalStopBus, RedisStopBus, StopBus

pytestmark = pytest.mark.anyio

WAIT = 20.0  # a guard against a hang only, never a measured duration
ROOT = Path(__file__).resolve().parents[1]

Pair = tuple[StopBus, StopBus]


@pytest.fixture(params=["local", "redis"])
async def buses(request: pytest.FixtureRequest) -> AsyncIterator[Pair]:
    """The streaming worker's bus and another worker's bus (one bus in-process for local)."""
    if request.param == "local":
        bus = LocalStopBus()
        yield bus, bus
        await bus.aclose()
        return
    url, namespace = redis_url(), unique_name("stops")
    streaming = await RedisStopBus.connect(url, namespace=namespace)
    other = await RedisStopBus.connect(url, namespace=namespace)
    yield streaming, other
    await streaming.aclose()
    await other.aclose()


async def test_a_stop_reaches_the_watch_of_its_conversation(buses: Pair) -> None:
    streaming, other = buses
    async with streaming.watch("c1") as watch, streaming.watch("c2") as elsewhere:
        waiting = asyncio.ensure_future(watch.requested())
        await asyncio.sleep(0)  # the waiter is parked before the stop arrives

        assert await other.request_stop("c1", "att_1") == 1

        with anyio.fail_after(WAIT):
            assert await waiting == "att_1"
        assert watch.received == ["att_1"]
        assert elsewhere.received == []
        assert watch.conversation_id == "c1"


async def test_a_stop_nobody_watches_is_not_delivered_later(buses: Pair) -> None:
    streaming, other = buses

    assert await other.request_stop("c1", "att_1") == 0

    async with streaming.watch("c1") as watch:
        assert await other.request_stop("c1", "att_2") == 1
        with anyio.fail_after(WAIT):
            assert await watch.requested() == "att_2"
        assert watch.received == ["att_2"]


async def test_requested_returns_the_first_stop_or_the_first_for_an_attempt(buses: Pair) -> None:
    streaming, other = buses
    async with streaming.watch("c1") as watch:
        for attempt in ("att_old", "att_new", "att_new", "att_last"):
            await other.request_stop("c1", attempt)

        with anyio.fail_after(WAIT):
            assert await watch.requested("att_new") == "att_new"
            assert await watch.requested() == "att_old"
            await watch.requested("att_last")
        assert watch.received == ["att_old", "att_new", "att_new", "att_last"]  # in order


async def test_every_watch_of_a_conversation_hears_the_stop(buses: Pair) -> None:
    streaming, other = buses
    async with streaming.watch("c1") as first, other.watch("c1") as second:
        async with streaming.watch("c1") as third:
            assert await other.request_stop("c1", "att_1") >= 1
            with anyio.fail_after(WAIT):
                for watch in (first, second, third):
                    assert await watch.requested() == "att_1"
        # A watch that ends leaves the others of its conversation subscribed.
        await other.request_stop("c1", "att_2")
        with anyio.fail_after(WAIT):
            assert await first.requested("att_2") == "att_2"
            assert await second.requested("att_2") == "att_2"
        assert third.received == ["att_1"]


async def test_nothing_is_delivered_after_the_watch_ends(buses: Pair) -> None:
    streaming, other = buses
    async with streaming.watch("c1") as watch:
        await other.request_stop("c1", "att_1")
        with anyio.fail_after(WAIT):
            await watch.requested()

    assert await other.request_stop("c1", "att_2") == 0
    async with streaming.watch("c1") as again:  # resubscribes after the unsubscribe
        assert await other.request_stop("c1", "att_3") == 1
        with anyio.fail_after(WAIT):
            assert await again.requested() == "att_3"
    assert watch.received == ["att_1"]


async def test_bad_ids_are_refused(buses: Pair) -> None:
    streaming, _ = buses
    with pytest.raises(ValueError, match="conversation id"):
        await streaming.request_stop("", "att_1")
    with pytest.raises(ValueError, match="attempt id"):
        await streaming.request_stop("c1", "")
    with pytest.raises(ValueError, match="conversation id"):
        streaming.watch("")


async def test_both_buses_are_stop_buses(buses: Pair) -> None:
    assert all(isinstance(bus, StopBus) for bus in buses)


async def test_local_counts_every_open_watch() -> None:
    bus = LocalStopBus()
    async with bus.watch("c1"), bus.watch("c1"):
        assert await bus.request_stop("c1", "att_1") == 2


# -- Redis specifics ----------------------------------------------------------------------------


@pytest.fixture
def url() -> str:
    return redis_url()


@pytest.fixture
async def raw(url: str) -> AsyncIterator[aioredis.Redis]:
    """A plain client, to look at the server from outside the buses."""
    client = aioredis.Redis.from_url(url, decode_responses=True)
    yield client
    await client.aclose()


async def pubsub_connections(raw: aioredis.Redis, name: str) -> list[dict[str, str]]:
    """The server's view of the pub/sub connections named ``name``."""
    listing = await raw.execute_command("CLIENT", "LIST", "TYPE", "pubsub")
    clients = [dict(field.split("=", 1) for field in line.split()) for line in listing.splitlines()]
    return [client for client in clients if client.get("name") == name]


async def test_one_connection_carries_every_watched_conversation(
    url: str, raw: aioredis.Redis
) -> None:
    namespace = unique_name("stops")
    name = unique_name("stopbus")
    streaming = await RedisStopBus.connect(url, namespace=namespace, client_name=name)
    other = await RedisStopBus.connect(url, namespace=namespace)
    try:
        ids = [f"c{i}" for i in range(8)]
        async with contextlib.AsyncExitStack() as stack:
            watches = [await stack.enter_async_context(streaming.watch(i)) for i in ids]
            connections = await pubsub_connections(raw, name)
            assert len(connections) == 1
            assert connections[0]["sub"] == str(len(ids))
            for conversation_id in reversed(ids):
                assert await other.request_stop(conversation_id, f"att_{conversation_id}") == 1
            with anyio.fail_after(WAIT):
                for conversation_id, watch in zip(ids, watches, strict=True):
                    assert await watch.requested() == f"att_{conversation_id}"
        channels = [streaming.channel(i) for i in ids]
        with anyio.fail_after(WAIT):  # the last watch out unsubscribes each channel
            while any(count for _, count in await raw.pubsub_numsub(*channels)):
                await anyio.sleep(0.01)
        assert await pubsub_connections(raw, name) == []
    finally:
        await streaming.aclose()
        await other.aclose()


async def test_namespaces_keep_deployments_apart(url: str) -> None:
    mine = await RedisStopBus.connect(url, namespace=unique_name("stops"))
    theirs = await RedisStopBus.connect(url, namespace=unique_name("stops"))
    try:
        async with mine.watch("c1") as watch:
            assert await theirs.request_stop("c1", "att_1") == 0
            assert await mine.request_stop("c1", "att_2") == 1
            with anyio.fail_after(WAIT):
                assert await watch.requested() == "att_2"
            assert watch.received == ["att_2"]
    finally:
        await mine.aclose()
        await theirs.aclose()


async def test_connect_and_close_errors(url: str) -> None:
    with pytest.raises(StoreError, match="cannot connect to Redis"):
        await RedisStopBus.connect("redis://127.0.0.1:1/0")
    with pytest.raises(StoreError, match="cannot use Redis URL"):
        await RedisStopBus.connect("http://127.0.0.1:6379/0")
    with pytest.raises(StoreError, match="decode_responses"):
        RedisStopBus(aioredis.Redis.from_url(url))
    bus = await RedisStopBus.connect(url, namespace=unique_name("stops"))
    await bus.aclose()
    await bus.aclose()
    with pytest.raises(StoreError, match="closed"):
        await bus.request_stop("c1", "att_1")
    with pytest.raises(StoreError, match="closed"):
        async with bus.watch("c1"):
            pytest.fail("watched on a closed bus")


async def test_a_client_of_your_own_stays_open(url: str) -> None:
    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        bus = RedisStopBus(client, namespace=unique_name("stops"))
        async with bus, bus.watch("c1") as watch:
            await bus.request_stop("c1", "att_1")
            with anyio.fail_after(WAIT):
                assert await watch.requested() == "att_1"
        assert await client.ping()
    finally:
        await client.aclose()


# -- two OS processes ---------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import asyncio, sys

    from agents_state_ext.server.stops import RedisStopBus

    async def main(url, namespace):
        bus = await RedisStopBus.connect(url, namespace=namespace)
        try:
            async with bus.watch("c1") as watch:
                print("ready", flush=True)
                attempt = await asyncio.wait_for(watch.requested(), 60)
            print(attempt, flush=True)
            # Answer on another conversation: the stop travels the other way too.
            print(await bus.request_stop("c2", "echo:" + attempt), flush=True)
        finally:
            await bus.aclose()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def test_a_stop_crosses_os_processes(url: str) -> None:
    namespace = unique_name("stops")
    bus = await RedisStopBus.connect(url, namespace=namespace)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WORKER,
        url,
        namespace,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        async with bus.watch("c2") as answers:
            with anyio.fail_after(WAIT * 3):  # the child imports the package first
                ready = await proc.stdout.readline()
            assert ready == b"ready\n", (await proc.communicate())[1].decode()

            assert await bus.request_stop("c1", "att_1") == 1  # the child's one subscription

            with anyio.fail_after(WAIT):
                assert await answers.requested() == "echo:att_1"
                out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        assert out.decode().split() == ["att_1", "1"]
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await bus.aclose()


# -- hostile messages (issue 28) ---------------------------------------------------------------


async def test_one_bad_message_never_disables_the_bus(
    url: str, raw: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    bus = await RedisStopBus.connect(url, namespace=unique_name("stops"))
    try:
        async with bus.watch("c1") as watch:
            channel = bus.channel("c1")
            for junk in (
                "[" * 100_000,  # deeply nested: RecursionError in json.loads
                '{"attempt_id": ' * 5000 + '"x"' + "}" * 5000,
                '{"attempt_id": "' + "a" * 5000 + '"}',  # over the size bound
                '{"attempt_id": 7}',
                '"just text"',
                "\x00\xff not json",
            ):
                assert await raw.publish(channel, junk) == 1
            assert await raw.publish(channel, '{"attempt_id": "att_after"}') == 1
            with anyio.fail_after(WAIT):
                assert await watch.requested() == "att_after"
            assert watch.received == ["att_after"]
        assert bus.alive
        with anyio.fail_after(WAIT):  # a new watch still gets its subscription confirmed
            async with bus.watch("c2") as second:
                assert await bus.request_stop("c2", "att_2") == 1
                assert await second.requested() == "att_2"
        assert "malformed stop request" in caplog.text
    finally:
        await bus.aclose()


async def test_a_reader_that_ends_is_started_again_and_logged(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    bus = await RedisStopBus.connect(url, namespace=unique_name("stops"))
    try:
        async with bus.watch("c1") as watch:
            reader = bus._reader
            assert reader is not None
            reader.cancel()  # stands for a reader that died of something unforeseen
            with anyio.fail_after(WAIT):
                while bus._reader is reader:
                    await anyio.sleep(0.01)
            assert bus.alive and bus.reader_restarts == 1
            assert "reader ended" in caplog.text
            assert await bus.request_stop("c1", "att_1") == 1
            with anyio.fail_after(WAIT):
                assert await watch.requested() == "att_1"
    finally:
        await bus.aclose()
    assert not bus.alive


async def test_bytes_that_are_not_utf8_never_stall_a_bus_on_a_strict_client_of_your_own(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    own = aioredis.Redis.from_url(url, decode_responses=True)  # decodes strictly
    undecoded = aioredis.Redis.from_url(url)
    bus = RedisStopBus(own, namespace=unique_name("stops"))
    try:
        async with bus.watch("c1") as watch:
            assert await undecoded.publish(bus.channel("c1"), b"\xff\xfe\x80") == 1
            with anyio.fail_after(WAIT):  # a stop sent while it reconnects is lost: ask again
                while not watch.received:
                    await bus.request_stop("c1", "att_after")
                    await anyio.sleep(0.05)
            assert set(watch.received) == {"att_after"}
        assert "not UTF-8" in caplog.text
    finally:
        await bus.aclose()
        await own.aclose()
        await undecoded.aclose()
