"""A stop sent to another worker right after start-up keeps the partial answer the user saw.

Seen once in the soak started cold: worker A streamed an answer on its first request while the
workers still started; the stop went to worker B; the attempt ended with the text gone. A
cold worker's first request stalls its event loop (imports, first connections) for longer
than the soak's 5 s lease, so B found A's lease lapsed and took the conversation over at once,
closing the attempt as interrupted, while A, alive, was about to honour the stop; A's own end
was then fenced out. Now B first asks over the stop bus and takes over only when nobody
answers within a grace period: the attempt ends ``cancelled`` with exactly the streamed text.

Two apps (workers) on one PostgreSQL store, each with its own Redis stop bus connection, both
cold: their first requests are the ones measured. Their leases share a clock the test moves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from _asgi_client import ASGIClient
from _backends import BACKENDS, redis_url, unique_name
from agents import Agent, set_tracing_disabled
from test_server_fencing import HELD_AT, TTL, Gate, bounded, create, slow_text, stored

from agents_state_ext.server import LeaseManager, RedisStopBus, create_app
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


class ColdWorkers:
    """Workers A and B, fresh (nothing subscribed, nothing served yet), on one clock."""

    def __init__(self, store: Any, buses: list[RedisStopBus], mock: MockResponsesAPI) -> None:
        self.now = 1_000.0
        agent = Agent(name="assistant", model=mock.model())
        self.apps = [
            create_app(
                store=store,
                agent=agent,
                stop_bus=bus,
                leases=LeaseManager(store, worker_id=name, ttl=TTL, clock=lambda: self.now),
                stop_timeout=4.0,
                chat_options={"counter": FixedTokenCounter()},
            )
            for name, bus in zip(("worker-a", "worker-b"), buses, strict=True)
        ]
        self.a, self.b = (ASGIClient(app) for app in self.apps)

    def stall_past_the_lease(self) -> None:
        """A's loop stalled longer than its lease: the lease lapsed, nobody took it yet."""
        self.now += TTL + 1


Make = Callable[[], "ColdWorkers"]


@pytest.fixture
async def cold(mock: MockResponsesAPI, tmp_path: Path) -> AsyncIterator[Make]:
    store = await BACKENDS["postgres"](tmp_path)()
    namespace = unique_name("cold")
    buses = [await RedisStopBus.connect(redis_url(), namespace=namespace) for _ in range(2)]
    made: list[ColdWorkers] = []

    def make() -> ColdWorkers:
        made.append(ColdWorkers(store, buses, mock))
        return made[-1]

    yield make
    for pair in made:
        for app in pair.apps:
            await app.state.chat_server.aclose()
    for bus in buses:
        await bus.aclose()
    await store.aclose()


def deltas(events: list[tuple[str, Any]]) -> str:
    return "".join(data["text"] for name, data in events if name == "delta")


@pytest.mark.parametrize("stalled", [True, False], ids=["lease-lapsed", "lease-live"])
async def test_a_cold_stop_on_the_other_worker_keeps_the_streamed_text(
    mock: MockResponsesAPI, cold: Make, stalled: bool
) -> None:
    pair = cold()
    cid = await create(pair.a, "previous_response")
    gate = Gate(HELD_AT)
    mock.frame_hook = gate
    mock.enqueue(slow_text())
    streaming = await pair.a.open(
        "POST", f"/api/conversations/{cid}/messages", {"content": "count", "stream": True}
    )
    await bounded(gate.reached.wait())
    if stalled:
        pair.stall_past_the_lease()

    status, record = await bounded(pair.b.post(f"/api/conversations/{cid}/stop"))
    mock.frame_hook = None
    assert status == 200, record
    assert record["status"] == "cancelled", record
    events = await bounded(streaming.all_events())
    assert events[-1] == ("record", record), events[-1]
    seen = deltas(events)
    assert seen == "one two "
    records, node = await stored(pair.b, cid)
    assert [r["status"] for r in records] == ["cancelled"]
    assert (node["status"], node["text"]) == ("cancelled", seen)
