"""The HTTP app over the chat layer: every route, the SSE answers, stops, 409s, errors.

In process: the app is driven through its ASGI interface (``tests/_asgi_client.py``, which
reads each SSE event as it is sent), the model is the stateful ``MockResponsesAPI``. Assertions
are on the HTTP answers and on what crossed the wire to the mock.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from _asgi_client import ASGIClient, Streamed
from _backends import BACKENDS, redis_url, unique_name
from _grammar import message, stream, through
from _outage import free_port
from agents import Agent, function_tool, set_tracing_disabled

from agents_state_ext import AttemptRecord, InMemoryStore
from agents_state_ext.chat import open_conversation
from agents_state_ext.server import LeaseManager, LocalStopBus, create_app
from agents_state_ext.stores import ConversationStore
from agents_state_ext.testing import Fault, FixedTokenCounter, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)

T = TypeVar("T")
SLOW = "one two three four five six seven eight"
STRATEGIES = ("replay", "session", "previous_response", "conversation")
JSON = {"content-type": "application/json"}


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (pretend)."""
    return f"deleted {path}"


def slow_reply() -> Reply:
    words = SLOW.split(" ")
    return Reply.text(SLOW, chunks=[w + " " for w in words[:-1]] + [words[-1]])


class Gate:
    """A mock frame hook that holds the answer before frame ``at`` until opened.

    Streamed: held once the start events, the message's item and part and two text deltas went.
    Not streamed: the hook runs once, before the answer (``at`` 0).
    """

    def __init__(self, at: int) -> None:
        self.at = at
        self.reached = asyncio.Event()
        self.opened = asyncio.Event()

    async def __call__(self, request: Any, sent: int) -> None:
        if sent == self.at and not self.opened.is_set():
            self.reached.set()
            await self.opened.wait()


def gate_for(streamed: bool) -> Gate:
    two_deltas = through(stream(message(3)), "response.output_text.delta", 2)
    return Gate(two_deltas if streamed else 0)


def agent_on(mock: MockResponsesAPI) -> Agent[Any]:
    return Agent(name="assistant", model=mock.model(), tools=[get_weather, delete_file])


Apps = Callable[..., ASGIClient]


@pytest.fixture
async def apps(mock: MockResponsesAPI) -> AsyncIterator[Apps]:
    """Makes apps (workers) on the mock; every one is shut down after the test."""
    made: list[Any] = []

    def make(store: ConversationStore | None = None, **options: Any) -> ASGIClient:
        app = create_app(
            store=store or InMemoryStore(),
            agent=agent_on(mock),
            chat_options={"counter": FixedTokenCounter()},
            **options,
        )
        made.append(app)
        return ASGIClient(app)

    yield make
    for app in made:
        await app.state.chat_server.aclose()


async def create(client: ASGIClient, **body: Any) -> str:
    status, created = await client.post("/api/conversations", {"system": "be brief", **body})
    assert status == 201, created
    return str(created["id"])


async def answer(client: ASGIClient, cid: str, action: str, body: Any) -> list[tuple[str, Any]]:
    response = await client.open("POST", f"/api/conversations/{cid}/{action}", body)
    assert response.status == 200, await response.body()
    assert response.headers["content-type"].startswith("text/event-stream")
    events = await bounded(response.all_events())
    assert events[-1][0] in ("record", "error")
    assert [name for name, _ in events].count("record") + [n for n, _ in events].count("error") == 1
    return events


async def bounded(waiting: Awaitable[T]) -> T:
    """``waiting``, or a failure instead of a hung test when it never comes."""
    return await asyncio.wait_for(waiting, 60)


def deltas(events: list[tuple[str, Any]]) -> str:
    return "".join(data["text"] for name, data in events if name == "delta")


def texts(items: list[dict[str, Any]]) -> list[str]:
    """The text of each message item, in order (a list content joined)."""
    out = []
    for item in items:
        content = item.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        if item.get("type", "message") == "message":
            out.append(content)
    return out


async def held_answer(client: ASGIClient, mock: MockResponsesAPI) -> tuple[str, Gate, Streamed]:
    """A new conversation whose streamed answer is held after two deltas (open ``gate``)."""
    cid = await create(client)
    gate = gate_for(True)
    mock.frame_hook = gate
    mock.enqueue(slow_reply())
    streaming = await client.open("POST", f"/api/conversations/{cid}/messages", {"content": "go"})
    await bounded(gate.reached.wait())
    return cid, gate, streaming


async def settled(client: ASGIClient, cid: str) -> list[dict[str, Any]]:
    """The attempt records once none is in flight (the app finishes attempts on its own)."""
    for _ in range(2000):
        _, body = await client.get(f"/api/conversations/{cid}/attempts")
        if all(r["status"] not in ("queued", "streaming") for r in body["attempts"]):
            return list(body["attempts"])
        await asyncio.sleep(0.005)
    raise AssertionError("an attempt never ended")


# -- sending ---------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("streamed", [False, True])
async def test_send_streams_the_answer_and_ends_with_its_complete_record(
    mock: MockResponsesAPI, apps: Apps, strategy: str, streamed: bool
) -> None:
    client = apps()
    cid = await create(client, strategy=strategy)
    first = await answer(client, cid, "messages", {"content": "hello there", "stream": streamed})
    assert first[0] == ("attempt", {**first[0][1], "status": "queued"})
    assert deltas(first) == "echo: hello there"
    assert sum(name == "delta" for name, _ in first) == (3 if streamed else 1)
    record = first[-1][1]
    assert record["status"] == "complete" and record["state_owner"] == strategy
    assert first[0][1]["attempt_id"] == record["attempt_id"]
    assert mock.requests[-1].streamed is streamed

    second = await answer(client, cid, "messages", {"content": "and again", "stream": streamed})
    last = second[-1][1]
    assert last["status"] == "complete"
    sent = mock.response_requests[-1]
    if strategy in ("replay", "session"):
        assert texts(sent["input"]) == ["be brief", "hello there", "echo: hello there", "and again"]
        assert "previous_response_id" not in sent and "conversation" not in sent
    elif strategy == "previous_response":
        assert texts(sent["input"]) == ["and again"]
        assert sent["previous_response_id"] == record["response_id"]
    else:
        assert texts(sent["input"]) == ["and again"]
        assert sent["conversation"] == last["cursor_before"]
    # what the model saw for the last answer: the whole conversation, each message once
    assert texts(mock.transcript(last["response_id"])) == [
        "be brief",
        "hello there",
        "echo: hello there",
        "and again",
        "echo: and again",
    ]

    status, shown = await client.get(f"/api/conversations/{cid}")
    assert status == 200
    assert [(n["role"], n["text"]) for n in shown["active_path"]] == [
        ("system", "be brief"),
        ("user", "hello there"),
        ("assistant", "echo: hello there"),
        ("user", "and again"),
        ("assistant", "echo: and again"),
    ]
    assert shown["strategy"] == strategy and shown["branches"] == [shown["active_leaf"]]
    assert shown["cursor"] == last["cursor_after"]


async def test_create_list_export_delete(mock: MockResponsesAPI, apps: Apps) -> None:
    client = apps()
    first = await create(client, strategy="replay", budget=500)
    second = await create(client)
    await answer(client, first, "messages", {"content": "hi"})
    status, listed = await client.get("/api/conversations")
    assert status == 200
    assert [(c["id"], c["strategy"]) for c in listed["conversations"]] == [
        (first, "replay"),
        (second, "previous_response"),
    ]
    status, document = await client.get(f"/api/conversations/{first}/export")
    assert status == 200 and document["conversation"]["id"] == first
    assert [n["role"] for n in document["nodes"]] == ["system", "user", "assistant"]
    assert (await client.get(f"/api/conversations/{first}"))[1]["budget"] == 500

    assert await client.request("DELETE", f"/api/conversations/{first}") == (
        200,
        {"deleted": first},
    )
    assert (await client.get(f"/api/conversations/{first}"))[0] == 404
    listed = (await client.get("/api/conversations"))[1]["conversations"]
    assert [c["id"] for c in listed] == [second]


# -- stopping --------------------------------------------------------------------------------


async def stop_over_http(
    mock: MockResponsesAPI, client: ASGIClient, strategy: str, streamed: bool
) -> tuple[list[tuple[str, Any]], dict[str, Any], str, dict[str, Any]]:
    """Stop an answer mid-way over HTTP: its events, the stop's record, the stored text, the
    next request sent."""
    cid = await create(client, strategy=strategy)
    gate = gate_for(streamed)
    mock.frame_hook = gate
    mock.enqueue(slow_reply())
    response = await client.open(
        "POST", f"/api/conversations/{cid}/messages", {"content": "count", "stream": streamed}
    )
    await bounded(gate.reached.wait())
    status, record = await client.post(f"/api/conversations/{cid}/stop")
    assert status == 200, record
    events = await bounded(response.all_events())
    mock.frame_hook = None
    stored = (await client.get(f"/api/conversations/{cid}"))[1]["active_path"][-1]
    await answer(client, cid, "messages", {"content": "next", "stream": streamed})
    return events, record, stored["text"], mock.response_requests[-1]


async def stop_locally(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> tuple[AttemptRecord, str, dict[str, Any]]:
    """The same through the chat layer itself: the record, the stored text, the next request."""
    chat = await open_conversation(
        InMemoryStore(),
        strategy=strategy,  # type: ignore[arg-type]
        agent=agent_on(mock),
        counter=FixedTokenCounter(),
        system="be brief",
    )
    gate = gate_for(streamed)
    mock.frame_hook = gate
    mock.enqueue(slow_reply())
    attempt = chat.send("count", stream=streamed)
    await bounded(gate.reached.wait())
    await attempt.stop()
    await attempt
    mock.frame_hook = None
    record = await chat.record(attempt.id)
    text = chat.active_path()[-1].text()
    await chat.send("next", stream=streamed)
    return record, text, mock.response_requests[-1]


def comparable(request: dict[str, Any]) -> dict[str, Any]:
    """A request body without what names the chat itself (its cache key)."""
    return {k: v for k, v in request.items() if k != "prompt_cache_key"}


@pytest.mark.parametrize("strategy", ["replay", "previous_response", "conversation"])
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_stop_over_http_keeps_the_partial_answer_as_a_local_stop_does(
    apps: Apps, strategy: str, streamed: bool
) -> None:
    async with MockResponsesAPI() as over_http, MockResponsesAPI() as local:
        client = ASGIClient(
            create_app(
                store=InMemoryStore(),
                agent=agent_on(over_http),
                chat_options={"counter": FixedTokenCounter()},
            )
        )
        events, record, text, sent = await stop_over_http(over_http, client, strategy, streamed)
        await client.app.state.chat_server.aclose()
        local_record, local_text, local_sent = await stop_locally(local, strategy, streamed)

    assert events[-1] == ("record", record)
    assert record["status"] == local_record.status == "cancelled"
    assert text == local_text == deltas(events) == ("one two " if streamed else "")
    assert record["cursor_after"] == local_record.cursor_after
    assert comparable(sent) == comparable(local_sent)


async def test_a_client_that_goes_away_does_not_stop_the_answer(
    mock: MockResponsesAPI, apps: Apps
) -> None:
    client = apps()
    cid = await create(client)
    gate = gate_for(True)
    mock.frame_hook = gate
    mock.enqueue(slow_reply())
    response = await client.open("POST", f"/api/conversations/{cid}/messages", {"content": "go"})
    async for name, _ in response.events():
        if name == "delta":
            break
    response.disconnect()
    gate.opened.set()
    records = await settled(client, cid)
    assert [r["status"] for r in records] == ["complete"]
    path = (await client.get(f"/api/conversations/{cid}"))[1]["active_path"]
    assert path[-1]["text"] == SLOW


async def test_stop_with_nothing_running_is_409(mock: MockResponsesAPI, apps: Apps) -> None:
    client = apps()
    cid = await create(client)
    await answer(client, cid, "messages", {"content": "hi"})
    status, body = await client.post(f"/api/conversations/{cid}/stop")
    assert status == 409 and body["error"]["type"] == "NothingToStop"


# -- retry, edit, switch, tree, attempts, explain --------------------------------------------


async def test_retry_edit_switch_tree_attempts_and_explain(
    mock: MockResponsesAPI, apps: Apps
) -> None:
    client = apps()
    cid = await create(client)
    first = (await answer(client, cid, "messages", {"content": "first"}))[-1][1]
    user_id = first["parent_user_id"]

    again = (await answer(client, cid, "retry", {}))[-1][1]
    assert again["parent_user_id"] == user_id and again["message_id"] != first["message_id"]
    status, tree = await client.get(f"/api/conversations/{cid}/tree")
    assert status == 200
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert (
        nodes[again["message_id"]]["sibling_index"],
        nodes[again["message_id"]]["siblings"],
    ) == (
        1,
        2,
    )
    assert tree["active_leaf"] == again["message_id"] and nodes[again["message_id"]]["active"]
    assert not nodes[first["message_id"]]["active"]

    edited = (await answer(client, cid, "edit", {"user_id": user_id, "content": "first, edited"}))[
        -1
    ][1]
    assert edited["status"] == "complete" and edited["parent_user_id"] != user_id
    # the edit's request never carries the old version or its answers
    assert texts(mock.response_requests[-1]["input"]) == ["be brief", "first, edited"]
    assert "previous_response_id" not in mock.response_requests[-1]
    tree = (await client.get(f"/api/conversations/{cid}/tree"))[1]
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert nodes[first["message_id"]]["status"] == "invalid"
    assert nodes[again["message_id"]]["status"] == "invalid"
    assert nodes[edited["parent_user_id"]]["meta"]["edit_of"] == user_id

    status, switched = await client.post(
        f"/api/conversations/{cid}/switch", {"node_id": first["message_id"]}
    )
    assert status == 200 and switched["active_leaf"] == first["message_id"]
    assert [n["text"] for n in switched["active_path"]] == ["be brief", "first", "echo: first"]
    shown = (await client.get(f"/api/conversations/{cid}"))[1]
    assert shown["active_leaf"] == first["message_id"]
    assert set(shown["branches"]) == {
        first["message_id"],
        again["message_id"],
        edited["message_id"],
    }

    status, listed = await client.get(f"/api/conversations/{cid}/attempts")
    assert status == 200
    assert [r["attempt_id"] for r in listed["attempts"]] == [
        first["attempt_id"],
        again["attempt_id"],
        edited["attempt_id"],
    ]
    only = await client.get(f"/api/conversations/{cid}/attempts?message_id={first['message_id']}")
    assert [r["attempt_id"] for r in only[1]["attempts"]] == [first["attempt_id"]]
    # The stored record keeps its final status and adds the edit that made it invalid.
    invalidation = {"invalidated_by": edited["parent_user_id"]}
    for ref in (first["attempt_id"], first["message_id"]):
        status, stored = await client.get(f"/api/conversations/{cid}/attempts/{ref}")
        assert status == 200 and stored["status"] == "complete"
        assert isinstance(stored.pop("invalidated_at"), float)
        expected = {**first, **invalidation}
        expected.pop("invalidated_at", None)
        assert stored == expected

    status, diff = await client.get(
        f"/api/conversations/{cid}/explain?a={first['attempt_id']}&b={edited['message_id']}"
    )
    assert status == 200 and diff["differs"] is True
    assert diff["parent_user_id"] == [user_id, edited["parent_user_id"]]
    assert list(diff["added"]) == [edited["parent_user_id"]]
    assert list(diff["removed"]) == [user_id]
    assert diff["text"].startswith(f"attempt {first['attempt_id']} -> {edited['attempt_id']}")


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_send_after_switching_back_to_an_edited_away_version_continues_it(
    mock: MockResponsesAPI, apps: Apps, strategy: str
) -> None:
    client = apps()
    cid = await create(client, strategy=strategy)
    first = (await answer(client, cid, "messages", {"content": "first"}))[-1][1]
    second = (await answer(client, cid, "messages", {"content": "second"}))[-1][1]
    body = {"user_id": first["parent_user_id"], "content": "first, edited"}
    edited = (await answer(client, cid, "edit", body))[-1][1]
    status, _ = await client.post(
        f"/api/conversations/{cid}/switch", {"node_id": second["message_id"]}
    )
    assert status == 200
    after = (await answer(client, cid, "messages", {"content": "third"}))[-1][1]
    assert after["status"] == "complete"
    old = ["be brief", "first", "echo: first", "second", "echo: second"]
    assert texts(mock.transcript(after["response_id"])) == [*old, "third", "echo: third"]
    shown = (await client.get(f"/api/conversations/{cid}"))[1]
    assert [n["text"] for n in shown["active_path"]] == [*old, "third", "echo: third"]
    nodes = {n["id"]: n for n in (await client.get(f"/api/conversations/{cid}/tree"))[1]["nodes"]}
    assert nodes[second["message_id"]]["status"] == "invalid"  # the mark stays
    assert nodes[edited["message_id"]]["status"] == "complete"


# -- one driver at a time --------------------------------------------------------------------


async def test_a_second_action_while_an_answer_streams_is_409_and_sends_nothing(
    mock: MockResponsesAPI, apps: Apps
) -> None:
    client = apps()
    cid = await create(client)
    first = (await answer(client, cid, "messages", {"content": "first"}))[-1][1]
    gate = gate_for(True)
    mock.frame_hook = gate
    mock.enqueue(slow_reply())
    response = await client.open("POST", f"/api/conversations/{cid}/messages", {"content": "go"})
    await bounded(gate.reached.wait())
    sent_before = len(mock.response_requests)

    for action, body in [
        ("messages", {"content": "again"}),
        ("retry", {}),
        ("edit", {"user_id": first["parent_user_id"], "content": "x"}),
        ("switch", {"node_id": first["message_id"]}),
        ("approvals", {"decision": "approved"}),
    ]:
        status, error = await client.post(f"/api/conversations/{cid}/{action}", body)
        assert (status, error["error"]["type"]) == (409, "ConversationBusyError"), action
    assert (await client.request("DELETE", f"/api/conversations/{cid}"))[0] == 409
    assert len(mock.response_requests) == sent_before

    gate.opened.set()
    assert (await bounded(response.all_events()))[-1][1]["status"] == "complete"
    assert (await answer(client, cid, "messages", {"content": "now"}))[-1][1]["status"] == (
        "complete"
    )


@pytest.mark.parametrize("backend", ["memory", "sqlite-file", "postgres", "redis"])
async def test_two_workers_one_drives_the_other_gets_409_and_its_stop_reaches_the_first(
    mock: MockResponsesAPI, apps: Apps, backend: str, tmp_path: Path
) -> None:
    store, bus = await BACKENDS[backend](tmp_path)(), LocalStopBus()
    a = apps(store, stop_bus=bus, worker_id="worker-a")
    b = apps(store, stop_bus=bus, worker_id="worker-b")
    cid = await create(a)
    gate = gate_for(True)
    mock.frame_hook = gate
    mock.enqueue(slow_reply())
    streaming = await a.open("POST", f"/api/conversations/{cid}/messages", {"content": "go"})
    assert streaming.headers["x-worker-id"] == "worker-a"
    await bounded(gate.reached.wait())

    busy = await b.open("POST", f"/api/conversations/{cid}/messages", {"content": "me too"})
    assert busy.status == 409 and busy.headers["x-worker-id"] == "worker-b"
    assert (await busy.json())["error"]["type"] == "ConversationBusyError"
    assert len(mock.response_requests) == 1

    status, record = await b.post(f"/api/conversations/{cid}/stop")
    mock.frame_hook = None
    assert status == 200 and record["status"] == "cancelled"
    events = await bounded(streaming.all_events())
    assert events[-1] == ("record", record)
    assert deltas(events) == "one two "
    # the lease is free again: worker b may drive the conversation now
    assert (await answer(b, cid, "messages", {"content": "b now"}))[-1][1]["status"] == "complete"
    await a.app.state.chat_server.aclose()
    await b.app.state.chat_server.aclose()
    await store.aclose()


async def test_a_stop_the_streaming_worker_never_receives_is_504(
    mock: MockResponsesAPI, apps: Apps
) -> None:
    store = InMemoryStore()
    a = apps(store, stop_bus=LocalStopBus(), worker_id="worker-a")
    b = apps(store, stop_bus=LocalStopBus(), worker_id="worker-b", stop_timeout=0.3)
    cid, gate, streaming = await held_answer(a, mock)
    status, error = await b.post(f"/api/conversations/{cid}/stop")
    assert (status, error["error"]["type"]) == (504, "StopTimeout")
    assert "worker-a" in error["error"]["message"]
    gate.opened.set()
    assert (await bounded(streaming.all_events()))[-1][1]["status"] == "complete"


async def test_a_silent_answer_keeps_the_stream_alive(mock: MockResponsesAPI, apps: Apps) -> None:
    client = apps(keep_alive=0.01)
    cid = await create(client)
    gate = gate_for(False)
    mock.frame_hook = gate
    response = await client.open(
        "POST", f"/api/conversations/{cid}/messages", {"content": "hi", "stream": False}
    )
    await bounded(gate.reached.wait())
    seen = b""
    while b": keep-alive\n\n" not in seen:
        chunk = await bounded(response.chunk())
        assert chunk is not None
        seen += chunk
    gate.opened.set()
    rest = await bounded(response.body())
    assert b"event: record" in rest and b'"status":"complete"' in rest


async def test_what_a_dead_worker_left_in_flight_is_closed_by_the_next_one(
    mock: MockResponsesAPI, apps: Apps
) -> None:
    store = InMemoryStore()
    client = apps(store, lease_ttl=5.0)
    cid = await create(client)
    left = await leave_an_attempt_in_flight(store, cid)

    status, record = await client.post(f"/api/conversations/{cid}/stop")
    assert status == 200
    assert (record["attempt_id"], record["status"]) == (left, "failed")
    assert record["error"].startswith("interrupted: ")
    node = (await client.get(f"/api/conversations/{cid}"))[1]["active_path"][-1]
    assert (node["status"], node["meta"]["interrupted"]) == ("failed", True)
    assert mock.response_requests == []
    assert (await answer(client, cid, "retry", {}))[-1][1]["status"] == "complete"


async def test_a_send_after_a_dead_worker_closes_its_attempt_first(
    mock: MockResponsesAPI, apps: Apps
) -> None:
    store = InMemoryStore()
    client = apps(store)
    cid = await create(client)
    left = await leave_an_attempt_in_flight(store, cid)
    done = (await answer(client, cid, "messages", {"content": "anyone?"}))[-1][1]
    records = {
        r["attempt_id"]: r
        for r in (await client.get(f"/api/conversations/{cid}/attempts"))[1]["attempts"]
    }
    assert records[left]["status"] == "failed" and records[left]["error"].startswith("interrupted")
    assert records[done["attempt_id"]]["status"] == "complete"


async def leave_an_attempt_in_flight(store: InMemoryStore, cid: str) -> str:
    """What a worker that died mid-answer leaves: a queued attempt, a lapsed lease."""
    graph = await store.load_graph(cid)
    head = graph.active_leaf
    graph.add_user("are you there?")
    node = graph.start_attempt()
    record = AttemptRecord(node.id, str(node.attempt_id), node.parent_id, status="queued")
    await store.commit(
        cid, graph.take_changes(), expected_head=head, new_head=node.id, attempts=[record]
    )
    dead = LeaseManager(store, worker_id="dead-worker", ttl=1.0, clock=lambda: 0.0)
    await dead.acquire(cid)  # held until t=1.0: long lapsed
    return str(node.attempt_id)


# -- errors ----------------------------------------------------------------------------------


async def test_errors_are_json_with_their_status(mock: MockResponsesAPI, apps: Apps) -> None:
    client = apps()
    cid = await create(client)
    await answer(client, cid, "messages", {"content": "hi"})
    base = f"/api/conversations/{cid}"
    cases: list[tuple[Awaitable[tuple[int, Any]], int, str]] = [
        (client.get("/api/conversations/nope"), 404, "ConversationNotFoundError"),
        (
            client.post("/api/conversations/nope/messages", {"content": "x"}),
            404,
            "ConversationNotFoundError",
        ),
        (client.post(f"{base}/messages", raw=b"{not json", headers=JSON), 400, "BadRequest"),
        (client.post(f"{base}/messages", raw=b"[1, 2]", headers=JSON), 400, "BadRequest"),
        (client.post(f"{base}/messages", {}), 400, "BadRequest"),
        (client.post(f"{base}/messages", {"content": "x", "stream": "yes"}), 400, "BadRequest"),
        (client.post(f"{base}/edit", {"content": "x"}), 400, "BadRequest"),
        (client.post("/api/conversations", {"strategy": "telepathy"}), 400, "ValueError"),
        (client.post("/api/conversations", {"budget": -3}), 400, "ValueError"),
        (client.post(f"{base}/switch", {"node_id": "msg_unknown"}), 404, "NodeNotFoundError"),
        (client.post(f"{base}/retry", {"user_id": "msg_unknown"}), 404, "NodeNotFoundError"),
        (client.get(f"{base}/attempts/att_unknown"), 404, "NodeNotFoundError"),
        (client.get(f"{base}/explain?a=x"), 400, "ValueError"),
        (client.post(f"{base}/resume"), 409, "InvalidTransitionError"),
        (client.post(f"{base}/approvals", {"decision": "maybe"}), 400, "ValueError"),
        (client.request("PUT", base), 405, "MethodNotAllowed"),
        (client.get(f"{base}/nowhere"), 404, "NotFound"),
    ]
    for call, status, kind in cases:
        got, body = await call
        assert got == status, (status, kind, body)
        if kind:
            assert body["error"]["type"] == kind and body["error"]["message"], body
    assert len(mock.response_requests) == 1


async def test_a_request_over_its_budget_is_422_and_nothing_is_sent(
    mock: MockResponsesAPI, apps: Apps
) -> None:
    client = apps()
    cid = await create(client, budget=3)
    response = await client.open("POST", f"/api/conversations/{cid}/messages", {"content": "hi"})
    assert response.status == 422
    assert (await response.json())["error"]["type"] == "ContextOverflowError"
    assert mock.response_requests == []
    records = (await client.get(f"/api/conversations/{cid}/attempts"))[1]["attempts"]
    assert records == []  # refused before anything was stored


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_model_failure_ends_the_stream_with_error(
    mock: MockResponsesAPI, apps: Apps, streamed: bool
) -> None:
    client = apps()
    cid = await create(client)
    mock.inject(Fault.status(500))
    events = await answer(client, cid, "messages", {"content": "hi", "stream": streamed})
    name, error = events[-1]
    assert name == "error"
    assert (error["status"], error["type"]) == (502, "InternalServerError")
    assert (
        error["record"]["status"] == "failed" and error["attempt_id"] == events[0][1]["attempt_id"]
    )
    assert (await answer(client, cid, "retry", {"stream": streamed}))[-1][1]["status"] == "complete"


# -- tools -----------------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
async def test_tool_calls_and_results_are_events(
    mock: MockResponsesAPI, apps: Apps, streamed: bool
) -> None:
    client = apps()
    cid = await create(client)
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}), Reply.text("It is sunny."))
    events = await answer(client, cid, "messages", {"content": "weather?", "stream": streamed})
    calls = [d for n, d in events if n == "tool_call"]
    results = [d for n, d in events if n == "tool_result"]
    assert calls == [
        {"call_id": calls[0]["call_id"], "name": "get_weather", "arguments": '{"city": "Paris"}'}
    ]
    assert results == [{"call_id": calls[0]["call_id"], "output": "sunny in Paris"}]
    names = [n for n, _ in events]
    assert names.index("tool_call") < names.index("tool_result") < names.index("delta")
    assert deltas(events) == "It is sunny." and events[-1][1]["status"] == "complete"


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_tool_call_waits_for_approval_then_resumes(
    mock: MockResponsesAPI, apps: Apps, streamed: bool
) -> None:
    client = apps()
    cid = await create(client)
    mock.enqueue(Reply.tool_call("delete_file", {"path": "notes.txt"}), Reply.text("Done."))
    paused = await answer(client, cid, "messages", {"content": "delete it", "stream": streamed})
    assert paused[-1][1]["status"] == "awaiting_approval"
    status, pending = await client.get(f"/api/conversations/{cid}/approvals")
    assert status == 200
    [call] = pending["approvals"]
    assert (call["tool_name"], call["decision"]) == ("delete_file", None)
    # nothing new starts while a call waits for a person
    status, refused = await client.post(f"/api/conversations/{cid}/messages", {"content": "hm"})
    assert status == 409 and refused["error"]["type"] == "ApprovalPendingError"

    status, decided = await client.post(
        f"/api/conversations/{cid}/approvals", {"decision": "approved", "call_id": call["call_id"]}
    )
    assert status == 200 and decided["approvals"][0]["decision"] == "approved"
    resumed = await answer(client, cid, "resume", {"stream": streamed})
    assert [d for n, d in resumed if n == "tool_result"] == [
        {"call_id": call["call_id"], "output": "deleted notes.txt"}
    ]
    assert resumed[-1][1]["status"] == "complete" and deltas(resumed) == "Done."
    assert resumed[-1][1]["attempt_id"] == paused[-1][1]["attempt_id"]


async def test_stop_cancels_an_attempt_awaiting_approval(
    mock: MockResponsesAPI, apps: Apps
) -> None:
    client = apps()
    cid = await create(client)
    mock.enqueue(Reply.tool_call("delete_file", {"path": "notes.txt"}))
    paused = (await answer(client, cid, "messages", {"content": "delete it"}))[-1][1]
    status, record = await client.post(f"/api/conversations/{cid}/stop")
    assert status == 200
    assert (record["attempt_id"], record["status"]) == (paused["attempt_id"], "cancelled")
    assert (await client.get(f"/api/conversations/{cid}/approvals"))[1] == {"approvals": []}


# -- serve ---------------------------------------------------------------------------------


def test_the_command_line_loads_the_server_only_to_serve(tmp_path: Path) -> None:
    code = (
        "import sys, agents_state_ext, agents_state_ext.cli\n"
        "print(sorted(m for m in sys.modules if m.startswith('agents_state_ext.server')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert (result.returncode, result.stdout) == (0, "[]\n"), result.stderr


# -- serve: two worker processes -------------------------------------------------------------


def test_serve_starts_two_workers_that_share_one_port(tmp_path: Path) -> None:
    redis = redis_url()
    repo = Path(__file__).parents[1]
    env = {
        **os.environ,
        "OPENAI_API_KEY": "",
        "PYTHONPATH": str(repo),
        "AGENTS_STATE_EXT_NAMESPACE": unique_name("serve"),
    }
    mock = subprocess.Popen(
        [sys.executable, "-m", "agents_state_ext.testing", "serve-mock"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    port = free_port()
    try:
        assert mock.stdout is not None
        mock_url = mock.stdout.readline().strip()
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agents_state_ext",
                "serve",
                "--port",
                str(port),
                "--workers",
                "2",
                "--redis",
                redis,
                "--store",
                str(tmp_path / "served.db"),
                "--mock-url",
                mock_url,
                "--log-level",
                "warning",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        try:
            workers = talk_until_both_workers_answered(f"http://127.0.0.1:{port}", server)
            assert len(workers) == 2
        finally:
            server.send_signal(signal.SIGINT)
            _, err = server.communicate(timeout=60)
        assert server.returncode == 0, err
    finally:
        mock.terminate()
        mock.communicate(timeout=30)


def talk_until_both_workers_answered(base: str, server: subprocess.Popen[str]) -> set[str]:
    """Send one message per new connection until two workers have each answered one."""
    with httpx.Client(base_url=base, timeout=30) as probe:
        for _ in range(600):  # the workers take a moment to start
            if server.poll() is not None:
                raise AssertionError(f"serve exited: {server.communicate()[1]}")
            try:
                probe.get("/api/health")
                break
            except httpx.TransportError:
                time.sleep(0.1)
    answered: set[str] = set()
    for number in range(100):
        with httpx.Client(base_url=base, timeout=30) as client:  # a new connection each time
            created = client.post("/api/conversations", json={"strategy": "previous_response"})
            assert created.status_code == 201, created.text
            cid = created.json()["id"]
            with client.stream(
                "POST", f"/api/conversations/{cid}/messages", json={"content": f"hello {number}"}
            ) as response:
                assert response.status_code == 200
                worker = response.headers["x-worker-id"]
                events = [line for line in response.iter_lines() if line.startswith("event: ")]
            assert events[-1] == "event: record"
            record = client.get(f"/api/conversations/{cid}/attempts").json()["attempts"][-1]
            assert record["status"] == "complete"
            answered.add(worker)
        if len(answered) == 2:
            return answered
    return answered
