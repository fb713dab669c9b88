"""A ContextIndex kept across builds selects exactly what a fresh build selects.

The index follows a graph by its revision and its journal of status changes, so every kind of
change a chat makes is exercised here, in random order, and after each one the reused index is
compared with a build that starts from nothing: appends, stops, failures, retries, edits (with
the invalidation they cause), switches (onto invalidated branches too), pauses and resumes,
budget changes and counter changes, and builds from the graph mixed with builds from a path.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_state_ext._context import ContextIndex, ContextSelection, select_context
from agents_state_ext._graph import ConversationGraph
from agents_state_ext._nodes import Node
from agents_state_ext.errors import GraphError
from agents_state_ext.testing.tokens import FixedTokenCounter


def new_graph() -> ConversationGraph:
    ids = itertools.count(1)
    return ConversationGraph("c", id_factory=lambda p: f"{p}{next(ids)}", clock=lambda: 0.0)


class WordCounter:
    """Counts words: a count depends on the content, so a stale cached count would show."""

    def count(self, message_id: str, items: Sequence[Any]) -> int:
        return sum(len(str(item.get("content", "")).split()) + 1 for item in items)


def summary(selection: ContextSelection) -> tuple[Any, ...]:
    return (
        [n.id for n in selection.nodes],
        selection.items,
        selection.tokens,
        selection.used,
        selection.overflow,
        selection.turns,
        selection.required_ids,
    )


def target(graph: ConversationGraph) -> str | None:
    """The user message the next request answers: the leaf, or what the leaf attempt answers."""
    leaf = graph.active_leaf
    if leaf is None:
        return None
    node = graph.get(leaf)
    if node.role == "user":
        return node.id
    if node.role == "assistant" and node.parent_id is not None:
        parent = graph.get(node.parent_id)
        return parent.id if parent.role == "user" else None
    return None


def check(
    graph: ConversationGraph,
    index: ContextIndex,
    counter: Any,
    budget: int,
    *,
    as_path: bool = False,
    off_path: str | None = None,
) -> None:
    """The reused index and a fresh build agree, from the graph or from a path."""
    user = off_path or target(graph)
    if user is None:
        return
    fresh = select_context(graph.path_to(user), budget=budget, counter=counter)
    if as_path:
        reused = index.select(graph.path_to(user), budget=budget, counter=counter)
    else:
        user_id = None if user == graph.active_leaf else user
        reused = select_context(graph, budget=budget, counter=counter, index=index, user_id=user_id)
    assert summary(reused) == summary(fresh)
    # Again, with nothing changed: the warm build answers the same.
    again = select_context(
        graph,
        budget=budget,
        counter=counter,
        index=index,
        user_id=None if user == graph.active_leaf else user,
    )
    assert summary(again) == summary(fresh)


ACTIONS = [
    "turn",
    "turn",
    "turn",
    "tool_turn",
    "start",
    "stream",
    "complete",
    "stop",
    "fail",
    "pause",
    "resume",
    "retry",
    "edit",
    "switch",
    "user",
]


def act(graph: ConversationGraph, action: str, pick: int, n: int) -> None:
    nodes = graph.nodes()
    some = nodes[pick % len(nodes)] if nodes else None
    leaf = graph.get(graph.active_leaf) if graph.active_leaf else None
    words = " ".join(["w"] * (pick % 9 + 1))
    if action in ("turn", "tool_turn"):
        if leaf is None or leaf.role != "user":
            graph.add_user(f"q{n} {words}")
        attempt = graph.start_attempt()
        items: list[dict[str, Any]] = []
        if action == "tool_turn":
            items += [
                {"type": "function_call", "call_id": f"c{n}", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": f"c{n}", "output": words},
            ]
        items.append({"type": "message", "role": "assistant", "content": f"a{n} {words}"})
        graph.complete(attempt.id, items=items)
        graph.add_user(f"next{n} {words}")
    elif action == "start":
        graph.start_attempt()
    elif action == "stream":
        graph.stream(str(graph.active_leaf), f" {words}")
    elif action == "complete":
        graph.complete(str(graph.active_leaf))
    elif action == "stop":
        graph.stop()
    elif action == "fail":
        graph.fail(str(graph.active_leaf), "boom")
    elif action == "pause":
        graph.pause(str(graph.active_leaf))
    elif action == "resume":
        graph.resume(str(graph.active_leaf))
    elif action == "retry":
        graph.retry(some.id if some is not None and some.role == "user" else None)
    elif action == "edit":
        assert some is not None
        graph.edit(some.id, f"edited{n} {words}")
    elif action == "switch":
        assert some is not None
        graph.switch(some.id)
    else:
        graph.add_user(f"u{n} {words}")


@settings(max_examples=250, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(ACTIONS),
            st.integers(0, 10_000),
            st.sampled_from(["graph", "graph", "graph", "path", "off_path"]),
            st.integers(0, 120),
            st.booleans(),
        ),
        max_size=45,
    )
)
def test_a_reused_index_agrees_with_a_fresh_build_after_every_change(
    steps: list[tuple[str, int, str, int, bool]],
) -> None:
    graph = new_graph()
    graph.add_system("be brief")
    index = ContextIndex()
    counters: list[Any] = [WordCounter(), FixedTokenCounter(), FixedTokenCounter(3)]
    counter = counters[0]
    for n, (action, pick, mode, budget, new_counter) in enumerate(steps):
        with contextlib.suppress(GraphError):  # an action that does not apply changes nothing
            act(graph, action, pick, n)
        if new_counter and pick % 5 == 0:
            counter = counters[pick % len(counters)]
        if mode == "off_path":
            users = [node.id for node in graph.nodes() if node.role == "user"]
            if users:
                check(graph, index, counter, budget, off_path=users[pick % len(users)])
            continue
        check(graph, index, counter, budget, as_path=mode == "path")


@settings(max_examples=200, deadline=None)
@given(
    budget=st.integers(0, 90),
    history=st.integers(0, 30),
    steps=st.lists(
        st.tuples(
            st.sampled_from([*["turn"] * 8, "tool_turn", "stop", "retry", "edit", "switch"]),
            st.integers(0, 10_000),
            st.booleans(),
        ),
        max_size=40,
    ),
)
def test_builds_under_one_budget_agree_with_fresh_builds_turn_after_turn(
    budget: int, history: int, steps: list[tuple[str, int, bool]]
) -> None:
    """Mostly new turns under a steady budget: the case where a build reuses the last one's.

    Turns of varied sizes make the pick drop old turns and reach for cheaper older ones; now
    and then a stop, retry, edit or branch switch, or a build from a path, breaks the run.
    """
    graph = new_graph()
    graph.add_system("be brief")
    for n in range(history):
        act(graph, "turn", n * 7919, n)
    index = ContextIndex()
    counter = WordCounter()
    for n, (action, pick, as_path) in enumerate(steps, start=history):
        with contextlib.suppress(GraphError):
            act(graph, action, pick, n)
        check(graph, index, counter, budget, as_path=as_path and pick % 7 == 0)


class NumberCounter:
    """Counts a message as the numbers its items' contents start with: costs set by the test."""

    def count(self, message_id: str, items: Sequence[Any]) -> int:
        return sum(int(str(item.get("content", "0")).split()[0]) for item in items)


def test_a_new_turn_that_changes_several_older_picks_agrees_with_a_fresh_build() -> None:
    # Turns cost 2, 2, 2, 20, 10, 10 (oldest first) and the budget leaves 26 for history:
    # the build picks the two 10s, skips the 20, then takes the three 2s. A new turn of 12
    # leaves room for one 10 only, and then for two of the 2s: two older picks change at once.
    graph = new_graph()
    graph.add_system("0")
    turns = []
    for cost in (2, 2, 2, 20, 10, 10):
        user = graph.add_user("1")
        attempt = graph.start_attempt()
        graph.complete(attempt.id, items=[{"role": "assistant", "content": str(cost - 1)}])
        turns.append((user.id, attempt.id))
    graph.add_user("0")
    counter, index = NumberCounter(), ContextIndex()
    first = select_context(graph, budget=26, counter=counter, index=index)
    picked = [turns[t] for t in (0, 1, 2, 4, 5)]
    assert [n.id for n in first.nodes[1:-1]] == [i for pair in picked for i in pair]
    prompt = graph.active_leaf
    attempt = graph.start_attempt()
    graph.complete(attempt.id, items=[{"role": "assistant", "content": "12"}])
    graph.add_user("0")
    reused = select_context(graph, budget=26, counter=counter, index=index)
    fresh = select_context(graph.active_path(), budget=26, counter=counter)
    assert summary(reused) == summary(fresh)
    picked = [turns[1], turns[2], turns[5], (prompt, attempt.id)]
    assert [n.id for n in reused.nodes[1:-1]] == [i for pair in picked for i in pair]
    assert reused.used == 26


def long_graph(turns: int) -> ConversationGraph:
    graph = new_graph()
    graph.add_system("be brief")
    for i in range(turns):
        graph.add_user(f"q{i} " + "w " * (i % 7))
        attempt = graph.start_attempt()
        if i % 10 == 3:
            graph.stream(attempt.id, "partial")
            graph.stop(attempt.id)
            continue
        graph.complete(attempt.id, items=[{"role": "assistant", "content": f"a{i}"}])
    graph.add_user("now?")
    return graph


def test_old_turns_an_edit_invalidated_are_kept_after_switching_back_to_them() -> None:
    """Switching back continues the old version: its turns count as before the edit."""
    graph = long_graph(40)
    index, counter = ContextIndex(), WordCounter()
    old_leaf = graph.active_leaf
    assert old_leaf is not None
    before = select_context(graph, budget=10_000, counter=counter, index=index)
    early_user = before.nodes[3]  # a user message of an early turn
    graph.edit(early_user.id, "edited")
    graph.switch(old_leaf)  # back onto the branch the edit invalidated
    after = select_context(graph, budget=10_000, counter=counter, index=index)
    assert summary(after) == summary(
        select_context(graph.active_path(), budget=10_000, counter=counter)
    )
    assert [n.id for n in after.nodes] == [n.id for n in before.nodes]
    assert graph.get(early_user.id).status == "complete"
    assert after.nodes[4].status == "invalid"  # the edit's marks stay, as history


def test_many_changes_between_builds_are_still_seen() -> None:
    """More status changes than the graph's journal keeps: the index re-checks instead."""
    graph = long_graph(30)
    index, counter = ContextIndex(), WordCounter()
    leaf = str(graph.active_leaf)
    first = select_context(graph, budget=10_000, counter=counter, index=index)
    pending = next(n for n in graph.active_path() if n.status == "cancelled")
    user = str(pending.parent_id)
    for _ in range(2_500):  # each: a queued attempt, then cancelled and failed
        graph.stop(graph.retry(user).id)
        graph.fail(graph.retry(user).id, "boom")
    graph.edit(graph.active_path()[1].id, "edited")  # invalidates the whole old branch
    graph.switch(leaf)
    reused = select_context(graph, budget=10_000, counter=counter, index=index)
    fresh = select_context(graph.path_to(leaf), budget=10_000, counter=counter)
    assert summary(reused) == summary(fresh)
    assert reused.turns == first.turns  # back on the old version: it is continued
    assert graph.active_path()[2].status == "invalid"


def test_a_new_turn_is_indexed_without_recounting_the_history() -> None:
    graph = long_graph(200)
    counter = FixedTokenCounter(2)
    index = ContextIndex()
    select_context(graph, budget=50, counter=counter, index=index)
    counter.calls.clear()
    attempt = graph.start_attempt()
    graph.complete(attempt.id, items=[{"role": "assistant", "content": "answer"}])
    graph.add_user("and then?")
    select_context(graph, budget=50, counter=counter, index=index)
    # The new turn's answer and the new prompt, nothing else: the new turn's user message
    # was the last build's active prompt, and that count is reused.
    assert sorted(counter.calls) == sorted([attempt.id, graph.active_leaf])
    counter.calls.clear()
    select_context(graph, budget=60, counter=counter, index=index)
    assert counter.calls == []  # nothing changed: no count at all, even for a new budget


def test_the_user_message_an_attempt_answers() -> None:
    graph = long_graph(5)
    prompt = str(graph.active_leaf)
    attempt = graph.start_attempt()
    counter = WordCounter()
    by_id = select_context(graph, budget=100, counter=counter, user_id=prompt)
    assert by_id.nodes[-1].id == prompt
    assert summary(by_id) == summary(
        select_context(graph.path_to(prompt), budget=100, counter=counter)
    )
    with pytest.raises(GraphError, match="assistant message last"):
        select_context(graph, budget=100, counter=counter)
    with pytest.raises(GraphError, match="assistant message last"):
        select_context(graph, budget=100, counter=counter, user_id=attempt.id)


def test_user_id_is_for_graphs_only() -> None:
    path = [Node("u", None, "user", "complete", [{"role": "user", "content": "hi"}])]
    with pytest.raises(TypeError, match="user_id"):
        select_context(path, budget=10, counter=WordCounter(), user_id="u")
    with pytest.raises(GraphError, match="empty path"):
        select_context(new_graph(), budget=10, counter=WordCounter())


def test_an_attempt_finished_under_later_turns_joins_the_history() -> None:
    """A stored graph can hold an unfinished attempt with turns after it (a worker died)."""

    def node(node_id: str, parent: str | None, role: str, status: str) -> Node:
        items = [{"role": role, "content": f"text of {node_id}"}]
        return Node(node_id, parent, role, status, items)  # type: ignore[arg-type]

    nodes = [
        node("u1", None, "user", "complete"),
        node("a1", "u1", "assistant", "streaming"),
        node("u2", "a1", "user", "complete"),
        node("a2", "u2", "assistant", "complete"),
        node("u3", "a2", "user", "complete"),
    ]
    graph = ConversationGraph.from_nodes(nodes, active_leaf="u3")
    index, counter = ContextIndex(), WordCounter()
    first = select_context(graph, budget=1_000, counter=counter, index=index)
    assert [n.id for n in first.nodes] == ["u2", "a2", "u3"]
    graph.complete("a1", items=[{"role": "assistant", "content": "finished late"}])
    second = select_context(graph, budget=1_000, counter=counter, index=index)
    assert [n.id for n in second.nodes] == ["u1", "a1", "u2", "a2", "u3"]
    assert summary(second) == summary(
        select_context(graph.active_path(), budget=1_000, counter=counter)
    )
    graph.fail(graph.retry("u1").id, "boom")  # off the active path: changes nothing here
    graph.switch("u3")
    assert summary(select_context(graph, budget=1_000, counter=counter, index=index)) == summary(
        second
    )
