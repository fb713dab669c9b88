"""Export a conversation to one JSON document and import it into any backend, losing nothing."""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _backends import BACKENDS

from agents_state_ext._attempts import AttemptRecord
from agents_state_ext._graph import ConversationGraph
from agents_state_ext.errors import ConversationNotFoundError, StateBlobError, StoreError
from agents_state_ext.stores import ConversationStore, InMemoryStore
from agents_state_ext.stores.base import LedgerStore, TokenCountStore
from agents_state_ext.stores.transfer import export_conversation, import_conversation

pytestmark = pytest.mark.anyio

META = {"budget": 300, "prompt_version": "v2", "server_conversations": {"root": None, "known": {}}}


def ids() -> Callable[[str], str]:
    counters: dict[str, itertools.count[int]] = {}
    return lambda prefix: f"{prefix}{next(counters.setdefault(prefix, itertools.count(1)))}"


async def fill(store: ConversationStore, conversation_id: str = "chat_1") -> None:
    """A conversation with every kind of content an export must carry."""
    clock = itertools.count(100)
    graph = ConversationGraph(conversation_id, id_factory=ids(), clock=lambda: float(next(clock)))
    await store.create_conversation(conversation_id, strategy="previous_response", meta=META)
    graph.add_system("be brief")
    user = graph.add_user("hi")
    first = graph.start_attempt()
    graph.stream(first.id, "hel")
    graph.complete(first.id, meta={"response_id": "resp_1", "usage": {"total_tokens": 9}})
    second = graph.retry(user.id)
    graph.stop(second.id)
    graph.switch(first.id)
    call = {"type": "function_call", "call_id": "call_1", "name": "rm", "arguments": "{}"}
    graph.add_user([{"type": "input_text", "text": "delete it ☃"}])
    paused = graph.start_attempt()
    graph.pause(paused.id, items=[call], meta={"approvals": [{"call_id": "call_1"}]})
    records = [
        AttemptRecord(first.id, str(first.attempt_id), user.id, started_at=1.0, status="complete",
                      response_id="resp_1", included={user.id: 3}, usage={"total_tokens": 9}),
        AttemptRecord(second.id, str(second.attempt_id), user.id, started_at=2.0,
                      status="cancelled"),
        AttemptRecord(paused.id, str(paused.attempt_id), started_at=None,
                      status="awaiting_approval", approvals=[{"call_id": "call_1"}]),
    ]  # fmt: skip
    nodes = graph.take_changes()
    await store.commit(conversation_id, nodes[:3], expected_head=None, new_head=first.id)
    await store.commit(
        conversation_id,
        nodes[3:],
        expected_head=first.id,
        new_head=graph.active_leaf,
        attempts=records,
    )
    await store.put_run_state(conversation_id, str(paused.attempt_id), '{"paused": "run"}')
    if isinstance(store, TokenCountStore):
        await store.put_token_counts(conversation_id, "o200k_base", {user.id: 3, first.id: 5})
    if isinstance(store, LedgerStore):
        await store.put_ledger(
            conversation_id, '{"ledger": 1}', expected_version=0, holder="w1", held_until=9.0
        )


def without_created_at(document: dict[str, Any]) -> dict[str, Any]:
    # The store protocol stamps created_at itself when a conversation is created: an import
    # cannot carry it over.
    document = copy.deepcopy(document)
    del document["conversation"]["created_at"]
    return document


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_round_trip_through_every_backend_loses_nothing(
    backend: str, tmp_path: Path
) -> None:
    source, middle, back = InMemoryStore(), await BACKENDS[backend](tmp_path)(), InMemoryStore()
    try:
        await fill(source)
        document = await export_conversation(source, "chat_1")
        assert json.loads(json.dumps(document)) == document  # one plain JSON document
        assert await import_conversation(middle, document) == "chat_1"
        exported = await export_conversation(middle, "chat_1")
        assert without_created_at(exported) == without_created_at(document)
        assert await import_conversation(back, exported) == "chat_1"
        assert without_created_at(await export_conversation(back, "chat_1")) == without_created_at(
            document
        )
        # what the target store answers, not only what it exports
        assert (await middle.load_graph("chat_1")).to_dict() == (
            await source.load_graph("chat_1")
        ).to_dict()
        assert await middle.list_attempts("chat_1") == await source.list_attempts("chat_1")
    finally:
        await middle.aclose()


async def test_the_document_holds_everything_in_order() -> None:
    store = InMemoryStore()
    await fill(store)
    document = await export_conversation(store, "chat_1")
    assert document["format"] == "agents-state-ext/conversation"
    assert document["version"] == 1
    assert document["conversation"]["strategy"] == "previous_response"
    assert document["conversation"]["meta"] == META
    assert [n["id"] for n in document["nodes"]] == ["msg1", "msg2", "msg3", "msg4", "msg5", "msg6"]
    assert document["head"] == "msg6"
    # start order: unset start times last
    assert [r["attempt_id"] for r in document["attempts"]] == ["att1", "att2", "att3"]
    assert document["run_states"] == {"att3": '{"paused": "run"}'}
    assert document["token_counts"] == {"o200k_base": {"msg2": 3, "msg3": 5}}
    assert document["ledger"] == {"blob": '{"ledger": 1}'}  # no version, no holder


async def test_an_imported_ledger_starts_afresh_and_unheld() -> None:
    source, target = InMemoryStore(), InMemoryStore()
    await fill(source)
    await import_conversation(target, await export_conversation(source, "chat_1"))
    ledger = await target.get_ledger("chat_1")
    assert ledger is not None
    assert (ledger.blob, ledger.version, ledger.holder, ledger.held_until) == (
        '{"ledger": 1}',
        1,
        None,
        None,
    )


async def test_token_counts_of_other_encodings_are_exported_when_named() -> None:
    store = InMemoryStore()
    await fill(store)
    await store.put_token_counts("chat_1", "fixed", {"msg2": 1})
    default = await export_conversation(store, "chat_1")
    named = await export_conversation(store, "chat_1", encodings=["fixed"])
    assert "fixed" not in default["token_counts"]
    assert named["token_counts"] == {"fixed": {"msg2": 1}}


async def test_a_taken_id_is_refused_unless_renamed() -> None:
    store = InMemoryStore()
    await fill(store)
    document = await export_conversation(store, "chat_1")
    with pytest.raises(StoreError, match="'chat_1' already exists"):
        await import_conversation(store, document)
    assert await import_conversation(store, document, conversation_id="chat_2") == "chat_2"
    assert await store.list_conversations() == ["chat_1", "chat_2"]
    renamed = await export_conversation(store, "chat_2")
    assert renamed["conversation"]["id"] == "chat_2"
    assert renamed["nodes"] == document["nodes"]
    with pytest.raises(StoreError, match="conversation id"):
        await import_conversation(store, document, conversation_id="")


async def test_a_ledger_kept_under_the_id_is_refused_and_left_alone() -> None:
    source, target = InMemoryStore(), InMemoryStore()
    await fill(source)
    await target.put_ledger("chat_1", "theirs", expected_version=0, holder=None, held_until=None)
    with pytest.raises(StoreError, match="ledger is already kept under 'chat_1'"):
        await import_conversation(target, await export_conversation(source, "chat_1"))
    assert await target.list_conversations() == []
    ledger = await target.get_ledger("chat_1")
    assert ledger is not None and ledger.blob == "theirs"


async def test_exporting_an_unknown_conversation_is_not_found() -> None:
    with pytest.raises(ConversationNotFoundError):
        await export_conversation(InMemoryStore(), "nope")


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = document
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return change


BAD = {
    "format": (_set("format", "something/else"), "format"),
    "version": (_set("version", 2), "unsupported version 2"),
    "conversation": (_set("conversation", []), "conversation: expected an object"),
    "conversation id": (_set("conversation.id", ""), "conversation.id"),
    "strategy": (_set("conversation.strategy", 3), "conversation.strategy"),
    "meta": (_set("conversation.meta", {"x": float("nan")}), "conversation.meta"),
    "nodes": (_set("nodes", {}), "nodes: expected a list"),
    "node": (_set("nodes.1", "msg2"), "nodes[1]: expected an object"),
    "node id": (_set("nodes.1.id", ["msg2"]), "nodes[1].id: expected text"),
    "surrogate": (_set("nodes.1.id", "\ud800"), "nodes[1].id: expected non-empty Unicode"),
    "items": (_set("nodes.1.items", "hi"), "nodes[1].items: expected a list"),
    "item": (_set("nodes.1.items.0", 7), "nodes[1].items[0]"),
    "role": (_set("nodes.1.role", "robot"), "nodes: not a tree"),
    "created": (_set("nodes.1.created_at", True), "nodes[1].created_at: expected a number"),
    "parent": (_set("nodes.1.parent_id", "ghost"), "nodes: not a tree"),
    "cycle": (_set("nodes.0.parent_id", "msg6"), "nodes: not a tree"),
    "duplicate": (_set("nodes.2.id", "msg2"), "nodes: not a tree"),
    "head": (_set("head", "ghost"), "head: not a tree"),
    "attempts": (_set("attempts", "att1"), "attempts: expected a list"),
    "attempt id": (_set("attempts.1.attempt_id", None), "attempts[1].attempt_id"),
    "twice": (_set("attempts.1.attempt_id", "att1"), "appears twice"),
    "started": (_set("attempts.0.started_at", "noon"), "attempts[0].started_at"),
    "run state": (_set("run_states.att3", {"x": 1}), "run_states['att3']: expected text"),
    "orphan run": (_set("run_states.att9", "x"), "no attempt record has this id"),
    "count": (_set("token_counts.o200k_base.msg2", -1), "non-negative"),
    "count node": (_set("token_counts.o200k_base.ghost", 1), "nodes not in the document"),
    "ledger": (_set("ledger", {"blob": 1}), "ledger.blob: expected text"),
}


@pytest.mark.parametrize("case", list(BAD))
async def test_a_bad_document_names_the_field_and_writes_nothing(case: str) -> None:
    source, target = InMemoryStore(), InMemoryStore()
    await fill(source)
    document = await export_conversation(source, "chat_1")
    change, message = BAD[case]
    change(document)
    with pytest.raises(StateBlobError, match=re.escape(message)):
        await import_conversation(target, document)
    assert await target.list_conversations() == []
    assert await target.get_ledger("chat_1") is None


@pytest.mark.parametrize("document", [None, "{}", [], {"format": "agents-state-ext/conversation"}])
async def test_what_is_no_document_is_refused(document: Any) -> None:
    with pytest.raises(StateBlobError, match="conversation document"):
        await import_conversation(InMemoryStore(), document)


class FailingRunStates(InMemoryStore):
    async def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        raise StoreError("disk full")


async def test_a_failure_midway_leaves_nothing_behind() -> None:
    source, target = InMemoryStore(), FailingRunStates()
    await fill(source)
    with pytest.raises(StoreError, match="disk full"):
        await import_conversation(target, await export_conversation(source, "chat_1"))
    assert await target.list_conversations() == []
    assert await target.get_ledger("chat_1") is None


class CoreOnly:
    """A store with the core protocol only: no ledger, no token counts."""

    def __init__(self) -> None:
        self._inner = InMemoryStore()

    def __getattr__(self, name: str) -> Any:
        if name in ("get_ledger", "put_ledger", "delete_ledger") or "token" in name:
            raise AttributeError(name)
        return getattr(self._inner, name)


async def test_a_store_without_capabilities_takes_what_it_can() -> None:
    source, core = InMemoryStore(), CoreOnly()
    assert isinstance(core, ConversationStore)
    assert not isinstance(core, LedgerStore | TokenCountStore)
    await fill(source)
    document = await export_conversation(source, "chat_1")
    with pytest.raises(StoreError, match="cannot keep one"):
        await import_conversation(core, document)  # type: ignore[arg-type]
    assert await core.list_conversations() == []
    document["ledger"] = None
    await import_conversation(core, document)  # type: ignore[arg-type]
    exported = await export_conversation(core, "chat_1")  # type: ignore[arg-type]
    assert exported["token_counts"] == {}  # a cache: skipped, not refused
    assert exported["nodes"] == document["nodes"]
    assert exported["run_states"] == document["run_states"]


async def test_an_empty_conversation_round_trips() -> None:
    source, target = InMemoryStore(), InMemoryStore()
    await source.create_conversation("empty", strategy="replay")
    document = await export_conversation(source, "empty")
    assert document["nodes"] == [] and document["head"] is None
    await import_conversation(target, document)
    assert without_created_at(await export_conversation(target, "empty")) == without_created_at(
        document
    )


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_moved_chat_goes_on_where_it_left_off(streamed: bool, tmp_path: Path) -> None:
    from agents import Agent, set_tracing_disabled

    from agents_state_ext.chat import open_conversation
    from agents_state_ext.stores import SQLiteStore
    from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI

    set_tracing_disabled(True)
    async with MockResponsesAPI() as mock:
        options: dict[str, Any] = {
            "agent": Agent(name="assistant", model=mock.model("gpt-4.1")),
            "counter": FixedTokenCounter(),
        }
        source = InMemoryStore()
        chat = await open_conversation(
            source, "chat_1", strategy="previous_response", system="be brief", **options
        )
        await chat.send("hi", stream=streamed)
        last = await chat.send("again", stream=streamed)
        cursor = (await chat.record(last.id)).response_id
        async with SQLiteStore(tmp_path / "moved.db") as target:
            await import_conversation(target, await export_conversation(source, "chat_1"))
            moved = await open_conversation(target, "chat_1", create=False, **options)
            await moved.send("and now?", stream=streamed)
            body = mock.response_requests[-1]
            assert body["previous_response_id"] == cursor
            assert [item["content"] for item in body["input"]] == ["and now?"]
            assert [n.text() for n in await target.active_path("chat_1")] == [
                "be brief",
                "hi",
                "echo: hi",
                "again",
                "echo: again",
                "and now?",
                "echo: and now?",
            ]
