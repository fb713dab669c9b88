"""select_context: each rule of "Building the next request", for both shapes, plus properties."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_state_ext._context import ContextIndex, ContextSelection, select_context
from agents_state_ext._nodes import NODE_STATUSES, Node
from agents_state_ext._tokens import TokenCounter
from agents_state_ext.errors import ContextOverflowError, GraphError
from agents_state_ext.testing.tokens import FixedTokenCounter

Spec = tuple[str, str, str, int]  # id, role, status, tokens

_ids = itertools.count()


class DictCounter:
    """Charges each message the tokens ``costs`` names for its id; ids can be added later."""

    def __init__(self, costs: dict[str, int]) -> None:
        self.costs = costs

    def count(self, message_id: str, items: Sequence[Any]) -> int:
        return self.costs[message_id]


def build(specs: Sequence[Spec]) -> tuple[list[Node], FixedTokenCounter]:
    """A parent-linked path and a counter that charges each node the tokens its spec names."""
    path: list[Node] = []
    for node_id, role, status, _ in specs:
        items = [{"type": "message", "role": role, "content": f"text of {node_id}"}]
        parent = path[-1].id if path else None
        path.append(Node(node_id, parent, role, status, items))  # type: ignore[arg-type]
    return path, FixedTokenCounter({s[0]: s[3] for s in specs})


def ids(selection: ContextSelection) -> list[str]:
    return [node.id for node in selection.nodes]


def select(specs: Sequence[Spec], budget: int) -> ContextSelection:
    path, counter = build(specs)
    return select_context(path, budget=budget, counter=counter)


SYS = ("sys", "system", "complete", 10)
ACTIVE = ("now", "user", "complete", 5)


def test_system_and_active_user_are_always_sent() -> None:
    selection = select(
        [SYS, ("u1", "user", "complete", 50), ("a1", "assistant", "complete", 50), ACTIVE], 15
    )
    assert ids(selection) == ["sys", "now"]
    assert selection.required_ids == ("sys", "now")
    assert (selection.used, selection.overflow) == (15, False)


def test_history_goes_only_as_complete_pairs() -> None:
    specs = [
        SYS,
        ("u1", "user", "complete", 1),
        ("a1", "assistant", "complete", 1),
        ("u2", "user", "complete", 1),
        ("a2", "assistant", "cancelled", 1),
        ("u3", "user", "complete", 1),
        ("a3", "assistant", "failed", 1),
        ("u4", "user", "complete", 1),
        ("a4", "assistant", "queued", 1),
        ("u5", "user", "complete", 1),
        ("a5", "assistant", "streaming", 1),
        ("u6", "user", "invalid", 1),
        ("a6", "assistant", "invalid", 1),
        ("u7", "user", "complete", 1),
        ("a7", "assistant", "invalid", 1),
        ("u8", "user", "complete", 1),
        ("a8", "assistant", "complete", 1),
        ACTIVE,
    ]
    selection = select(specs, 1000)
    assert ids(selection) == ["sys", "u1", "a1", "u8", "a8", "now"]
    assert selection.turns == 2


@pytest.mark.parametrize(
    "history",
    [
        [("u1", "user", "complete", 1)],  # a lone user message
        [("a1", "assistant", "complete", 1)],  # a lone assistant message
        [("a1", "assistant", "complete", 1), ("u1", "user", "complete", 1)],  # wrong order
        [("u1", "user", "complete", 1), ("u2", "user", "complete", 1)],
    ],
)
def test_a_lone_message_never_goes(history: list[Spec]) -> None:
    assert ids(select([SYS, *history, ACTIVE], 1000)) == ["sys", "now"]


def test_user_pairs_only_with_the_message_right_after_it() -> None:
    specs = [
        ("u1", "user", "complete", 1),
        ("u2", "user", "complete", 1),
        ("a2", "assistant", "complete", 1),
        ("a3", "assistant", "complete", 1),
        ACTIVE,
    ]
    assert ids(select(specs, 1000)) == ["u2", "a2", "now"]


def test_a_tool_call_turn_is_never_split() -> None:
    tool_items: list[dict[str, Any]] = [
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "found"},
        {"type": "message", "role": "assistant", "content": "Here it is."},
    ]
    path = [
        Node("u1", None, "user", "complete", [{"role": "user", "content": "find it"}]),
        Node("a1", "u1", "assistant", "complete", tool_items),
        Node("now", "a1", "user", "complete", [{"role": "user", "content": "thanks"}]),
    ]
    counter = TokenCounter("gpt-4.1")
    whole = counter.count_items(path[0].items) + counter.count_items(tool_items)
    need = counter.count_items(path[2].items)
    fits = select_context(path, budget=need + whole, counter=counter)
    assert fits.items == [path[0].items[0], *tool_items, path[2].items[0]]
    assert fits.used == need + whole
    short = select_context(path, budget=need + whole - 1, counter=counter)
    assert short.items == path[2].items
    assert not any(item.get("type", "").startswith("function_call") for item in short.items)


def test_newest_first_skips_what_does_not_fit_and_keeps_looking() -> None:
    specs = [
        ("u1", "user", "complete", 5),
        ("a1", "assistant", "complete", 5),  # 10: fits after the skip
        ("u2", "user", "complete", 20),
        ("a2", "assistant", "complete", 20),  # 40: too big
        ("u3", "user", "complete", 10),
        ("a3", "assistant", "complete", 10),  # 20: newest, taken first
        ACTIVE,
    ]
    selection = select(specs, 5 + 20 + 10 + 3)
    assert ids(selection) == ["u1", "a1", "u3", "a3", "now"]
    assert selection.turns == 2
    # The newest pair is preferred over an older one of the same size.
    assert ids(select(specs, 5 + 20 + 4)) == ["u3", "a3", "now"]


def test_sent_in_time_order() -> None:
    turns = [(f"{r[0]}{i}", r, "complete", 1) for i in range(4) for r in ("user", "assistant")]
    expected = ["sys", "u0", "a0", "u1", "a1", "u2", "a2", "u3", "a3", "now"]
    assert ids(select([SYS, *turns, ACTIVE], 1000)) == expected


def test_system_messages_anywhere_are_required_and_sent_first() -> None:
    specs = [
        ("sys1", "system", "complete", 1),
        ("u1", "user", "complete", 1),
        ("a1", "assistant", "complete", 1),
        ("sys2", "system", "complete", 1),
        ACTIVE,
    ]
    selection = select(specs, 1000)
    assert ids(selection) == ["sys1", "sys2", "u1", "a1", "now"]
    assert selection.required_ids == ("sys1", "sys2", "now")


def test_used_is_the_exact_sum_of_what_was_picked() -> None:
    specs = [SYS, ("u1", "user", "complete", 7), ("a1", "assistant", "complete", 11), ACTIVE]
    selection = select(specs, 100)
    assert selection.used == 10 + 7 + 11 + 5 == sum(selection.tokens.values())
    assert selection.tokens == {"sys": 10, "u1": 7, "a1": 11, "now": 5}


def test_overflow_keeps_required_parts_and_refuses_to_send() -> None:
    specs = [SYS, ("u1", "user", "complete", 1), ("a1", "assistant", "complete", 1), ACTIVE]
    selection = select(specs, 14)
    assert ids(selection) == ["sys", "now"]
    assert (selection.used, selection.overflow, selection.budget) == (15, True, 14)
    with pytest.raises(ContextOverflowError, match=r"15 tokens.*budget of 14"):
        selection.ensure_sendable()
    exact = select(specs, 15)
    assert (exact.overflow, exact.ensure_sendable()) == (False, exact)


def test_path_must_end_with_the_active_user_message() -> None:
    path, counter = build([("u1", "user", "complete", 1), ("a1", "assistant", "complete", 1)])
    with pytest.raises(GraphError, match="assistant message last"):
        select_context(path, budget=100, counter=counter)
    with pytest.raises(GraphError, match="empty path"):
        select_context([], budget=100, counter=counter)


def test_the_active_prompt_goes_whatever_its_status() -> None:
    selection = select([("now", "user", "queued", 5)], 100)
    assert ids(selection) == ["now"]


# -- ContextIndex: reuse across builds ----------------------------------------------------------


def test_index_follows_appends_edits_and_status_changes() -> None:
    specs = [
        SYS,
        ("u1", "user", "complete", 3),
        ("a1", "assistant", "complete", 3),
        ("u2", "user", "complete", 3),
        ("a2", "assistant", "streaming", 3),
        ("u3", "user", "complete", 3),
    ]
    path, _ = build(specs)
    counter = DictCounter({s[0]: s[3] for s in specs})
    index = ContextIndex()
    assert ids(index.select(path, budget=100, counter=counter)) == ["sys", "u1", "a1", "u3"]
    path[4].status = "complete"  # a pending attempt finished in place
    assert ids(index.select(path, budget=100, counter=counter)) == [
        "sys",
        "u1",
        "a1",
        "u2",
        "a2",
        "u3",
    ]
    path[2].status = "invalid"  # a picked turn stopped being complete in place
    assert ids(index.select(path, budget=100, counter=counter)) == ["sys", "u2", "a2", "u3"]
    edited = Node("u3b", path[4].id, "user", "complete", [{"role": "user", "content": "edit"}])
    counter.costs["u3b"] = 4
    selection = index.select([*path[:5], edited], budget=100, counter=counter)
    assert ids(selection) == ["sys", "u2", "a2", "u3b"]
    index.reset()
    assert ids(index.select(path, budget=100, counter=counter)) == ["sys", "u2", "a2", "u3"]


def test_index_rebinds_to_a_new_counter() -> None:
    path, counter = build(
        [("u1", "user", "complete", 3), ("a1", "assistant", "complete", 3), ACTIVE]
    )
    index = ContextIndex()
    assert index.select(path, budget=11, counter=counter).turns == 1
    assert index.select(path, budget=11, counter=FixedTokenCounter(4)).turns == 0


# -- the plain-dict compatibility shape ---------------------------------------------------------


def msg(id_: str, role: str, tokens: int, status: str = "complete") -> dict[str, Any]:
    return {"id": id_, "role": role, "status": status, "tokens": tokens}


def test_plain_shape_example() -> None:
    request = {
        "system": [msg("s", "system", 10), msg("note", "user", 100)],
        "history": [
            msg("u1", "user", 5),
            msg("a1", "assistant", 5),
            msg("u2", "user", 30),
            msg("a2", "assistant", 30),
            msg("u3", "user", 5),
            msg("a3", "assistant", 5, status="cancelled"),
            msg("u4", "user", 10),
            msg("a4", "assistant", 10),
        ],
        "activeUser": msg("q", "user", 5),
        "budget": 50,
    }
    result = select_context(request)
    assert [m["id"] for m in result["selected"]] == ["s", "u1", "a1", "u4", "a4", "q"]
    assert (result["used"], result["overflow"]) == (45, False)
    assert result["selected"][0] is request["system"][0]  # type: ignore[index]


def test_plain_shape_overflow_keeps_required() -> None:
    request = {
        "system": [msg("s", "system", 40)],
        "history": [msg("u1", "user", 1), msg("a1", "assistant", 1)],
        "activeUser": msg("q", "user", 20),
        "budget": 50,
    }
    result = select_context(request)
    assert [m["id"] for m in result["selected"]] == ["s", "q"]
    assert (result["used"], result["overflow"]) == (60, True)


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        ({"budget": 5}, "activeUser"),
        ({"activeUser": msg("q", "user", 1), "budget": "5"}, "budget"),
        ({"activeUser": {"id": "q", "role": "user", "status": "complete"}, "budget": 5}, "tokens"),
        ({"activeUser": msg("q", "user", -1), "budget": 5}, "tokens"),
    ],
)
def test_plain_shape_rejects_bad_input(request_: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        select_context(request_)


def test_typed_shape_needs_budget_and_counter() -> None:
    path, _ = build([ACTIVE])
    with pytest.raises(TypeError):
        select_context(path)  # type: ignore[call-overload]


# -- properties against a brute-force reference -------------------------------------------------


def brute_force(required: int, history: Sequence[Spec], budget: int) -> tuple[list[int], int, bool]:
    """Indices of picked turns (by user position), used, overflow — straight from the spec."""
    turns = [
        i
        for i in range(len(history) - 1)
        if history[i][1:3] == ("user", "complete")
        and history[i + 1][1:3] == ("assistant", "complete")
    ]
    if required > budget:
        return [], required, True
    left, picked = budget - required, []
    for i in reversed(turns):
        cost = history[i][3] + history[i + 1][3]
        if cost <= left:
            picked.append(i)
            left -= cost
    return sorted(picked), budget - left, False


statuses = st.sampled_from(NODE_STATUSES) | st.just("complete")
history_specs = st.lists(
    st.tuples(st.sampled_from(["user", "assistant"]), statuses, st.integers(0, 60)), max_size=30
)


def check_properties(
    history: Sequence[Spec],
    required: int,
    budget: int,
    picked_ids: list[str],
    used: int,
    overflow: bool,
) -> None:
    positions = {spec[0]: i for i, spec in enumerate(history)}
    chosen = [positions[i] for i in picked_ids]
    assert chosen == sorted(chosen), "history sent in time order"
    users = chosen[::2]
    assert all(chosen[k + 1] == users[k // 2] + 1 for k in range(0, len(chosen), 2)), "whole pairs"
    for u in users:
        assert history[u][1:3] == ("user", "complete")
        assert history[u + 1][1:3] == ("assistant", "complete")
    picked_cost = sum(history[i][3] for i in chosen)
    assert used == required + picked_cost
    assert overflow == (required > budget)
    if overflow:
        assert chosen == []
    else:
        assert used <= budget
    # No unpicked turn would have fit in what was left when the newest-first walk reached it.
    expected, expected_used, _ = brute_force(required, history, budget)
    assert users == expected and used == expected_used
    if not overflow:
        for i in range(len(history) - 1):
            if i in users or history[i][1:3] != ("user", "complete"):
                continue
            if history[i + 1][1:3] != ("assistant", "complete"):
                continue
            newer = sum(history[u][3] + history[u + 1][3] for u in users if u > i)
            assert history[i][3] + history[i + 1][3] > budget - required - newer


@settings(max_examples=300, deadline=None)
@given(
    system=st.lists(st.integers(0, 30), max_size=2),
    raw=history_specs,
    active=st.integers(0, 30),
    budget=st.integers(0, 400),
)
def test_typed_shape_matches_brute_force(
    system: list[int], raw: list[tuple[str, str, int]], active: int, budget: int
) -> None:
    history = [(f"h{i}", role, status, cost) for i, (role, status, cost) in enumerate(raw)]
    specs = [*((f"s{i}", "system", "complete", c) for i, c in enumerate(system)), *history]
    path, counter = build([*specs, ("active", "user", "complete", active)])
    selection = select_context(path, budget=budget, counter=counter)
    required = sum(system) + active
    assert ids(selection)[: len(system)] == [f"s{i}" for i in range(len(system))]
    assert ids(selection)[-1] == "active"
    picked = ids(selection)[len(system) : -1]
    check_properties(history, required, budget, picked, selection.used, selection.overflow)
    assert selection.tokens == {n.id: counter.count(n.id, n.items) for n in selection.nodes}


@settings(max_examples=300, deadline=None)
@given(
    system=st.lists(st.tuples(st.sampled_from(["system", "user"]), st.integers(0, 30)), max_size=3),
    raw=history_specs,
    active=st.integers(0, 30),
    budget=st.integers(0, 400),
)
def test_plain_shape_matches_brute_force(
    system: list[tuple[str, int]], raw: list[tuple[str, str, int]], active: int, budget: int
) -> None:
    history = [(f"h{i}", role, status, cost) for i, (role, status, cost) in enumerate(raw)]
    request = {
        "system": [msg(f"s{i}", role, cost) for i, (role, cost) in enumerate(system)],
        "history": [msg(i, role, cost, status) for i, role, status, cost in history],
        "activeUser": msg("active", "user", active),
        "budget": budget,
    }
    result = select_context(request)
    required_msgs = [m for m in request["system"] if m["role"] == "system"]  # type: ignore[attr-defined]
    selected_ids = [m["id"] for m in result["selected"]]
    assert selected_ids[: len(required_msgs)] == [m["id"] for m in required_msgs]
    assert selected_ids[-1] == "active"
    required = sum(m["tokens"] for m in required_msgs) + active
    picked = selected_ids[len(required_msgs) : -1]
    check_properties(history, required, budget, picked, result["used"], result["overflow"])


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_reused_index_agrees_with_a_fresh_build(data: st.DataObject) -> None:
    """Appends, edits (branching from an earlier node) and in-place status changes."""
    costs: dict[str, int] = {}
    counter = DictCounter(costs)
    path: list[Node] = [Node("sys", None, "system", "complete", [])]
    costs["sys"] = 5
    index = ContextIndex()
    for step in range(data.draw(st.integers(1, 12))):
        action = data.draw(st.sampled_from(["append", "append", "edit", "status"]))
        if action == "edit" and len(path) > 2:
            path = path[: data.draw(st.integers(1, len(path) - 1))]
        elif action == "status" and len(path) > 1:
            at = data.draw(st.integers(1, len(path) - 1))
            path[at].status = data.draw(statuses)  # type: ignore[arg-type]
        for k in range(data.draw(st.integers(0, 4))):
            node_id = f"n{step}_{k}_{next(_ids)}"
            role = data.draw(st.sampled_from(["user", "assistant"]))
            path.append(Node(node_id, path[-1].id, role, data.draw(statuses)))  # type: ignore[arg-type]
            costs[node_id] = data.draw(st.integers(0, 40))
        active_id = f"active{step}_{next(_ids)}"
        costs[active_id] = data.draw(st.integers(0, 20))
        request = [*path, Node(active_id, path[-1].id, "user", "complete")]
        budget = data.draw(st.integers(0, 200))
        reused = index.select(request, budget=budget, counter=counter)
        fresh = select_context(request, budget=budget, counter=counter)
        assert ids(reused) == ids(fresh)
        assert (reused.used, reused.overflow, reused.turns) == (
            fresh.used,
            fresh.overflow,
            fresh.turns,
        )
        path = request[:-1] if data.draw(st.booleans()) else request
