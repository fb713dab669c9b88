"""Attempt records across stores: older records stay readable, request parts travel with a chat."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, set_tracing_disabled

from agents_state_ext import AttemptRecord, InMemoryStore, SQLiteStore, explain, open_conversation
from agents_state_ext.stores import export_conversation, import_conversation
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI

set_tracing_disabled(True)
pytestmark = pytest.mark.anyio

# A record as the previous version stored it: agent-level sampling, no request details.
OLDER: dict[str, Any] = {
    "message_id": "m2",
    "attempt_id": "att_old",
    "parent_user_id": "m1",
    "request_id": "req_old",
    "model": "gpt-4.1",
    "prompt_version": None,
    "sampling": {"temperature": 0.7},
    "included": {"m1": 5},
    "budget": None,
    "used": 5,
    "overflow": False,
    "state_owner": "conversation",
    "cursor_before": "conv_1",
    "cursor_after": "conv_1",
    "reseeded_from": None,
    "response_id": "resp_1",
    "usage": {},
    "status": "complete",
    "error": None,
    "started_at": 1.0,
    "finished_at": 2.0,
    "approvals": [],
}


async def test_an_older_record_loads_from_every_kind_of_store(tmp_path: Any) -> None:
    record = AttemptRecord.from_dict(json.loads(json.dumps(OLDER)))
    assert (record.sent, record.request_digest, record.invalidated_by) == (None, None, None)
    for store in (InMemoryStore(), SQLiteStore(tmp_path / "old.db")):
        await store.create_conversation("c1", strategy="conversation")
        await store.put_attempt("c1", record)
        back = await store.get_attempt("c1", "att_old")
        await store.aclose()
        assert back == record
    # compared with a newer record, only inputs are named; the output cursor is not
    newer = AttemptRecord.from_dict({**OLDER, "attempt_id": "att_new", "cursor_after": "conv_2"})
    assert not explain(record, newer)


@pytest.mark.parametrize("streamed", [False, True])
async def test_request_parts_travel_with_an_exported_chat(streamed: bool, tmp_path: Any) -> None:
    async with MockResponsesAPI() as mock:
        agent = Agent(name="a", instructions="Be brief.", model=mock.model())
        source = SQLiteStore(tmp_path / "a.db")
        chat = await open_conversation(
            source, strategy="replay", agent=agent, counter=FixedTokenCounter(10)
        )
        answer = await chat.send("hi", stream=streamed)
        document = json.loads(json.dumps(await export_conversation(source, chat.id)))
        target = InMemoryStore()
        moved = await import_conversation(target, document)
        again = await open_conversation(target, moved, agent=agent, counter=FixedTokenCounter(10))
        record = await again.record(answer.id)
        text = await again.request_part(str(record.instructions))
        replayed = await (await again.replay(answer.id, stream=streamed)).report()
        body = [r.json for r in mock.requests if r.path == "/responses"][-1]
        await source.aclose()
    assert text == "Be brief." == body["instructions"]
    assert replayed.identical
    with pytest.raises(KeyError):
        await again.request_part("sha256:" + "0" * 64)
