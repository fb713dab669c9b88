"""A worker whose lease lapsed while it still streamed writes nothing once another took over.

The soak found it: worker A streams an answer, its lease lapses (a stalled event loop, a store
it could not reach), worker B is asked to stop the answer, finds no live holder and closes the
attempt as interrupted; then A finishes and used to overwrite B's close with its own end. Now
every commit of a chat the server drives is fenced by the lease (the store refuses a commit
whose lease token is stale), and a server strategy's next request is sent only after the
lease is renewed. Asserted on the HTTP answers, the store and the mock's transcript.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from _asgi_client import ASGIClient
from _backends import BACKENDS
from _grammar import call, message, stream, through
from agents import Agent, function_tool, set_tracing_disabled

from agents_state_ext.server import Lease, LeaseManager, LocalStopBus, create_app
from agents_state_ext.stores import ConversationStore, InMemoryStore
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)

STRATEGIES = ("replay", "session", "previous_response", "conversation")
TTL = 300.0  # the background renewal (every ttl / 3 of real time) never runs in a test
STOP_TIMEOUT = 1.0  # seconds of real time a stop on B waits (half of it asking a lapsed A)
WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight"]


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


class Gate:
    """Holds the mock's first answer before its frame ``at`` until opened; later answers pass."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.reached = asyncio.Event()
        self.opened = asyncio.Event()

    async def __call__(self, request: Any, sent: int) -> None:
        if sent == self.at and not self.reached.is_set():
            self.reached.set()
            await self.opened.wait()


class Workers:
    """Two workers (apps) on one store, their leases on one clock the test moves.

    A lapse here stands for A's event loop stalled past its lease: by default A hears no stop
    (each worker has its own bus), so B, after asking for ``STOP_TIMEOUT / 2``, takes over.
    ``shared_bus``: a stop asked on B reaches A's watch (A is alive and answers).
    """

    def __init__(
        self,
        store: ConversationStore,
        mock: MockResponsesAPI,
        leases: type[LeaseManager] = LeaseManager,
        shared_bus: bool = False,
    ) -> None:
        self.store = store
        self.now = 1_000.0
        agent = Agent(name="assistant", model=mock.model(), tools=[get_weather])
        shared = LocalStopBus()
        self.apps = [
            create_app(
                store=store,
                agent=agent,
                stop_bus=shared if shared_bus else LocalStopBus(),
                leases=kind(store, worker_id=name, ttl=TTL, clock=self.clock),
                stop_timeout=STOP_TIMEOUT,
                chat_options={"counter": FixedTokenCounter()},
            )
            for name, kind in (("worker-a", LeaseManager), ("worker-b", leases))
        ]
        self.a, self.b = (ASGIClient(app) for app in self.apps)

    def clock(self) -> float:
        return self.now

    def lapse(self) -> None:
        """Every lease taken so far lapses (nobody renewed it in time)."""
        self.now += TTL + 1

    async def aclose(self) -> None:
        for app in self.apps:
            await app.state.chat_server.aclose()


Make = Callable[..., Workers]


@pytest.fixture
async def workers(mock: MockResponsesAPI) -> AsyncIterator[Make]:
    made: list[Workers] = []

    def make(store: ConversationStore, **options: Any) -> Workers:
        made.append(Workers(store, mock, **options))
        return made[-1]

    yield make
    for pair in made:
        await pair.aclose()


async def bounded(waiting: Any) -> Any:
    return await asyncio.wait_for(waiting, 60)


async def create(client: ASGIClient, strategy: str) -> str:
    status, created = await client.post(
        "/api/conversations", {"system": "be brief", "strategy": strategy}
    )
    assert status == 201, created
    return str(created["id"])


async def stored(client: ASGIClient, cid: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The attempt records and the active path's last node, read over HTTP."""
    records = (await client.get(f"/api/conversations/{cid}/attempts"))[1]["attempts"]
    node = (await client.get(f"/api/conversations/{cid}"))[1]["active_path"][-1]
    return records, node


def texts(items: list[dict[str, Any]]) -> list[str]:
    out = []
    for item in items:
        content = item.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        if item.get("type", "message") == "message":
            out.append(content)
    return out


HELD_AT = through(stream(message(3)), "response.output_text.delta", 2)
"""A streamed answer is held after its second text delta, or after a call's item is done (both
frame 6 of the mock's grammar: two start events, then ``added``, part or delta, ...)."""
assert through(stream(call()), "response.output_item.done") == HELD_AT


async def lapse_mid_answer(
    mock: MockResponsesAPI, pair: Workers, strategy: str, streamed: bool, reply: Reply
) -> tuple[str, Any, Gate]:
    """Worker A starts an answer and is held mid-way; then its lease lapses."""
    cid = await create(pair.a, strategy)
    gate = Gate(HELD_AT if streamed else 0)
    mock.frame_hook = gate
    mock.enqueue(reply)
    response = await pair.a.open(
        "POST", f"/api/conversations/{cid}/messages", {"content": "count", "stream": streamed}
    )
    await bounded(gate.reached.wait())
    pair.lapse()
    return cid, response, gate


def slow_text() -> Reply:
    return Reply.text(" ".join(WORDS), chunks=[w + " " for w in WORDS[:-1]] + [WORDS[-1]])


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_lapsed_worker_cannot_overwrite_the_close_of_the_worker_that_stopped_it(
    mock: MockResponsesAPI, workers: Make, strategy: str, streamed: bool
) -> None:
    pair = workers(InMemoryStore())
    cid, response, gate = await lapse_mid_answer(mock, pair, strategy, streamed, slow_text())

    status, closed = await pair.b.post(f"/api/conversations/{cid}/stop")
    assert status == 200, closed
    assert closed["status"] == "failed" and closed["error"].startswith("interrupted: "), closed

    gate.opened.set()  # A's answer arrives in full, after B closed the attempt
    mock.frame_hook = None
    events = await bounded(response.all_events())
    name, ended = events[-1]
    assert name == "error", events[-1]
    # The store refuses A's end (its lease token is stale); a server strategy's run learns it
    # sooner, from the lease renewal it makes after each answer.
    refused = "FencedOutError" if strategy in ("replay", "session") else "LeaseLostError"
    assert ended["type"] == refused and ended["status"] == 409, ended
    assert ended["record"]["status"] == "failed", ended  # what the store holds: B's close

    records, node = await stored(pair.b, cid)
    assert [(r["status"], r["error"]) for r in records] == [("failed", closed["error"])]
    assert (node["status"], node["meta"]["interrupted"]) == ("failed", True)
    assert len(mock.response_requests) == 1  # A sent its one request; nothing else went out

    # The user retries on B: one clean answer, the conversation as the user sees it.
    retry = await pair.b.open("POST", f"/api/conversations/{cid}/retry", {"stream": streamed})
    last = (await bounded(retry.all_events()))[-1]
    assert last[0] == "record" and last[1]["status"] == "complete", last
    assert texts(mock.transcript(last[1]["response_id"])) == ["be brief", "count", "echo: count"]


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_the_fence_holds_on_every_store(
    mock: MockResponsesAPI, workers: Make, backend: str, tmp_path: Path
) -> None:
    store = await BACKENDS[backend](tmp_path)()
    try:
        pair = workers(store)
        cid, response, gate = await lapse_mid_answer(
            mock, pair, "previous_response", True, slow_text()
        )
        status, closed = await pair.b.post(f"/api/conversations/{cid}/stop")
        assert status == 200 and closed["status"] == "failed", closed
        gate.opened.set()
        mock.frame_hook = None
        assert (await bounded(response.all_events()))[-1][0] == "error"
        records, node = await stored(pair.b, cid)
        assert [r["status"] for r in records] == ["failed"]
        assert node["status"] == "failed"
    finally:
        await pair.aclose()
        await store.aclose()


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_lapsed_worker_sends_no_request_after_another_took_over(
    mock: MockResponsesAPI, workers: Make, streamed: bool
) -> None:
    """A tool step: A's first answer calls a tool; B takes the conversation over meanwhile (a
    new message); A's follow-up request would advance the server state: it is never sent."""
    pair = workers(InMemoryStore())
    tool = Reply.tool_call("get_weather", {"city": "Paris"}, call_id="call_1")
    cid, response, gate = await lapse_mid_answer(mock, pair, "previous_response", streamed, tool)

    taken = await pair.b.open(
        "POST", f"/api/conversations/{cid}/messages", {"content": "hello?", "stream": streamed}
    )
    b_events = await bounded(taken.all_events())
    assert b_events[-1][0] == "record" and b_events[-1][1]["status"] == "complete", b_events[-1]
    sent_before = len(mock.response_requests)  # A's first request and B's

    gate.opened.set()  # A gets its tool call, runs the tool, and would ask the model again
    mock.frame_hook = None
    events = await bounded(response.all_events())
    assert events[-1][0] == "error" and events[-1][1]["type"] == "LeaseLostError", events[-1]
    assert len(mock.response_requests) == sent_before == 2  # A's follow-up never went out

    records, node = await stored(pair.b, cid)
    statuses = sorted((r["status"], r["error"] is not None) for r in records)
    assert statuses == [("complete", False), ("failed", True)], records
    assert node["text"] == "echo: hello?"
    # What the model saw for B's answer: the user's words once each, no tool output of A's.
    seen = texts(mock.transcript(b_events[-1][1]["response_id"]))
    assert seen.count("hello?") == 1 and "sunny in Paris" not in str(seen), seen


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_takeover_never_resends_into_a_conversation_the_lapsed_worker_holds(
    mock: MockResponsesAPI, workers: Make, streamed: bool
) -> None:
    """Conversation strategy, A's request in flight on the server conversation when B takes over.

    B's request is refused (``conversation_locked``: A's request holds the conversation) and the
    SDK does not resend it blindly: the attempt fails with 409 ``ConversationLockedError``. A's
    answer then lands (an open tool call A never answers: its lease is gone), and B's retry goes
    on a new server conversation holding B's branch only.
    """
    pair = workers(InMemoryStore())
    tool = Reply.tool_call("get_weather", {"city": "Paris"}, call_id="call_1")
    cid, response, gate = await lapse_mid_answer(mock, pair, "conversation", streamed, tool)

    taken = await pair.b.open(
        "POST", f"/api/conversations/{cid}/messages", {"content": "hello?", "stream": streamed}
    )
    b_events = await bounded(taken.all_events())
    locked = [r for r in mock.requests if r.status == 400]
    name, body = b_events[-1]
    assert name == "error" and body["status"] == 409, b_events[-1]
    assert body["type"] == "ConversationLockedError", body
    assert len(locked) == 1 and "Another process" in str(locked[0].error)  # no blind resend

    gate.opened.set()  # A gets its tool call, runs the tool, and would ask the model again
    mock.frame_hook = None
    events = await bounded(response.all_events())
    assert events[-1][0] == "error" and events[-1][1]["type"] == "LeaseLostError", events[-1]
    assert len(mock.response_requests) == 2  # A's follow-up never went out

    again = await pair.b.open("POST", f"/api/conversations/{cid}/retry", {"stream": streamed})
    b_events = await bounded(again.all_events())
    assert b_events[-1][0] == "record" and b_events[-1][1]["status"] == "complete", b_events[-1]
    last = mock.response_requests[-1]
    assert last["conversation"] != "conv_1"  # past A's request and its unanswered call
    held = mock.conversation_items(last["conversation"])
    seen = texts(held)
    assert seen.count("hello?") == 1, seen
    assert [i.get("call_id") for i in held if i.get("type") == "function_call"] == []
    assert [r.status for r in mock.requests if r.status == 400] == [400] * len(locked)


class SeesALapse(LeaseManager):
    """Reads the streaming worker's lease as lapsed once: the read raced its renewal."""

    fooled = False

    async def holder(self, conversation_id: str) -> Lease | None:
        if not self.fooled:
            self.fooled = True
            return None
        return await super().holder(conversation_id)


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_stop_that_finds_the_lapsed_holder_alive_again_asks_it_to_stop(
    mock: MockResponsesAPI, workers: Make, streamed: bool
) -> None:
    """B sees no live holder, but A renews before B can take the lease: B must not answer
    with the attempt as it stood (still running); it asks A, and answers what A stored."""
    pair = workers(InMemoryStore(), leases=SeesALapse, shared_bus=True)
    cid = await create(pair.a, "previous_response")
    gate = Gate(HELD_AT if streamed else 0)
    mock.frame_hook = gate
    mock.enqueue(slow_text())
    response = await pair.a.open(
        "POST", f"/api/conversations/{cid}/messages", {"content": "count", "stream": streamed}
    )
    await bounded(gate.reached.wait())

    stopping = asyncio.ensure_future(pair.b.post(f"/api/conversations/{cid}/stop"))
    await asyncio.sleep(0.05)  # B has found A alive and asked it over the bus (or will soon)
    gate.opened.set()
    status, record = await bounded(stopping)
    mock.frame_hook = None
    assert status == 200, record
    events = await bounded(response.all_events())
    assert events[-1][0] == "record", events[-1]
    records, _ = await stored(pair.b, cid)
    assert record["status"] == records[0]["status"] == events[-1][1]["status"], (record, records)
    assert record["status"] in ("cancelled", "complete")  # stopped, or it ended first
