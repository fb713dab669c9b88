"""Unit tests of the ServerConversationTracker ledger: dedupe rules, lifecycle, serialization."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_state_ext import StateBlobError
from agents_state_ext._tracker import ServerConversationTracker


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def out_msg(item_id: str, text: str) -> dict[str, Any]:
    return {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip


def fcall(call_id: str, item_id: str) -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": "f",
            "arguments": "{}", "status": "completed"}  # fmt: skip


def fout(call_id: str, output: str = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def test_acknowledge_advances_cursor_only_from_a_response_with_an_id() -> None:
    t = ServerConversationTracker()
    t.mark_sent([user("a")])
    t.acknowledge("resp_1", [out_msg("msg_1", "x")])
    assert t.previous_response_id == "resp_1"
    t.mark_sent([user("b")])
    t.acknowledge(None, [out_msg("msg_2", "y")])
    assert t.previous_response_id == "resp_1"


def test_conversation_strategy_never_sets_previous_response_id() -> None:
    t = ServerConversationTracker(strategy="conversation", conversation_id="conv_1")
    t.mark_sent([user("a")])
    t.acknowledge("resp_1", [out_msg("msg_1", "x")])
    assert t.previous_response_id is None
    assert t.conversation_id == "conv_1"
    assert t.last_item_id == "msg_1"


def test_reduce_drops_acknowledged_ids_call_outputs_and_idless_items_before_them() -> None:
    t = ServerConversationTracker()
    first = user("weather?")
    t.mark_sent([first])
    t.acknowledge("resp_1", [fcall("call_1", "fc_1")])
    t.mark_sent([fout("call_1")])
    t.acknowledge("resp_2", [out_msg("msg_1", "sunny")])
    # A client replay of the whole history (fresh dict objects, as after a resume) plus a new turn.
    replay = [user("weather?"), fcall("call_1", "fc_1"), fout("call_1"), out_msg("msg_1", "sunny")]
    new = user("and tomorrow?")
    assert t.reduce([*replay, new]) == [new]


def test_reduce_never_dedupes_idless_input_by_content() -> None:
    t = ServerConversationTracker()
    t.mark_sent([user("yes")])
    t.acknowledge("resp_1", [out_msg("msg_1", "ok")])
    again = user("yes")
    assert t.reduce([again]) == [again]


def test_reduce_dedupes_idless_reasoning_output_by_digest() -> None:
    t = ServerConversationTracker()
    t.mark_sent([user("q")])
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    t.acknowledge("resp_1", [reasoning])
    stripped = {"type": "reasoning", "summary": []}
    assert t.reduce([stripped]) == []


def test_rewind_puts_the_batch_in_front_once_and_identity_dedupes_a_retry() -> None:
    t = ServerConversationTracker()
    a, b = user("a"), user("b")
    t.mark_sent([a])
    t.rewind()
    assert t.pending == [a]
    # The SDK retries with the same objects: a is not put in front twice.
    assert t.reduce([a]) == [a]
    # A new run brings b: the lost a goes in front of it.
    assert t.reduce([b]) == [a, b]
    t.mark_sent([a, b])
    assert t.pending == []
    t.acknowledge("resp_1", [])
    assert t.pending == [] and not t.in_flight


def test_a_held_copy_of_a_resumed_run_states_own_input_is_not_sent_beside_it() -> None:
    t = ServerConversationTracker()
    t.mark_sent([fout("call_1"), user("late"), user("yes")])
    t.rewind()
    # Without the expectation, an id-less copy is another occurrence: both go out.
    again = [fout("call_1"), user("late")]
    assert t.reduce(again) == [user("late"), user("yes"), *again]
    # The resumed RunState sends "late" itself (one staged occurrence): the held copy stands
    # aside, once; "yes", which the RunState does not carry, still goes in front.
    t.expect_copies([user("late")])
    assert t.reduce(again) == [user("yes"), *again]
    assert t.reduce([*again, user("late")]) == [user("yes"), *again, user("late")]
    t.mark_sent(t.reduce(again))
    t.acknowledge("resp_1", [])
    assert t.pending == []  # the held copy of "late" left with the RunState's own
    t.end_run()  # the expectation was this run's
    t.mark_sent([user("late")])
    t.rewind()
    assert t.reduce([user("late")]) == [user("late"), user("late")]


def test_mark_sent_while_in_flight_keeps_the_unreported_batch() -> None:
    t = ServerConversationTracker()
    a, b = user("a"), user("b")
    t.mark_sent([a])
    t.mark_sent([b])
    assert t.pending == [a]


def test_uncertain_batches_wait_for_evidence() -> None:
    t = ServerConversationTracker(strategy="conversation", conversation_id="conv_1")
    a = user("a")
    t.mark_sent([a])
    t.mark_uncertain()
    assert t.uncertain == [a] and t.pending == []
    t.settle_uncertain(accepted=False)
    assert t.pending == [a] and t.uncertain == []
    t.mark_sent([a])
    t.mark_uncertain()
    t.settle_uncertain(accepted=True, server_items=[out_msg("msg_9", "late")])
    assert t.pending == [] and t.has_item_id("msg_9")


def test_round_trip_is_json_and_keeps_everything_that_matters() -> None:
    t = ServerConversationTracker(previous_response_id="resp_0")
    t.mark_sent([user("a"), fout("call_7")])
    t.acknowledge("resp_1", [out_msg("msg_1", "x"), {"type": "reasoning", "summary": []}])
    t.mark_sent([user("lost")])
    data = json.loads(json.dumps(t.to_dict()))
    back = ServerConversationTracker.from_dict(data)
    assert back.to_dict() == t.to_dict()
    assert back.previous_response_id == "resp_1"
    assert back.pending == [user("lost")]  # in flight is saved as pending
    assert back.has_item_id("msg_1") and back.has_call_output("call_7")


def test_digests_are_bounded() -> None:
    t = ServerConversationTracker(max_digests=3)
    for i in range(10):
        t.mark_sent([])
        t.acknowledge(f"resp_{i}", [{"type": "reasoning", "summary": [{"text": str(i)}]}])
    assert len(t.to_dict()["digests"]) == 3


def test_end_run_forgets_item_objects() -> None:
    t = ServerConversationTracker()
    a = user("a")
    t.mark_sent([a])
    t.acknowledge("resp_1", [])
    assert t.reduce([a]) == []  # same object within the run
    t.end_run()
    assert t.reduce([a]) == [a]  # across runs, id-less input is never deduped by content


@pytest.mark.parametrize(
    "blob",
    [
        {"version": 99, "strategy": "previous_response"},
        {"version": 0},
        {"strategy": "previous_response"},
        {"version": 1},
        {"version": 1, "strategy": "conversation"},
        {"version": 1, "strategy": "previous_response", "pending": 5},
        [],
    ],
)
def test_bad_state_raises_state_blob_error(blob: Any) -> None:
    with pytest.raises(StateBlobError):
        ServerConversationTracker.from_dict(blob)


def test_constructor_rejects_inconsistent_strategy() -> None:
    with pytest.raises(ValueError):
        ServerConversationTracker(strategy="conversation")
    with pytest.raises(ValueError):
        ServerConversationTracker(strategy="previous_response", conversation_id="c")


def test_rollback_steps_back_over_unprocessed_responses_and_requeues_their_input() -> None:
    t = ServerConversationTracker()
    t.mark_sent([user("go")])
    t.acknowledge("resp_1", [fcall("call_1", "fc_1")])
    t.mark_sent([fout("call_1")])
    t.acknowledge("resp_2", [fcall("call_2", "fc_2")])
    assert t.has_call_output("call_1")
    assert t.rollback_to("resp_1") is True
    assert t.previous_response_id == "resp_1"
    assert not t.has_call_output("call_1") and not t.has_item_id("fc_2")
    assert t.pending == [fout("call_1")]
    # The SDK re-sends its own copy of the output: the pending copy is not sent twice.
    again = fout("call_1")
    assert t.reduce([again]) == [again]
    t.mark_sent([again])
    assert t.pending == []


def test_rollback_beyond_the_journal_changes_nothing() -> None:
    t = ServerConversationTracker(previous_response_id="resp_0")
    t.mark_sent([user("a")])
    t.acknowledge("resp_1", [])
    before = t.to_dict()
    assert t.rollback_to("resp_unknown") is False
    assert t.to_dict() == before
    assert t.rollback_to("resp_1") is True  # already there


def test_journal_survives_serialization() -> None:
    t = ServerConversationTracker()
    t.mark_sent([user("go")])
    t.acknowledge("resp_1", [out_msg("msg_1", "x")])
    back = ServerConversationTracker.from_dict(json.loads(json.dumps(t.to_dict())))
    assert back.rollback_to(None) is True
    assert back.pending == [user("go")] and not back.has_item_id("msg_1")
