"""The served app on a real Redis stop bus under hostile messages and a dying reader (issue 28).

Two apps (workers) share a store, each with its own ``RedisStopBus`` on one namespace, as two
``serve`` processes would. Anyone who can reach the Redis may publish on a stop channel; the
answering worker must still hear the next real stop, and ``/api/health`` must say when it
cannot.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import redis.asyncio as aioredis
from _asgi_client import ASGIClient
from _backends import redis_url, unique_name
from test_server_app import Apps, bounded, deltas, held_answer
from test_server_app import apps as apps  # the fixture (re-exported: pytest finds it here)

from agents_state_ext import InMemoryStore
from agents_state_ext.server import RedisStopBus
from agents_state_ext.testing import MockResponsesAPI

pytestmark = pytest.mark.anyio

WAIT = 30.0  # a guard against a hang only, never a measured duration

HOSTILE = (
    "[" * 100_000,  # deeply nested: RecursionError in json.loads
    '{"attempt_id": ' * 5000 + '"x"' + "}" * 5000,
    '{"attempt_id": "' + "a" * 100_000 + '"}',  # far over the size bound
    '{"attempt_id": ["att"]}',
    "null",
    "\x00\xff not json",
)


@pytest.fixture
async def raw() -> AsyncIterator[aioredis.Redis]:
    """A plain client: the stranger who publishes on the stop channels."""
    client = aioredis.Redis.from_url(redis_url(), decode_responses=True)
    yield client
    await client.aclose()


async def test_after_hostile_messages_a_stop_from_another_worker_still_reaches_the_answering_one(
    mock: MockResponsesAPI, apps: Apps, raw: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    namespace, store = unique_name("stops"), InMemoryStore()
    bus_a = await RedisStopBus.connect(redis_url(), namespace=namespace)
    bus_b = await RedisStopBus.connect(redis_url(), namespace=namespace)
    a = apps(store, stop_bus=bus_a, worker_id="worker-a")
    b = apps(store, stop_bus=bus_b, worker_id="worker-b")
    try:
        cid, _, streaming = await held_answer(a, mock)

        with caplog.at_level(logging.WARNING, logger="agents_state_ext.server.stops"):
            for junk in HOSTILE:  # worker a is the one subscriber of the conversation's channel
                assert await raw.publish(bus_a.channel(cid), junk) == 1
            # bytes that are not UTF-8, from a client that does not decode
            undecoded = aioredis.Redis.from_url(redis_url())
            try:
                assert await undecoded.publish(bus_a.channel(cid), b"\xff\xfe\x80") == 1
            finally:
                await undecoded.aclose()

            status, record = await b.post(f"/api/conversations/{cid}/stop")
        mock.frame_hook = None
        assert (status, record["status"]) == (200, "cancelled"), record
        events = await bounded(streaming.all_events())
        assert events[-1] == ("record", record)
        assert deltas(events) == "one two "
        assert (await a.get("/api/health"))[1]["stop_bus"] == "ok"
        assert "Traceback" not in caplog.text
        dropped = [r for r in caplog.records if "malformed stop request" in r.getMessage()]
        assert len(dropped) >= len(HOSTILE)
        assert all("\n" not in r.getMessage() and r.exc_info is None for r in dropped)
    finally:
        await a.app.state.chat_server.aclose()
        await b.app.state.chat_server.aclose()
        await bus_a.aclose()
        await bus_b.aclose()


class ReaderKilled(BaseException):
    """Stands for what no handler expects: not an ``Exception``, it ends the reader's task."""


class KillableClient:
    """A real redis-py client whose pub/sub reads die while ``killing`` is set.

    Its reads end the reader before they reach Redis: nothing published is lost meanwhile.
    """

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self.killing = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def pubsub(self) -> Any:
        return KillablePubSub(self.client.pubsub(), self)


class KillablePubSub:
    def __init__(self, pubsub: Any, owner: KillableClient) -> None:
        self.pubsub = pubsub
        self.owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pubsub, name)

    async def get_message(self, **options: Any) -> Any:
        if self.owner.killing:
            raise ReaderKilled
        return await self.pubsub.get_message(**options)


async def health(client: ASGIClient) -> tuple[int, str]:
    status, body = await client.get("/api/health")
    return status, body["stop_bus"]


async def test_a_reader_forced_to_die_degrades_health_until_it_is_back(
    mock: MockResponsesAPI, apps: Apps, raw: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    killable = KillableClient(aioredis.Redis.from_url(redis_url(), decode_responses=True))
    namespace = unique_name("stops")
    bus = RedisStopBus(killable, namespace=namespace)
    client = apps(InMemoryStore(), stop_bus=bus)
    try:
        async with bus.watch("c1") as watch:
            assert await health(client) == (200, "ok")
            killable.killing = True
            assert await raw.publish(bus.channel("c1"), '{"attempt_id": "before"}') == 1
            with anyio.fail_after(WAIT):
                assert await watch.requested("before") == "before"
            with caplog.at_level(logging.ERROR, logger="agents_state_ext.server.stops"):
                with anyio.fail_after(WAIT):
                    while await health(client) != (503, "down"):
                        await anyio.sleep(0.01)
                for _ in range(3):  # still down while its restarts keep dying
                    assert await health(client) == (503, "down")
                    await anyio.sleep(0.05)
                # a stop published while nobody reads waits on the connection
                assert await raw.publish(bus.channel("c1"), '{"attempt_id": "during"}') == 1
                killable.killing = False
                with anyio.fail_after(WAIT):
                    while await health(client) != (200, "ok"):
                        await anyio.sleep(0.01)
                    assert await watch.requested("during") == "during"
            ended = [r for r in caplog.records if "reader ended" in r.getMessage()]
            # restarts pause, doubling: a handful, not a loop spinning on a dead reader
            assert 1 <= len(ended) <= 10, len(ended)
            assert bus.reader_restarts == len(ended)
    finally:
        await client.app.state.chat_server.aclose()
        await bus.aclose()
        await killable.client.aclose()
