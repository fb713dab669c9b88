"""The ``awaiting_approval`` status on the graph, and deciding pending tool calls (no I/O)."""

from __future__ import annotations

import pytest

from agents_state_ext import (
    AttemptRecord,
    ConversationGraph,
    InvalidTargetError,
    InvalidTransitionError,
    PendingApproval,
)
from agents_state_ext.chat.approvals import decide, open_calls, read_approvals, undecided

CALL = {"type": "function_call", "call_id": "c1", "name": "rm", "arguments": "{}"}


def paused_graph() -> tuple[ConversationGraph, str]:
    graph = ConversationGraph("c")
    graph.add_user("delete it")
    attempt = graph.start_attempt()
    graph.pause(
        attempt.id, items=[CALL], meta={"approvals": [{"call_id": "c1", "tool_name": "rm"}]}
    )
    return graph, attempt.id


def test_a_paused_attempt_waits_and_only_resume_stop_or_fail_move_it() -> None:
    graph, node_id = paused_graph()
    node = graph.get(node_id)
    assert (node.status, node.items) == ("awaiting_approval", [CALL])
    assert "finished_at" not in node.meta
    assert read_approvals(node) == [PendingApproval("c1", "rm")]
    with pytest.raises(InvalidTransitionError, match="awaiting_approval"):
        graph.add_user("meanwhile")
    with pytest.raises(InvalidTransitionError):
        graph.complete(node_id)
    with pytest.raises(InvalidTransitionError):
        graph.stream(node_id, "more")
    graph.annotate(
        node_id, {"approvals": [{"call_id": "c1", "tool_name": "rm", "decision": "approved"}]}
    )
    assert read_approvals(graph.get(node_id))[0].decision == "approved"
    graph.resume(node_id)
    assert graph.get(node_id).status == "streaming"
    with pytest.raises(InvalidTransitionError):
        graph.resume(node_id)
    with pytest.raises(InvalidTransitionError):
        graph.annotate(node_id, {})
    graph.complete(node_id)
    with pytest.raises(InvalidTransitionError):
        graph.pause(node_id)


@pytest.mark.parametrize("end", ["stop", "fail"])
def test_a_paused_attempt_can_be_stopped_or_failed(end: str) -> None:
    graph, node_id = paused_graph()
    node = graph.stop(node_id) if end == "stop" else graph.fail(node_id, "gone")
    assert node.status == ("cancelled" if end == "stop" else "failed")
    assert node.items == [CALL] and "finished_at" in node.meta


def test_an_edit_invalidates_a_paused_attempt_and_remembers_it_waited() -> None:
    graph, node_id = paused_graph()
    user = graph.get(node_id).parent_id
    assert user is not None
    graph.edit(user, "keep it")
    node = graph.get(node_id)
    assert (node.status, node.meta["status_before_invalid"]) == ("invalid", "awaiting_approval")
    restored = ConversationGraph.from_dict(graph.to_dict())
    assert restored.get(node_id).to_dict() == node.to_dict()


def test_deciding_pending_calls() -> None:
    pending = [PendingApproval("a", "rm"), PendingApproval("b", "rm", decision="approved")]
    assert undecided(pending) == ["a"]
    everything = decide(pending, None, "rejected", message="no", always=True)
    assert [(p.decision, p.message, p.always) for p in everything] == [
        ("rejected", "no", True),
        ("approved", None, False),  # None decides only what is undecided
    ]
    again = decide(everything, "a", "approved", message="ignored")
    assert (again[0].decision, again[0].message) == ("approved", None)
    with pytest.raises(InvalidTargetError, match="pending: a, b"):
        decide(pending, "zzz", "approved")
    assert PendingApproval.from_dict({**pending[0].to_dict(), "later": 1}) == pending[0]


def test_open_calls_are_the_calls_without_output() -> None:
    answered = {"type": "function_call", "call_id": "c2", "name": "ls", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c2", "output": "x"}
    assert open_calls([CALL, answered, output]) == [PendingApproval("c1", "rm", "{}")]


def test_records_keep_their_approvals_and_older_records_load_without() -> None:
    record = AttemptRecord("m1", "a1", status="awaiting_approval", approvals=[{"call_id": "c1"}])
    assert AttemptRecord.from_dict(record.to_dict()) == record
    older = record.to_dict()
    del older["approvals"]
    assert AttemptRecord.from_dict(older).approvals == []


def test_records_stored_before_exact_and_imported_from_load_with_their_defaults() -> None:
    older = AttemptRecord("m1", "a1", status="complete").to_dict()
    del older["exact"], older["imported_from"]
    loaded = AttemptRecord.from_dict(older)
    assert (loaded.exact, loaded.imported_from) == (True, None)
    marked = AttemptRecord("m1", "a1", exact=False, imported_from="SQLiteSession:s1")
    assert AttemptRecord.from_dict(marked.to_dict()) == marked
