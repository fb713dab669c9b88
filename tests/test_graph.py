"""ConversationGraph: the stop / retry / edit / switch rules of the branching spec."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_state_ext._graph import (
    GRAPH_VERSION,
    ConversationGraph,
    InvalidTargetError,
    InvalidTransitionError,
    default_id_factory,
)
from agents_state_ext._nodes import Node
from agents_state_ext.errors import GraphError, NodeNotFoundError


def make_graph() -> ConversationGraph:
    ids, ticks = itertools.count(1), itertools.count(1)
    return ConversationGraph(
        "conv_test",
        id_factory=lambda prefix: f"{prefix}_{next(ids)}",
        clock=lambda: float(next(ticks)),
    )


def ids(nodes: list[Any]) -> list[str]:
    return [n.id for n in nodes]


def turn(graph: ConversationGraph, question: str, answer: str) -> tuple[str, str]:
    user = graph.add_user(question)
    attempt = graph.start_attempt()
    graph.stream(attempt.id, answer)
    graph.complete(attempt.id)
    return user.id, attempt.id


# -- building ----------------------------------------------------------------------------------


def test_a_turn_is_a_user_node_and_one_attempt() -> None:
    graph = make_graph()
    system = graph.add_system("Be brief.")
    user = graph.add_user("Hi")
    assert user.items == [{"type": "message", "role": "user", "content": "Hi"}]
    assert (user.parent_id, user.role, user.status) == (system.id, "user", "complete")
    attempt = graph.start_attempt(meta={"model": "gpt-4.1"})
    assert (attempt.parent_id, attempt.status) == (user.id, "queued")
    assert attempt.attempt_id and attempt.attempt_id.startswith("att_")
    assert attempt.request_id and attempt.request_id.startswith("req_")
    assert attempt.meta == {"model": "gpt-4.1"}
    graph.stream(attempt.id, "Hel")
    assert graph.get(attempt.id).status == "streaming"
    graph.stream(attempt.id, "lo!")
    done = graph.complete(attempt.id, meta={"response_id": "resp_1"})
    assert done.status == "complete" and done.text() == "Hello!"
    assert done.meta["response_id"] == "resp_1" and "finished_at" in done.meta
    assert ids(graph.active_path()) == [system.id, user.id, attempt.id]
    assert graph.active_leaf == attempt.id


def test_tool_calls_and_the_final_message_stay_in_one_attempt() -> None:
    graph = make_graph()
    graph.add_user("Weather?")
    attempt = graph.start_attempt()
    call = {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "sunny"}
    graph.add_items(attempt.id, [call, output])
    graph.stream(attempt.id, "It is ")
    graph.stream(attempt.id, "sunny.")
    graph.complete(attempt.id)
    items = graph.get(attempt.id).items
    assert [i["type"] for i in items] == ["function_call", "function_call_output", "message"]
    assert items[2] == {"type": "message", "role": "assistant", "content": "It is sunny."}


def test_complete_with_items_replaces_the_streamed_output() -> None:
    graph = make_graph()
    graph.add_user("Hi")
    attempt = graph.start_attempt()
    graph.stream(attempt.id, "partial")
    final = [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi!"}],
        }
    ]
    graph.complete(attempt.id, items=final)
    assert graph.get(attempt.id).items == final
    final[0]["content"] = "changed by the caller"
    assert graph.get(attempt.id).text() == "Hi!"


def test_streaming_into_list_content_extends_the_last_text_part() -> None:
    graph = make_graph()
    graph.add_user("Hi")
    attempt = graph.start_attempt()
    message = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "a"}],
    }
    graph.add_items(attempt.id, [message])
    graph.stream(attempt.id, "b")
    assert graph.get(attempt.id).items[0]["content"] == [{"type": "output_text", "text": "ab"}]


def test_default_ids_are_prefixed_uuid_hex() -> None:
    graph = ConversationGraph()
    assert graph.conversation_id.startswith("conv_")
    graph.add_user("Hi")
    attempt = graph.start_attempt()
    assert attempt.id.startswith("msg_") and len(attempt.id) == 36
    assert default_id_factory("req").startswith("req_")
    made = {default_id_factory("att") for _ in range(200)}
    assert len(made) == 200
    for made_id in made:
        value = uuid.UUID(made_id.removeprefix("att_"))
        assert (value.version, value.variant, value.hex) == (4, uuid.RFC_4122, made_id[4:])


# -- stop, retry, edit, switch -----------------------------------------------------------------


def test_stop_keeps_the_partial_output_as_cancelled() -> None:
    graph = make_graph()
    graph.add_user("Tell me a story")
    attempt = graph.start_attempt()
    graph.stream(attempt.id, "Once upon")
    stopped = graph.stop()
    assert stopped.id == attempt.id and stopped.status == "cancelled"
    assert stopped.text() == "Once upon"
    assert len(graph) == 2 and graph.active_leaf == attempt.id


def test_stop_a_queued_attempt_by_id() -> None:
    graph = make_graph()
    graph.add_user("Hi")
    attempt = graph.start_attempt()
    assert graph.stop(attempt.id).status == "cancelled"
    assert graph.get(attempt.id).items == []


def test_retry_adds_a_sibling_attempt_and_leaves_the_old_one_untouched() -> None:
    graph = make_graph()
    user, first = turn(graph, "Hi", "Hello")
    before = graph.get(first).to_dict()
    again = graph.retry()
    assert again.parent_id == user and again.status == "queued"
    assert again.attempt_id != graph.get(first).attempt_id
    assert again.request_id != graph.get(first).request_id
    assert graph.get(first).to_dict() == before
    assert ids(graph.siblings(again.id)) == [first, again.id]
    assert ids(graph.children(user)) == [first, again.id]
    assert ids(graph.active_path()) == [user, again.id]
    graph.stream(again.id, "Hey")
    graph.complete(again.id)
    assert sorted(graph.branches()) == sorted([first, again.id])


def test_retry_after_stop_and_after_failure() -> None:
    graph = make_graph()
    user = graph.add_user("Hi")
    first = graph.start_attempt()
    graph.stop()
    second = graph.retry(user.id)
    graph.fail(second.id, "HTTP 500")
    assert graph.get(second.id).meta["error"] == "HTTP 500"
    third = graph.retry()
    assert [n.status for n in graph.children(user.id)] == ["cancelled", "failed", "queued"]
    assert ids(graph.siblings(first.id)) == [first.id, second.id, third.id]


def test_edit_branches_and_invalidates_everything_under_the_old_version() -> None:
    graph = make_graph()
    system = graph.add_system("Be brief.")
    u1, a1 = turn(graph, "Paris?", "Sunny")
    u2, a2 = turn(graph, "Tomorrow?", "Rain")
    u3, a3 = turn(graph, "Sure?", "Yes")
    count = len(graph)
    new = graph.edit(u2, "Rome?")
    assert new.parent_id == a1 and new.meta == {"edit_of": u2}
    assert graph.get(u2).status == "complete"
    for node_id, before in [(a2, "complete"), (u3, "complete"), (a3, "complete")]:
        node = graph.get(node_id)
        assert node.status == "invalid"
        assert node.meta["status_before_invalid"] == before
        assert node.meta["invalidated_by"] == new.id
    assert len(graph) == count + 1
    assert ids(graph.active_path()) == [system.id, u1, a1, new.id]
    assert all(n.status not in ("invalid", "cancelled") for n in graph.active_path())
    assert ids(graph.siblings(new.id)) == [u2, new.id]
    attempt = graph.start_attempt()
    assert ids(graph.active_path())[-2:] == [new.id, attempt.id]


def test_edit_invalidates_retries_and_in_flight_attempts_too() -> None:
    graph = make_graph()
    user, first = turn(graph, "Hi", "Hello")
    second = graph.retry()
    graph.stream(second.id, "Hel")
    new = graph.edit(user, "Hey")
    assert graph.get(first).status == graph.get(second.id).status == "invalid"
    assert graph.get(second.id).meta["status_before_invalid"] == "streaming"
    assert new.parent_id is None and ids(graph.active_path()) == [new.id]
    with pytest.raises(InvalidTransitionError):
        graph.stream(second.id, "lo")


def test_editing_twice_keeps_the_first_invalidation_record() -> None:
    graph = make_graph()
    user, reply = turn(graph, "Hi", "Hello")
    first_edit = graph.edit(user, "Hey")
    graph.edit(user, "Hello there")
    assert graph.get(reply).meta["invalidated_by"] == first_edit.id
    assert len(graph.siblings(user)) == 3


def test_switch_moves_only_the_pointer() -> None:
    graph = make_graph()
    user, first = turn(graph, "Hi", "Hello")
    second = graph.retry()
    graph.complete(second.id)
    nodes_before = [n.to_dict() for n in graph.nodes()]
    assert graph.switch(first).id == first
    assert graph.active_leaf == first and ids(graph.active_path()) == [user, first]
    assert [n.to_dict() for n in graph.nodes()] == nodes_before
    graph.switch(user)
    assert ids(graph.active_path()) == [user]
    graph.switch(second.id)
    assert ids(graph.active_path()) == [user, second.id]


def test_switch_back_to_an_edited_branch_and_continue_from_a_valid_node() -> None:
    graph = make_graph()
    u1, a1 = turn(graph, "Paris?", "Sunny")
    u2, a2 = turn(graph, "Tomorrow?", "Rain")
    graph.edit(u2, "Rome?")
    graph.switch(a2)
    assert ids(graph.active_path()) == [u1, a1, u2, a2]
    retried = graph.retry(u2)  # the old version itself is still valid
    assert retried.parent_id == u2


def test_an_edited_away_version_continues_once_switched_back_to_and_keeps_its_marks() -> None:
    graph = make_graph()
    u1, a1 = turn(graph, "Paris?", "Sunny")
    u2, a2 = turn(graph, "Tomorrow?", "Rain")
    edit = graph.edit(u1, "Rome?")
    with pytest.raises(InvalidTransitionError, match="switch to it first"):
        graph.add_user("More?", parent_id=a2)  # off the active branch: not continued
    with pytest.raises(InvalidTransitionError, match="switch to it first"):
        graph.retry(u2)
    graph.switch(a2)
    more = graph.add_user("More?")
    assert more.parent_id == a2 and more.status == "complete"
    assert [graph.get(n).status for n in (a1, u2, a2)] == ["invalid"] * 3
    assert graph.get(a2).meta["invalidated_by"] == edit.id
    # Retry and edit work on that branch too; an edit there marks only what it replaces.
    again = graph.retry(u2)
    assert again.parent_id == u2
    graph.stop(again.id)
    graph.switch(more.id)
    redo = graph.edit(u2, "The day after?")
    assert graph.get(a2).meta["invalidated_by"] == edit.id  # the first mark stays
    assert graph.get(more.id).meta["invalidated_by"] == redo.id


def test_an_attempt_edited_away_while_it_ran_is_not_continued() -> None:
    graph = make_graph()
    user = graph.add_user("Paris?")
    running = graph.start_attempt()
    graph.edit(user.id, "Rome?")
    graph.switch(running.id)
    with pytest.raises(InvalidTransitionError, match="while it was queued"):
        graph.add_user("More?")


def test_branches_and_path_to() -> None:
    graph = make_graph()
    u1, a1 = turn(graph, "Paris?", "Sunny")
    a1b = graph.retry()
    u2 = graph.add_user("Tomorrow?", parent_id=a1)
    assert graph.branches() == [a1b.id, u2.id]
    assert ids(graph.path_to(u2.id)) == [u1, a1, u2.id]
    assert ids(graph.active_path()) == [u1, a1, u2.id]


def test_reading_helpers() -> None:
    graph = make_graph()
    user, reply = turn(graph, "Hi", "Hello")
    assert user in graph and "missing" not in graph and len(graph) == 2
    assert ids(graph.nodes()) == [user, reply]
    assert ids(graph.children(user)) == [reply] and graph.children(reply) == []
    assert ids(graph.siblings(user)) == [user]
    path = graph.active_path()
    path.clear()
    assert len(graph.active_path()) == 2


def test_take_changes_reports_each_changed_node_once() -> None:
    graph = make_graph()
    user, reply = turn(graph, "Hi", "Hello")
    assert ids(graph.take_changes()) == [user, reply]
    assert graph.take_changes() == []
    new = graph.edit(user, "Hey")
    assert ids(graph.take_changes()) == [reply, new.id]
    graph.switch(user)
    assert graph.take_changes() == []


def test_revision_grows_on_every_change_only() -> None:
    graph = make_graph()
    user, _ = turn(graph, "Hi", "Hello")
    revision = graph.revision
    graph.active_path()
    graph.get(user)
    assert graph.revision == revision
    graph.switch(user)
    assert graph.revision > revision


# -- invalid actions leave the graph unchanged -------------------------------------------------


def scenario() -> tuple[ConversationGraph, dict[str, str]]:
    """Every kind of node: system, complete, cancelled, failed, invalid, streaming."""
    graph = make_graph()
    named = {"system": graph.add_system("Be brief.").id}
    named["user"], named["done"] = turn(graph, "Paris?", "Sunny")
    named["cancelled"] = graph.retry().id
    graph.stop()
    named["failed"] = graph.retry().id
    graph.fail(named["failed"], "boom")
    named["old_user"], named["old_reply"] = turn(graph, "Tomorrow?", "Rain")
    named["invalid_user"], _ = turn(graph, "Sure?", "Yes")
    named["new_user"] = graph.edit(named["old_user"], "Rome?").id
    named["streaming"] = graph.start_attempt().id
    graph.stream(named["streaming"], "Clou")
    return graph, named


Action = Callable[[ConversationGraph, dict[str, str]], object]

INVALID_ACTIONS: dict[str, tuple[type[GraphError], Action]] = {
    "retry on a system node": (InvalidTargetError, lambda g, n: g.retry(n["system"])),
    "retry on an assistant node": (InvalidTargetError, lambda g, n: g.retry(n["done"])),
    "retry on an invalid user": (InvalidTransitionError, lambda g, n: g.retry(n["invalid_user"])),
    "edit an assistant message": (InvalidTargetError, lambda g, n: g.edit(n["done"], "x")),
    "edit a system message": (InvalidTargetError, lambda g, n: g.edit(n["system"], "x")),
    "edit an invalid user": (InvalidTransitionError, lambda g, n: g.edit(n["invalid_user"], "x")),
    "edit with no items": (GraphError, lambda g, n: g.edit(n["user"], [])),
    "edit with non-dict items": (GraphError, lambda g, n: g.edit(n["user"], ["x"])),  # type: ignore[list-item]
    "complete a cancelled attempt": (
        InvalidTransitionError,
        lambda g, n: g.complete(n["cancelled"]),
    ),
    "complete a complete attempt": (InvalidTransitionError, lambda g, n: g.complete(n["done"])),
    "complete an invalid attempt": (
        InvalidTransitionError,
        lambda g, n: g.complete(n["old_reply"]),
    ),
    "complete a user message": (InvalidTargetError, lambda g, n: g.complete(n["user"])),
    "complete with a string": (GraphError, lambda g, n: g.complete(n["streaming"], items="x")),  # type: ignore[arg-type]
    "stream into a cancelled attempt": (
        InvalidTransitionError,
        lambda g, n: g.stream(n["cancelled"], "x"),
    ),
    "stream into a complete attempt": (
        InvalidTransitionError,
        lambda g, n: g.stream(n["done"], "x"),
    ),
    "stream into a user message": (InvalidTargetError, lambda g, n: g.stream(n["user"], "x")),
    "add items to a failed attempt": (
        InvalidTransitionError,
        lambda g, n: g.add_items(n["failed"], [{}]),
    ),
    "fail a complete attempt": (InvalidTransitionError, lambda g, n: g.fail(n["done"], "x")),
    "stop a finished attempt": (InvalidTransitionError, lambda g, n: g.stop(n["done"])),
    "stop a cancelled attempt": (InvalidTransitionError, lambda g, n: g.stop(n["cancelled"])),
    "stop a user message": (InvalidTargetError, lambda g, n: g.stop(n["user"])),
    "start an attempt under an assistant": (
        InvalidTargetError,
        lambda g, n: g.start_attempt(n["done"]),
    ),
    "start an attempt under a system node": (
        InvalidTargetError,
        lambda g, n: g.start_attempt(n["system"]),
    ),
    "start an attempt at an assistant leaf": (InvalidTargetError, lambda g, n: g.start_attempt()),
    "start an attempt under an invalid user": (
        InvalidTransitionError,
        lambda g, n: g.start_attempt(n["invalid_user"]),
    ),
    "add a user under a user": (
        InvalidTargetError,
        lambda g, n: g.add_user("x", parent_id=n["user"]),
    ),
    "add a user under an in-flight attempt": (InvalidTransitionError, lambda g, n: g.add_user("x")),
    "add a user under an invalid node": (
        InvalidTransitionError,
        lambda g, n: g.add_user("x", parent_id=n["old_reply"]),
    ),
    "add a system message after a user": (InvalidTargetError, lambda g, n: g.add_system("x")),
    "unknown id in get": (NodeNotFoundError, lambda g, n: g.get("missing")),
    "unknown id in switch": (NodeNotFoundError, lambda g, n: g.switch("missing")),
    "unknown id in retry": (NodeNotFoundError, lambda g, n: g.retry("missing")),
    "unknown id in edit": (NodeNotFoundError, lambda g, n: g.edit("missing", "x")),
    "unknown id in stop": (NodeNotFoundError, lambda g, n: g.stop("missing")),
    "unknown id in stream": (NodeNotFoundError, lambda g, n: g.stream("missing", "x")),
    "unknown id in complete": (NodeNotFoundError, lambda g, n: g.complete("missing")),
    "unknown id in start_attempt": (NodeNotFoundError, lambda g, n: g.start_attempt("missing")),
    "unknown parent in add_user": (
        NodeNotFoundError,
        lambda g, n: g.add_user("x", parent_id="missing"),
    ),
    "unknown id in children": (NodeNotFoundError, lambda g, n: g.children("missing")),
    "unknown id in siblings": (NodeNotFoundError, lambda g, n: g.siblings("missing")),
    "unknown id in path_to": (NodeNotFoundError, lambda g, n: g.path_to("missing")),
}


@pytest.mark.parametrize("name", list(INVALID_ACTIONS))
def test_an_invalid_action_raises_and_changes_nothing(name: str) -> None:
    error, action = INVALID_ACTIONS[name]
    graph, named = scenario()
    graph.take_changes()
    before, revision, path = graph.to_dict(), graph.revision, ids(graph.active_path())
    with pytest.raises(error):
        action(graph, named)
    assert graph.to_dict() == before
    assert (graph.revision, ids(graph.active_path())) == (revision, path)
    assert graph.take_changes() == []


def test_invalid_actions_on_an_empty_graph() -> None:
    graph = make_graph()
    for action in (graph.stop, graph.retry, graph.start_attempt):
        with pytest.raises(InvalidTargetError):
            action()
    assert graph.to_dict()["nodes"] == [] and graph.active_leaf is None


def test_a_reused_id_from_the_factory_is_refused_before_any_change() -> None:
    graph = ConversationGraph("c", id_factory=lambda prefix: f"{prefix}_same")
    graph.add_user("Hi")
    before = graph.to_dict()
    with pytest.raises(GraphError, match="already in use"):
        graph.start_attempt()
    assert graph.to_dict() == before


def test_node_not_found_is_a_key_error_with_a_readable_message() -> None:
    with pytest.raises(KeyError) as caught:
        make_graph().get("missing")
    assert str(caught.value) == "no node 'missing' in conversation 'conv_test'"


# -- what the graph keeps ----------------------------------------------------------------------


def test_items_and_meta_handed_in_are_copied_once_and_never_aliased() -> None:
    graph = make_graph()
    graph.add_user("q")
    attempt = graph.start_attempt(meta={"model": {"name": "m"}})
    parts = [{"type": "output_text", "text": "a", "annotations": []}]
    items = [{"type": "message", "role": "assistant", "content": parts}]
    usage = {"input_tokens": 3}
    node = graph.complete(attempt.id, items=items, meta={"usage": usage})
    parts[0]["text"] = "changed"
    parts[0]["annotations"].append("x")
    items.append({"type": "message", "role": "assistant", "content": "more"})
    usage["input_tokens"] = 99
    assert node.items == [
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "a", "annotations": []}]}
    ]  # fmt: skip
    assert node.meta["usage"] == {"input_tokens": 3}
    assert node.meta["model"] == {"name": "m"}
    copied = node.to_dict()
    copied["items"][0]["content"][0]["text"] = "edited copy"
    copied["meta"]["usage"]["input_tokens"] = 7
    assert node.items[0]["content"][0]["text"] == "a"
    assert node.meta["usage"] == {"input_tokens": 3}


def test_items_as_other_mappings_become_dicts() -> None:
    from types import MappingProxyType

    graph = make_graph()
    graph.add_user([MappingProxyType({"role": "user", "content": "ab"})])
    (item,) = graph.get(str(graph.active_leaf)).items
    assert type(item) is dict and item == {"role": "user", "content": "ab"}


def test_path_to_is_the_same_on_and_off_the_active_path() -> None:
    graph = make_graph()
    graph.add_system("s")
    first, _ = turn(graph, "q1", "a1")
    second, _ = turn(graph, "q2", "a2")
    other = graph.retry(first)
    graph.switch(second)
    path = graph.path_to(second)
    assert ids(path) == ids(graph.active_path()) and path[-1].id == second
    path.clear()  # a new list: the graph's own path is untouched
    assert ids(graph.path_to(second))[-1] == second
    assert ids(graph.path_to(other.id)) == [*ids(graph.active_path()[:2]), other.id]


def test_many_children_and_single_children_read_alike() -> None:
    graph = make_graph()
    user, first = turn(graph, "q", "a")
    retries = [graph.retry(user).id for _ in range(3)]
    assert ids(graph.children(user)) == [first, *retries]
    assert ids(graph.siblings(first)) == [first, *retries]
    assert ids(graph.children(first)) == []
    assert set(graph.branches()) == {first, *retries}


# -- serialization -----------------------------------------------------------------------------


def test_to_dict_round_trips_through_json() -> None:
    graph, named = scenario()
    data = json.loads(json.dumps(graph.to_dict()))
    assert data["version"] == GRAPH_VERSION == 1
    again = ConversationGraph.from_dict(data)
    assert again.to_dict() == graph.to_dict()
    assert ids(again.active_path()) == ids(graph.active_path())
    assert ids(again.siblings(named["user"])) == ids(graph.siblings(named["user"]))
    again.stop()
    assert graph.get(named["streaming"]).status == "streaming"


STORED_V1 = {
    "version": 1,
    "conversation_id": "conv_old",
    "active_leaf": "msg_3",
    "nodes": [
        {"id": "msg_1", "parent_id": None, "role": "user", "status": "complete",
         "items": [{"type": "message", "role": "user", "content": "hi"}], "attempt_id": None,
         "request_id": None, "created_at": 1.0, "meta": {}},
        {"id": "msg_2", "parent_id": "msg_1", "role": "assistant", "status": "complete",
         "items": [{"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "hello"}]}],
         "attempt_id": "att_1", "request_id": "req_1", "created_at": 2.0,
         "meta": {"response_id": "resp_1", "finished_at": 3.0}},
        {"id": "msg_3", "parent_id": "msg_2", "role": "user", "status": "complete",
         "items": [{"type": "message", "role": "user", "content": "again"}],
         "attempt_id": None, "request_id": None, "created_at": 4.0, "meta": {}},
    ],
}  # fmt: skip
"""A graph as version 1 of the format wrote it: what stores hold must keep loading."""


def test_a_stored_version_1_graph_loads_and_writes_back_the_same() -> None:
    graph = ConversationGraph.from_dict(json.loads(json.dumps(STORED_V1)))
    assert graph.to_dict() == STORED_V1
    assert ids(graph.active_path()) == ["msg_1", "msg_2", "msg_3"]
    assert graph.get("msg_2").text() == "hello"


def test_from_nodes_accepts_children_before_parents() -> None:
    graph, _ = scenario()
    nodes = list(reversed([n for n in ConversationGraph.from_dict(graph.to_dict()).nodes()]))
    again = ConversationGraph.from_nodes(
        nodes, conversation_id="conv_test", active_leaf=graph.active_leaf
    )
    assert ids(again.active_path()) == ids(graph.active_path())


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(version=2),
        lambda d: d.pop("version"),
        lambda d: d.update(nodes="nope"),
        lambda d: d["nodes"].append(dict(d["nodes"][0])),
        lambda d: d["nodes"][1].update(parent_id="missing"),
        lambda d: d["nodes"][0].update(parent_id=d["nodes"][1]["id"]),
        lambda d: d["nodes"][0].update(status="done"),
        lambda d: d["nodes"][0].update(role="tool"),
        lambda d: d["nodes"][0].pop("id"),
        lambda d: d.update(active_leaf="missing"),
    ],
    ids=[
        "future",
        "no-version",
        "bad-nodes",
        "duplicate",
        "dangling",
        "cycle",
        "status",
        "role",
        "no-id",
        "leaf",
    ],
)
def test_from_dict_refuses_what_it_cannot_trust(change: Callable[[dict[str, Any]], object]) -> None:
    data = scenario()[0].to_dict()
    change(data)
    with pytest.raises(GraphError):
        ConversationGraph.from_dict(data)


def test_from_dict_refuses_a_non_mapping() -> None:
    with pytest.raises(GraphError, match="version"):
        ConversationGraph.from_dict([])  # type: ignore[arg-type]


# -- the active path is cached -----------------------------------------------------------------


def test_appending_and_forking_never_walk_the_whole_path(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = make_graph()
    graph.add_system("Be brief.")
    for i in range(2_500):
        turn(graph, f"q{i}", f"a{i}")
    walks: list[str] = []
    real = graph.path_to

    def counting_path_to(node_id: str) -> list[Node]:
        walks.append(node_id)
        return real(node_id)

    monkeypatch.setattr(graph, "path_to", counting_path_to)
    user, _ = turn(graph, "one more", "answer")
    other = graph.retry()
    graph.stop()
    graph.edit(user, "edited")
    for _ in range(1_000):
        path = graph.active_path()
    assert walks == []
    assert len(path) == 5_002 and ids(path) == ids(real(path[-1].id))
    graph.switch(graph.nodes()[4].id)  # an ancestor: the path is only cut
    graph.switch(other.id)  # off the active path since the edit: one walk
    for _ in range(1_000):
        graph.active_path()
    assert walks == [other.id]


# -- property test -----------------------------------------------------------------------------

ACTIONS = [
    "add_user",
    "add_user_at",
    "start",
    "stream",
    "items",
    "complete",
    "fail",
    "stop",
    "retry",
    "retry_at",
    "edit",
    "switch",
]


def apply(graph: ConversationGraph, action: str, target: str) -> None:
    if action == "add_user":
        graph.add_user("u")
    elif action == "add_user_at":
        graph.add_user("u", parent_id=target)
    elif action == "start":
        graph.start_attempt(target)
    elif action == "stream":
        graph.stream(target, "t")
    elif action == "items":
        graph.add_items(target, [{"type": "function_call", "call_id": "c", "name": "f"}])
    elif action == "complete":
        graph.complete(target)
    elif action == "fail":
        graph.fail(target, "boom")
    elif action == "stop":
        graph.stop()
    elif action == "retry":
        graph.retry()
    elif action == "retry_at":
        graph.retry(target)
    elif action == "edit":
        graph.edit(target, "e")
    else:
        graph.switch(target)


def check_invariants(graph: ConversationGraph) -> None:
    nodes = graph.nodes()
    assert len({n.id for n in nodes}) == len(nodes) == len(graph)
    attempts = [n.attempt_id for n in nodes if n.role == "assistant"]
    assert None not in attempts and len(set(attempts)) == len(attempts)
    assert all(n.parent_id is None or n.parent_id in graph for n in nodes)
    path = graph.active_path()
    if graph.active_leaf is None:
        assert path == []
        return
    assert path[0].parent_id is None and path[-1].id == graph.active_leaf
    assert all(child.parent_id == parent.id for parent, child in itertools.pairwise(path))
    assert ids(path) == ids(graph.path_to(graph.active_leaf))
    for node in nodes:  # invalidation covers whole subtrees
        if node.status == "invalid":
            assert all(c.status == "invalid" for c in graph.children(node.id))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 1_000)), max_size=40))
def test_random_action_sequences_keep_the_graph_sound(steps: list[tuple[str, int]]) -> None:
    graph = make_graph()
    graph.add_system("s")
    for action, pick in steps:
        nodes = graph.nodes()
        target = nodes[pick % len(nodes)].id if pick % 7 else "missing"
        before, count = graph.to_dict(), len(graph)
        try:
            apply(graph, action, target)
        except GraphError:
            assert graph.to_dict() == before
        else:
            assert len(graph) >= count
            if action == "edit":
                assert all(n.status != "invalid" for n in graph.active_path())
        check_invariants(graph)
        assert ConversationGraph.from_dict(graph.to_dict()).to_dict() == graph.to_dict()


# -- withdrawing what was never stored -----------------------------------------------------------


def test_withdrawing_a_refused_send_leaves_the_graph_as_it_was() -> None:
    graph = make_graph()
    graph.add_system("be brief")
    turn(graph, "hi", "hello")
    before, revision = graph.to_dict(), graph.revision
    graph.take_changes()
    user = graph.add_user("far too long")
    attempt = graph.start_attempt()
    assert graph.withdraw(attempt.id) is attempt
    assert graph.active_leaf == user.id
    graph.withdraw(user.id)
    assert graph.to_dict() == before
    assert graph.revision > revision  # a cache keyed by revision sees the change
    assert graph.take_changes() == []  # nothing of the withdrawn nodes is left to store
    assert user.id not in graph and graph.branches() == [before["active_leaf"]]


def test_withdrawing_an_edit_gives_the_old_version_back_its_statuses() -> None:
    graph = make_graph()
    turn(graph, "hi", "hello")
    second_user, second = turn(graph, "more", "sure")
    graph.add_user("and more")
    graph.start_attempt()
    graph.stop()
    before = graph.to_dict()
    new = graph.edit(second_user, "less")
    attempt = graph.start_attempt()
    assert graph.get(second).status == "invalid"
    graph.withdraw(attempt.id)
    graph.withdraw(new.id, active_leaf=before["active_leaf"])
    assert graph.to_dict() == before
    assert [n.status for n in graph.active_path()][-2:] == ["complete", "cancelled"]


def test_withdrawing_a_refused_retry_makes_the_old_leaf_active_again() -> None:
    graph = make_graph()
    user, answer = turn(graph, "hi", "hello")
    turn(graph, "more", "sure")
    before = graph.to_dict()
    retry = graph.retry(user)
    assert graph.active_leaf == retry.id
    graph.withdraw(retry.id, active_leaf=before["active_leaf"])
    assert graph.to_dict() == before
    assert graph.children(user) == [graph.get(answer)]


def test_only_an_unstarted_leaf_can_be_withdrawn_and_a_refusal_changes_nothing() -> None:
    graph = make_graph()
    system = graph.add_system("be brief")
    _, answer = turn(graph, "hi", "hello")
    queued = graph.add_user("next")
    attempt = graph.start_attempt()
    before = graph.to_dict()
    with pytest.raises(InvalidTargetError):
        graph.withdraw(system.id)
    with pytest.raises(InvalidTransitionError):
        graph.withdraw(answer)  # complete: it ran
    with pytest.raises(InvalidTargetError):
        graph.withdraw(queued.id)  # its attempt follows it
    with pytest.raises(InvalidTargetError):
        graph.withdraw(attempt.id, active_leaf=attempt.id)
    with pytest.raises(NodeNotFoundError):
        graph.withdraw("nope")
    assert graph.to_dict() == before
    graph.stream(attempt.id, "partial")
    with pytest.raises(InvalidTransitionError):
        graph.withdraw(attempt.id)  # streaming: something was sent


def test_withdrawing_the_only_node_empties_the_graph() -> None:
    graph = make_graph()
    user = graph.add_user("hi")
    graph.withdraw(user.id)
    assert (len(graph), graph.active_leaf, graph.active_path(), graph.branches()) == (
        0,
        None,
        [],
        [],
    )
    assert graph.add_user("again").parent_id is None


def test_a_context_index_follows_a_withdrawal() -> None:
    from agents_state_ext._context import ContextIndex, select_context
    from agents_state_ext.testing import FixedTokenCounter

    graph, index, counter = make_graph(), ContextIndex(), FixedTokenCounter()
    graph.add_system("be brief")
    users = [turn(graph, f"question {n}", f"answer {n}")[0] for n in range(4)]

    def build(budget: int) -> list[str]:
        got = select_context(graph, budget=budget, counter=counter, index=index)
        fresh = select_context(graph.active_path(), budget=budget, counter=counter)
        assert (ids(got.nodes), got.used) == (ids(fresh.nodes), fresh.used)
        return ids(got.nodes)

    for budget in (12, 1000):
        leaf = graph.active_leaf
        probe = graph.add_user("probe")
        build(budget)
        graph.withdraw(probe.id)
        new = graph.edit(users[1], "changed")
        build(budget)
        graph.withdraw(graph.start_attempt().id)
        graph.withdraw(new.id, active_leaf=leaf)
        user = graph.add_user("last")
        assert build(budget)[-1] == user.id
        graph.withdraw(graph.start_attempt().id)
        graph.withdraw(user.id)
