"""A tracker dumped by the code before the cursor kinds (issue 30) loads and acts the same.

``data/tracker_v3_dumps.json`` was written by that code: one ledger per server strategy, each
with a request in flight, an open call, a restart behind it and (conversation) an undelivered
response. Loaded now, each dumps back to the very same JSON and behaves as its strategy did.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agents_state_ext import OpenToolCallsError, ServerConversationTracker

FROZEN: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "tracker_v3_dumps.json").read_text()
)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


@pytest.mark.parametrize("name", ["previous_response", "conversation"])
def test_a_frozen_dump_round_trips_unchanged(name: str) -> None:
    tracker = ServerConversationTracker.from_dict(FROZEN[name])
    assert tracker.strategy == name
    assert tracker.to_dict() == FROZEN[name]
    assert json.dumps(tracker.to_dict(), sort_keys=True) == json.dumps(FROZEN[name], sort_keys=True)


def test_a_frozen_previous_response_dump_chains_from_its_cursor() -> None:
    tracker = ServerConversationTracker.from_dict(FROZEN["previous_response"])
    assert tracker.previous_response_id == "resp_3"
    assert tracker.conversation_id is None
    assert tracker.supersedes("resp_2")
    batch = tracker.reduce([user("f")])
    # The in-flight request came back as pending, its interrupted output in front.
    assert [i.get("call_id") or i.get("content") for i in batch] == ["call_2", "d", "f"]
    tracker.mark_sent(batch)
    tracker.acknowledge("resp_4", [])
    assert tracker.previous_response_id == "resp_4"
    assert tracker.rollback_to("resp_3")
    assert [i.get("content") for i in tracker.pending if "content" in i] == ["d", "f"]


def test_a_frozen_conversation_dump_keeps_its_uncertain_batch() -> None:
    tracker = ServerConversationTracker.from_dict(FROZEN["conversation"])
    assert tracker.conversation_id == "conv_2"
    assert tracker.previous_response_id is None
    assert tracker.supersedes("conv_1")
    assert [i.get("content") for i in tracker.uncertain] == [None, "e"]
    assert tracker.undelivered is not None
    assert tracker.undelivered["response_id"] == "resp_2"
    tracker.settle_uncertain(accepted=False)
    batch = tracker.reduce([])
    tracker.mark_sent(batch)
    tracker.acknowledge("resp_5", [])
    # The conversation cursor does not move with responses; the answer waits as undelivered.
    assert tracker.previous_response_id is None
    assert tracker.conversation_id == "conv_2"
    assert tracker.undelivered == {"response_id": "resp_5", "output": []}
    assert tracker.open_calls == []
    # A request of this conversation that fails after it went out is held as maybe accepted.
    tracker.mark_sent([user("g")])
    tracker.mark_uncertain()
    assert [i.get("content") for i in tracker.uncertain] == ["g"]
    with pytest.raises(ValueError, match="conversation_id"):
        tracker.restart([])


def test_a_frozen_conversation_dump_keeps_its_raise_policy() -> None:
    data = dict(FROZEN["conversation"], uncertain=[], unsent_outputs=[])
    tracker = ServerConversationTracker.from_dict(data)
    with pytest.raises(OpenToolCallsError):
        tracker.reduce([user("h")])
