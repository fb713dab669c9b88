"""An edit while the handle's background try of a failed end is being stored (issue 33).

The end of an attempt fails in the store; the handle tries it again in the background. While
that commit is on its way, the user edits the message the attempt answered: the edit marks the
attempts it invalidates. It used to read the attempt's record from the store (still the
``queued`` start, the end not landed yet) and store that one, marked, over the end that
landed just before: node ``invalid`` (ended ``complete``), record ``queued`` for good.

And an edit whose start fails while it reads those records (the store down): the attempt
stayed ``queued`` in memory, and the handle refused every later send ("still queued").
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, set_tracing_disabled

from agents_state_ext import InMemoryStore, StoreUnavailableError, open_conversation
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI
from soak.fault_checks import disagreements

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


class GatedStore:
    """An ``InMemoryStore`` whose next commits fail as unavailable, or wait for a gate."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.failing = 0
        self.failing_reads = 0
        self.gate: asyncio.Event | None = None
        self.waiting = asyncio.Event()

    async def commit(self, *args: Any, **kwargs: Any) -> None:
        if self.failing:
            self.failing -= 1
            raise StoreUnavailableError("the connection was cut")
        gate, self.gate = self.gate, None
        if gate is not None:
            self.waiting.set()
            await gate.wait()
        await self.inner.commit(*args, **kwargs)

    async def get_attempt(self, *args: Any, **kwargs: Any) -> Any:
        if self.failing_reads:
            self.failing_reads -= 1
            raise StoreUnavailableError("the connection was cut")
        return await self.inner.get_attempt(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _options(mock: MockResponsesAPI) -> dict[str, Any]:
    return {
        "agent": Agent(name="assistant", model=mock.model("gpt-4.1")),
        "counter": FixedTokenCounter(),
    }


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_edit_while_a_failed_end_is_stored_again_keeps_the_end(
    streamed: bool, mock: MockResponsesAPI
) -> None:
    store, options = GatedStore(), _options(mock)
    chat = await open_conversation(store, strategy="replay", **options)
    await chat.send("one", stream=streamed)
    answered = chat.send("two", stream=streamed)
    assert await answered.started()
    gate = asyncio.Event()
    store.failing, store.gate = 1, gate  # the end fails; its try again waits at the gate
    with pytest.raises(StoreUnavailableError):
        await answered
    assert answered.status == "complete"
    await asyncio.wait_for(store.waiting.wait(), 10)  # the background try is on its way

    edited = chat.edit(answered.user_id, "two, again", stream=streamed)
    await asyncio.sleep(0.05)  # the edit has marked what it invalidates, and waits its turn
    gate.set()
    await asyncio.wait_for(edited, 10)

    fresh = await open_conversation(store, chat.id, **options)
    records = {r.message_id: r for r in await fresh.attempts()}
    assert records[answered.id].status == "complete"
    assert records[answered.id].invalidated_by == edited.user_id
    assert disagreements(fresh.graph.nodes(), list(records.values())) == {
        "every_attempt_final": [],
        "node_record_agree": [],
    }


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_edit_whose_start_fails_reading_what_it_invalidates_leaves_the_handle_usable(
    streamed: bool, mock: MockResponsesAPI
) -> None:
    store, options = GatedStore(), _options(mock)
    chat = await open_conversation(store, strategy="replay", **options)
    first = await chat.send("one", stream=streamed)
    store.failing_reads = 1
    failed = chat.edit(first.user_id, "one, again", stream=streamed)
    with pytest.raises(StoreUnavailableError):
        await failed
    assert failed.status == "failed"

    answered = await chat.send("two", stream=streamed)
    assert answered.status == "complete"

    fresh = await open_conversation(store, chat.id, **options)
    records = {r.message_id: r.status for r in await fresh.attempts()}
    assert records == {first.id: "complete", failed.id: "failed", answered.id: "complete"}
    assert disagreements(fresh.graph.nodes(), await fresh.attempts()) == {
        "every_attempt_final": [],
        "node_record_agree": [],
    }
    # Nothing of the failed edit was sent: the model was asked for "one", then for "two" on
    # the edited branch (the failed turn is not replayed).
    asked = [r.json["input"] for r in mock.requests if r.path == "/responses"]
    assert [[i["content"] for i in items if i.get("role") == "user"] for items in asked] == [
        ["one"],
        ["two"],
    ]
