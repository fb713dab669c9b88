"""Core checks: attempt records, paused runs, and closing the store."""

from __future__ import annotations

from typing import Any

from ..._attempts import AttemptRecord
from ...errors import StoreError
from ..base import AttemptNotFoundError
from ._support import StoreFactory, expect, opened, raises


async def check_attempts(factory: StoreFactory) -> None:
    """Attempt records round-trip, upsert in place and list in start order."""
    late = AttemptRecord("m2", "att_late", started_at=30.0, sampling={"temperature": 0.2})
    early = AttemptRecord("m1", "att_early", started_at=10.0, included={"m0": 12, "m1": 7})
    unset = AttemptRecord("m1", "att_unset")
    tie = AttemptRecord("m1", "att_tie", started_at=30.0)
    async with opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        expect(await store.list_attempts("c1") == [], "a new conversation has attempts")
        for record in (unset, late, early, tie):
            await store.put_attempt("c1", record)
        got = await store.get_attempt("c1", "att_early")
        expect(got.to_dict() == early.to_dict(), "the attempt changed in the store")
        order = [r.attempt_id for r in await store.list_attempts("c1")]
        expect(order == ["att_early", "att_late", "att_tie", "att_unset"], f"order {order}")
        late.status, late.response_id = "complete", "resp_9"
        await store.put_attempt("c1", late)
        again = await store.list_attempts("c1")
        expect([r.attempt_id for r in again] == order, "an upsert moved the attempt")
        expect(again[1].to_dict() == late.to_dict(), "the upsert was not stored")
        only = [r.attempt_id for r in await store.list_attempts("c1", message_id="m1")]
        expect(only == ["att_early", "att_tie", "att_unset"], f"filter gave {only}")
        await raises(AttemptNotFoundError, "unknown", store.get_attempt("c1", "missing"))

    # What a request carried: nested settings, digests, the context and what was sent.
    wire = AttemptRecord(
        "m3",
        "att_wire",
        started_at=40.0,
        model="gpt-4o",
        sampling={
            "temperature": 0.2,
            "reasoning": {"effort": "low", "summary": None},
            "extra_body": {"flags": [1, "two", {"deep": True}]},
            "extra_headers": {"X-Trace": "café ☕"},
            "tool_choice": {"type": "function", "name": "lookup"},
        },
        included={"m0": 12, "m1": 7, "m3": 4},
        sent=["m3"],
        instructions="sha256:" + "a" * 64,
        tools="sha256:" + "b" * 64,
        request_digest="sha256:" + "c" * 64,
        server_request_id="req_42",
        status="complete",
        invalidated_by="m9",
        invalidated_at=50.5,
        replay_of="att_early",
        trace_id="trace_" + "0" * 32,
    )
    async with opened(factory) as store:
        await store.create_conversation("c2", strategy="conversation")
        await store.put_attempt("c2", wire)
        back = await store.get_attempt("c2", "att_wire")
        expect(back.to_dict() == wire.to_dict(), "a record's request details changed")
        expect(list(back.included) == ["m0", "m1", "m3"], "the context lost its order")


async def check_run_states(factory: StoreFactory) -> None:
    """A paused attempt's run round-trips as text, is replaced, forgotten, and kept apart."""
    blob = '{"format": "agents-state-ext/run", "payload": {"text": "café ☕", "n": [1, 2]}}'
    async with opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.create_conversation("c2", strategy="replay")
        expect(await store.get_run_state("c1", "att_1") is None, "a new attempt has a run")
        await store.put_run_state("c1", "att_1", blob)
        expect(await store.get_run_state("c1", "att_1") == blob, "the run state changed")
        expect(await store.get_run_state("c2", "att_1") is None, "a run state leaked to c2")
        await store.put_run_state("c1", "att_1", "second")
        expect(await store.get_run_state("c1", "att_1") == "second", "a new run was not kept")
        await store.put_run_state("c1", "att_2", blob)
        await store.delete_run_state("c1", "att_1")
        expect(await store.get_run_state("c1", "att_1") is None, "a deleted run came back")
        expect(await store.get_run_state("c1", "att_2") == blob, "a delete removed another's")
        await store.delete_run_state("c1", "att_1")  # deleting what is gone is fine
        not_text: Any = {"not": "text"}
        await raises(
            StoreError, "a run state that is not text", store.put_run_state("c1", "att_3", not_text)
        )
        expect(await store.get_run_state("c1", "att_3") is None, "a refused run state was kept")


async def check_close(factory: StoreFactory) -> None:
    """``aclose`` is idempotent, and a closed store refuses work with StoreError."""
    store = await factory()
    try:
        await store.create_conversation("c1", strategy="replay")
    finally:
        await store.aclose()
    await store.aclose()
    await raises(StoreError, "a call after aclose", store.get_conversation("c1"))
    await raises(StoreError, "a write after aclose", store.create_conversation("c2", strategy="x"))
