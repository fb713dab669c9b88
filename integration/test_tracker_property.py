"""Property test: random send / ack / fail / rewind / serialize-restore against the mock server.

Whatever the interleaving, the server never holds a duplicate item and no user input is lost:
every message is either in the server-side context of the tracker's cursor, exactly once and
in order, or still pending in the ledger to be sent.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_state_ext import ServerConversationTracker
from agents_state_ext._reconcile import reconcile_conversation
from agents_state_ext.testing import Fault, MockResponsesAPI

from ._support import texts

EXAMPLES = 60
FAULTS = {
    "ok": None,
    "500": lambda: Fault.status(500),
    "429": lambda: Fault.rate_limit(),
    "drop": lambda: Fault.connect_error(),
    "timeout": lambda: Fault.timeout(),
    "mid-stream": lambda: Fault.drop_mid_stream(3),  # after the first output_item.added
    "accepted-then-500": lambda: Fault.status(500, commit=True),
    "accepted-then-drop": lambda: Fault.connect_error(commit=True),
}
step = st.one_of(
    st.tuples(st.just("turn"), st.sampled_from(sorted(FAULTS)), st.booleans()),
    st.tuples(st.just("restore"), st.just(""), st.just(False)),
)


async def send(
    client: Any, tracker: ServerConversationTracker, new: list[Any], streamed: bool
) -> tuple[str | None, list[Any]]:
    """Send what the ledger says for a turn bringing ``new``; return the response id and output."""
    items = tracker.reduce(new)
    tracker.mark_sent(items)
    kwargs: dict[str, Any] = {"model": "gpt-4.1", "input": items}
    if tracker.conversation_id:
        kwargs["conversation"] = tracker.conversation_id
    elif tracker.previous_response_id:
        kwargs["previous_response_id"] = tracker.previous_response_id
    if not streamed:
        response = await client.responses.create(**kwargs)
        return response.id, list(response.output)
    stream = await client.responses.create(stream=True, **kwargs)
    async for event in stream:
        if event.type == "response.completed":
            return event.response.id, list(event.response.output)
    raise RuntimeError("stream ended without response.completed")


async def scenario(steps: list[tuple[str, str, bool]], strategy: str) -> None:
    async with MockResponsesAPI() as mock:
        client = mock.client()
        conv = mock.create_conversation() if strategy == "conversation" else None
        tracker = ServerConversationTracker(
            strategy="conversation" if conv else "previous_response", conversation_id=conv
        )
        said: list[str] = []
        for number, (kind, fault_name, streamed) in enumerate(steps):
            if kind == "restore":
                tracker = ServerConversationTracker.from_dict(
                    json.loads(json.dumps(tracker.to_dict()))
                )
                continue
            text = f"message {number}"
            said.append(text)
            if tracker.uncertain:
                await reconcile_conversation(tracker, client)
            fault = FAULTS[fault_name]
            if fault is not None:
                mock.inject(fault())
            try:
                new = [{"role": "user", "content": text}]
                response_id, output = await send(client, tracker, new, streamed)
            except Exception:
                if tracker.strategy == "conversation":
                    tracker.mark_uncertain()
                else:
                    tracker.rewind()
                continue
            tracker.acknowledge(response_id, output)
            check(mock, tracker, said)
        if tracker.uncertain:
            await reconcile_conversation(tracker, client)
            assert tracker.uncertain == []
        check(mock, tracker, said)


def check(mock: MockResponsesAPI, tracker: ServerConversationTracker, said: list[str]) -> None:
    if tracker.conversation_id:
        context = mock.conversation_items(tracker.conversation_id)
    elif tracker.previous_response_id:
        context = mock.transcript(tracker.previous_response_id)
    else:
        context = []
    ids = [item["id"] for item in context if "id" in item]
    assert len(ids) == len(set(ids)), "duplicate item ids on the server"
    users = [t.removeprefix("user:") for t in texts(context) if t.startswith("user:")]
    assert len(users) == len(set(users)), f"a user message reached the server twice: {users}"
    pending = [str(i["content"]) for i in tracker.pending]
    # Uncertain items may be on the server already: that is why they wait for evidence.
    uncertain = [str(i["content"]) for i in tracker.uncertain]
    assert sorted(users + pending) == sorted(set(users + pending)), "held twice"
    assert set(said) <= set(users) | set(pending) | set(uncertain), "a user message was lost"
    assert users == [s for s in said if s in users], "server order differs from send order"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=12))
def test_previous_response_ledger_never_duplicates_or_loses(steps: list[Any]) -> None:
    asyncio.run(scenario(steps, "previous_response"))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=12))
def test_conversation_ledger_never_duplicates_or_loses(steps: list[Any]) -> None:
    asyncio.run(scenario(steps, "conversation"))
