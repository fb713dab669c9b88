"""Fuzzed input to every public entry point: success, or the library's own error and no change.

Covered: ``chat.send`` / ``chat.edit`` content, ``ConversationGraph.from_dict`` documents,
``AttemptRecord.from_dict`` documents, conversation ids given to ``open_conversation`` and to
the stores, ``import_conversation`` documents and the served app's HTTP bodies.
(``ConversationState.loads`` has its own fuzz file, ``test_loads_fuzz.py``.) After an error,
the graph, the store and the HTTP view are read again and must equal what they were before.

Bounded for CI: ``STATE_EXT_FUZZ_EXAMPLES`` (default 60) sets the examples of each test; set it
higher for a long run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _asgi_client import ASGIClient
from agents import Agent, set_tracing_disabled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_state_ext import (
    AttemptRecord,
    ConversationGraph,
    GraphError,
    RecordError,
    StateBlobError,
    StateExtError,
    StoreError,
)
from agents_state_ext.chat import Conversation, open_conversation
from agents_state_ext.server import create_app
from agents_state_ext.stores import InMemoryStore, SQLiteStore, export_conversation
from agents_state_ext.stores import import_conversation as import_document
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI

set_tracing_disabled(True)

EXAMPLES = int(os.environ.get("STATE_EXT_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

TEXT = st.text(max_size=6) | st.sampled_from(["", " ", "hi", "\x00", "\ud800", "user", "message"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=8,
)
PART = st.fixed_dictionaries(
    {}, optional={"type": st.sampled_from(["input_text", 1]) | JSON, "text": TEXT | JSON}
)
ITEM = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["message", "input_text"]) | JSON,
        "role": st.sampled_from(["user", "assistant"]) | JSON,
        "content": TEXT | st.lists(PART, max_size=2) | JSON,
    },
)
JSON_CONTENT = TEXT | JSON | st.lists(ITEM | JSON, max_size=3)
CONTENT = JSON_CONTENT | st.binary(max_size=3)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indexes)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(paths(child, (*prefix, index)))
    return found


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = json.loads(json.dumps(document))
    node = copy
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return copy


async def stored(store: Any, cid: str) -> tuple[Any, ...]:
    """Everything the store holds of chat ``cid``."""
    graph = (await store.load_graph(cid)).to_dict()
    attempts = [r.to_dict() for r in await store.list_attempts(cid)]
    return graph, attempts, (await store.get_conversation(cid)).meta


async def chat_on(mock: MockResponsesAPI, store: Any) -> Conversation:
    return await open_conversation(
        store,
        strategy="replay",
        agent=Agent(name="a", model=mock.model()),
        counter=FixedTokenCounter(),
    )


# -- send and edit content -------------------------------------------------------------------


async def act(action: Callable[[Conversation], Any], stream: bool) -> None:
    store = InMemoryStore()
    # The mock's request rules are on: what the library lets through, the real API must take.
    async with MockResponsesAPI() as mock:
        chat = await chat_on(mock, store)
        first = await chat.send("first", stream=stream)
        assert first.status == "complete"
        before, memory = await stored(store, chat.id), chat.graph.to_dict()
        sent = len(mock.response_requests)
        try:
            attempt = action(chat)
        except StateExtError:
            assert chat.graph.to_dict() == memory
            assert await stored(store, chat.id) == before
            assert len(mock.response_requests) == sent
            return
        await attempt
        assert attempt.error is None and attempt.status == "complete", attempt.error
        assert len(mock.response_requests) == sent + 1


@FUZZ
@given(content=CONTENT, stream=st.booleans())
def test_send_takes_content_or_raises_a_typed_error_with_nothing_changed(
    content: Any, stream: bool
) -> None:
    asyncio.run(act(lambda chat: chat.send(content, stream=stream), stream))


@FUZZ
@given(content=CONTENT, stream=st.booleans())
def test_edit_takes_content_or_raises_a_typed_error_with_nothing_changed(
    content: Any, stream: bool
) -> None:
    def edit(chat: Conversation) -> Any:
        user = next(n for n in chat.active_path() if n.role == "user")
        return chat.edit(user.id, content, stream=stream)

    asyncio.run(act(edit, stream))


@pytest.mark.parametrize(
    "content",
    [[1, 2], [{"role": "user", "content": 5}], [{"role": "user", "content": [1]}], None, b"x"],
)
def test_the_reported_contents_are_typed_errors(content: Any) -> None:
    async def run() -> None:
        async with MockResponsesAPI() as mock:
            chat = await chat_on(mock, InMemoryStore())
            with pytest.raises(GraphError, match="cannot send this message") as raised:
                chat.send(content)
            assert isinstance(raised.value, TypeError)
            assert chat.graph.to_dict()["nodes"] == [] and mock.response_requests == []

    asyncio.run(run())


# -- graph and record documents --------------------------------------------------------------


def graph_document() -> dict[str, Any]:
    ids = iter(range(99))
    graph = ConversationGraph("c", id_factory=lambda prefix: f"{prefix}_{next(ids)}")
    graph.add_system("be brief")
    graph.add_user("hi")
    attempt = graph.start_attempt(meta={"model": "m"})
    graph.complete(attempt.id, items=[{"type": "message", "role": "assistant", "content": "a"}])
    graph.add_user([{"type": "message", "role": "user", "content": [{"type": "input_text"}]}])
    return graph.to_dict()


GRAPH = graph_document()


def test_the_reported_graph_document_is_a_graph_error() -> None:
    document = replaced(GRAPH, ("nodes", 0, "id"), ["x"])
    with pytest.raises(GraphError, match="'id' is text"):
        ConversationGraph.from_dict(document)


@FUZZ
@given(path=st.sampled_from(paths(GRAPH)), value=JSON)
def test_graph_documents_load_or_raise_graph_error(path: tuple[Any, ...], value: Any) -> None:
    try:
        graph = ConversationGraph.from_dict(replaced(GRAPH, path, value))
    except GraphError:
        return
    assert ConversationGraph.from_dict(graph.to_dict()).to_dict() == graph.to_dict()


RECORD = AttemptRecord(
    "m1", "a1", included={"u": 3}, sent=["u"], approvals=[{"call_id": "c"}], budget=10
).to_dict()


@FUZZ
@given(path=st.sampled_from(paths(RECORD)), value=JSON)
def test_record_documents_load_or_raise_record_error(path: tuple[Any, ...], value: Any) -> None:
    try:
        record = AttemptRecord.from_dict(replaced(RECORD, path, value))
    except RecordError:
        return
    assert AttemptRecord.from_dict(record.to_dict()) == record


# -- ids given to open_conversation and the stores -------------------------------------------


@FUZZ
@given(cid=JSON.filter(lambda v: v is not None), backend=st.sampled_from(["memory", "sqlite"]))
def test_conversation_ids_open_or_raise_store_errors(
    cid: Any, backend: str, tmp_path: Path
) -> None:
    async def run() -> None:
        path = tmp_path / f"{os.getpid()}-{id(cid)}.db"
        store = InMemoryStore() if backend == "memory" else SQLiteStore(path)
        async with store:
            await store.create_conversation("kept", strategy="replay", meta={})
            for call in (
                open_conversation(store, cid, strategy="replay"),
                open_conversation(store, cid, strategy="replay", create=False),
                store.get_conversation(cid),
                store.load_graph(cid),
                store.delete_conversation(cid),
            ):
                with contextlib.suppress(StateExtError):
                    await call
            left = set(await store.list_conversations())
            assert "kept" in left and left <= {"kept", cid if isinstance(cid, str) else ""}

    asyncio.run(run())
    for leftover in tmp_path.glob("*"):
        leftover.unlink()


# -- export documents ------------------------------------------------------------------------


def exported() -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        store = InMemoryStore()
        async with MockResponsesAPI() as mock:
            chat = await chat_on(mock, store)
            await chat.send("hello")
            await chat.retry()
        return await export_conversation(store, chat.id)

    return asyncio.run(run())


DOCUMENT = exported()


@FUZZ
@given(path=st.sampled_from(paths(DOCUMENT)), value=JSON)
def test_import_documents_import_or_raise_with_nothing_stored(
    path: tuple[Any, ...], value: Any
) -> None:
    async def run() -> None:
        store = InMemoryStore()
        try:
            await import_document(store, replaced(DOCUMENT, path, value))
        except (StateBlobError, StoreError):
            assert await store.list_conversations() == []
            return
        (cid,) = await store.list_conversations()
        await stored(store, cid)

    asyncio.run(run())


# -- HTTP bodies -----------------------------------------------------------------------------

ACTIONS = ["messages", "edit", "retry", "switch", "approvals", "stop", "resume"]
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "content": JSON_CONTENT,
        "stream": JSON,
        "user_id": JSON | st.just("USER"),
        "node_id": JSON | st.just("USER"),
        "call_id": JSON,
        "decision": st.sampled_from(["approved", "rejected"]) | JSON,
        "budget": JSON,
        "strategy": st.sampled_from(["replay", "session"]) | JSON,
        "system": JSON,
    },
)


async def view(client: ASGIClient, cid: str) -> tuple[Any, ...]:
    shown = (await client.get(f"/api/conversations/{cid}"))[1]
    attempts = (await client.get(f"/api/conversations/{cid}/attempts"))[1]
    return shown, attempts


async def post(client: ASGIClient, path: str, body: Any) -> tuple[int, Any]:
    response = await client.open("POST", path, body)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = await asyncio.wait_for(response.all_events(), 30)
        return response.status, events
    return response.status, await response.json()


@FUZZ
@given(action=st.sampled_from([*ACTIONS, "create"]), body=FIELDS | JSON)
def test_http_bodies_answer_or_get_a_typed_4xx_with_nothing_changed(action: str, body: Any) -> None:
    async def run() -> None:
        async with MockResponsesAPI() as mock:
            store = InMemoryStore()
            app = create_app(
                store=store,
                agent=Agent(name="a", model=mock.model()),
                chat_options={"counter": FixedTokenCounter()},
            )
            client = ASGIClient(app)
            try:
                status, created = await client.post("/api/conversations", {})
                cid = created["id"]
                await post(client, f"/api/conversations/{cid}/messages", {"content": "hi"})
                before, listed = await view(client, cid), await store.list_conversations()
                user = next(m["id"] for m in before[0]["active_path"] if m["role"] == "user")
                sent = json.loads(json.dumps(body).replace('"USER"', json.dumps(user)))
                path = "/api/conversations"
                if action != "create":
                    path += f"/{cid}/{action}"
                status, answer = await post(client, path, sent)
                assert status < 500, answer
                if status >= 400:
                    assert isinstance(answer["error"]["type"], str) and answer["error"]["message"]
                    assert await view(client, cid) == before
                    assert await store.list_conversations() == listed
            finally:
                await app.state.chat_server.aclose()

    asyncio.run(run())
