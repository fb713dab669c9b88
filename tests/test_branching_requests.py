"""Stop / retry / edit / switch on a ConversationGraph, and what the next request then sends.

Each scenario drives the graph like a chat product would and then builds the next request
with ``select_context(graph.active_path(), ...)``, asserting node statuses, ids, siblings and
the exact texts the request would carry (spec: branching-and-context.md).
"""

from __future__ import annotations

import copy
import itertools
import pickle
import weakref
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_state_ext._context import ContextIndex, ContextSelection, select_context
from agents_state_ext._graph import ConversationGraph, InvalidTargetError
from agents_state_ext._nodes import Node, branch_status
from agents_state_ext._tokens import TokenCounter, item_texts
from agents_state_ext.errors import ContextOverflowError, InvalidTransitionError
from agents_state_ext.testing.tokens import FixedTokenCounter

FINISHED = ("complete", "cancelled", "failed")
IN_FLIGHT = ("queued", "streaming")


# -- helpers -----------------------------------------------------------------------------------


def make_graph() -> ConversationGraph:
    ids, ticks = itertools.count(1), itertools.count(1)
    return ConversationGraph(
        "conv_test",
        id_factory=lambda prefix: f"{prefix}_{next(ids)}",
        clock=lambda: float(next(ticks)),
    )


def answer(graph: ConversationGraph, text: str, user_id: str | None = None) -> Node:
    """Start an attempt (default: under the active leaf), stream ``text`` in two parts, complete."""
    attempt = graph.start_attempt(user_id)
    half = len(text) // 2
    graph.stream(attempt.id, text[:half])
    graph.stream(attempt.id, text[half:])
    return graph.complete(attempt.id)


def turn(graph: ConversationGraph, question: str, reply: str) -> tuple[Node, Node]:
    user = graph.add_user(question)
    return user, answer(graph, reply)


def item_text(item: dict[str, Any]) -> str:
    """The payload text of one item (message content, call arguments or tool output)."""
    if item.get("type") == "function_call":
        return str(item["arguments"])
    if item.get("type") == "function_call_output":
        return str(item["output"])
    return "".join(item_texts(item)[1][1:])  # a message: its texts after the role


def sent(selection: ContextSelection) -> list[str]:
    """The texts of the items the request would send, in send order."""
    return [item_text(item) for item in selection.items]


def ids(nodes: Sequence[Node]) -> list[str]:
    return [n.id for n in nodes]


_INDEXES: weakref.WeakKeyDictionary[ConversationGraph, tuple[ContextIndex, FixedTokenCounter]]
_INDEXES = weakref.WeakKeyDictionary()


def request(
    graph: ConversationGraph, budget: int = 10_000, counter: Any = None
) -> ContextSelection:
    """The next request from the active path, built with the graph's long-lived index.

    Every build is also checked against a fresh build, the spec's reference and the rules.
    The default counter charges a message its word count (role included).
    """
    index, words = _INDEXES.setdefault(graph, (ContextIndex(), FixedTokenCounter()))
    counter = words if counter is None else counter
    path = graph.active_path()
    selection = select_context(path, budget=budget, counter=counter, index=index)
    assert selection == select_context(path, budget=budget, counter=counter)
    assert (ids(selection.nodes), selection.used, selection.overflow) == reference(
        path, budget, counter
    )
    check_selection_rules(selection, path, counter)
    return selection


def check_selection_rules(selection: ContextSelection, path: Sequence[Node], counter: Any) -> None:
    """Invariants every request must satisfy, whatever happened to the graph."""
    nodes = selection.nodes
    assert nodes[-1] is path[-1], "the active prompt is always sent, last"
    systems = [n for n in path[:-1] if n.role == "system"]
    assert nodes[: len(systems)] == systems, "system instructions always sent, first"
    history = nodes[len(systems) : -1]
    assert len(history) % 2 == 0
    positions = {n.id: i for i, n in enumerate(path)}
    for user, reply in zip(history[::2], history[1::2], strict=True):
        # An edited-away version on the path (switched back to) counts as it was before.
        assert (user.role, branch_status(user)) == ("user", "complete")
        assert (reply.role, branch_status(reply)) == ("assistant", "complete")
        assert reply.parent_id == user.id and positions[reply.id] == positions[user.id] + 1
    assert [positions[n.id] for n in history] == sorted(positions[n.id] for n in history)
    assert selection.tokens == {n.id: counter.count(n.id, n.items) for n in nodes}
    assert selection.used == sum(selection.tokens.values())
    if not selection.overflow:
        assert selection.used <= selection.budget
    # Tool calls travel with their outputs: never an orphan call or output.
    calls = {i["call_id"] for i in selection.items if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in selection.items if i.get("type") == "function_call_output"}
    assert calls == outputs


def reference(path: Sequence[Node], budget: int, counter: Any) -> tuple[list[str], int, bool]:
    """The next request straight from the spec: node ids, used, overflow."""
    required = [n for n in path[:-1] if n.role == "system"]
    active = path[-1]
    cost = {n.id: counter.count(n.id, n.items) for n in path}
    need = sum(cost[n.id] for n in required) + cost[active.id]
    if need > budget:
        return [*ids(required), active.id], need, True
    turns = [
        (u, a)
        for u, a in itertools.pairwise(path[:-1])
        if (u.role, branch_status(u), a.role, branch_status(a))
        == ("user", "complete", "assistant", "complete")
    ]
    left, picked = budget - need, []
    for u, a in reversed(turns):
        if cost[u.id] + cost[a.id] <= left:
            picked.append((u, a))
            left -= cost[u.id] + cost[a.id]
    history = [n.id for pair in reversed(picked) for n in pair]
    return [*ids(required), *history, active.id], budget - left, False


# -- (1) stop ----------------------------------------------------------------------------------


def test_stop_keeps_the_partial_answer_cancelled_and_never_sends_it() -> None:
    graph = make_graph()
    system = graph.add_system("Be brief.")
    u1, a1 = turn(graph, "What is 2+2?", "Four.")
    u2 = graph.add_user("Write a long poem about rivers")
    attempt = graph.start_attempt()
    assert attempt.status == "queued"
    graph.stream(attempt.id, "The river bends ")
    graph.stream(attempt.id, "and sings")
    assert graph.get(attempt.id).status == "streaming"

    stopped = graph.stop()  # the active leaf is the in-flight attempt
    assert stopped is attempt
    assert (stopped.status, stopped.text()) == ("cancelled", "The river bends and sings")
    assert (stopped.parent_id, graph.active_leaf) == (u2.id, attempt.id)
    assert "finished_at" in stopped.meta
    with pytest.raises(InvalidTransitionError):
        graph.stream(attempt.id, " more")
    with pytest.raises(InvalidTransitionError):
        graph.complete(attempt.id)
    assert stopped.text() == "The river bends and sings"  # nothing landed after the stop

    u3 = graph.add_user("Never mind. What is 3+3?")
    assert u3.parent_id == attempt.id
    selection = request(graph)
    assert ids(selection.nodes) == [system.id, u1.id, a1.id, u3.id]
    assert sent(selection) == ["Be brief.", "What is 2+2?", "Four.", "Never mind. What is 3+3?"]
    text = " ".join(sent(selection))
    assert "river" not in text, "the cancelled partial answer is never sent"
    assert "poem" not in text, "the stopped turn's prompt does not pair, so it is not sent"
    assert selection.turns == 1


def test_stop_before_any_output_and_a_failed_attempt_never_pair() -> None:
    graph = make_graph()
    u1, a1 = turn(graph, "hello", "hi there")
    u2 = graph.add_user("question two")
    queued = graph.start_attempt()
    assert graph.stop(queued.id).status == "cancelled"
    assert queued.items == []
    failing = graph.retry()
    graph.stream(failing.id, "half an answer")
    graph.fail(failing.id, "upstream 500")
    assert (failing.status, failing.meta["error"]) == ("failed", "upstream 500")
    assert failing.text() == "half an answer"
    assert ids(graph.siblings(queued.id)) == [queued.id, failing.id]

    u3 = graph.add_user("question three")
    assert u3.parent_id == failing.id
    selection = request(graph)
    assert ids(selection.nodes) == [u1.id, a1.id, u3.id]
    assert "half an answer" not in sent(selection)
    assert "question two" not in sent(selection)
    assert u2.status == "complete"  # the user message itself is fine, it just has no pair


# -- (2) retry ---------------------------------------------------------------------------------


def test_retry_adds_a_sibling_with_new_ids_and_leaves_the_old_attempt_untouched() -> None:
    graph = make_graph()
    graph.add_system("sys")
    u1, a1 = turn(graph, "Name a color", "Red.")
    old = graph.get(a1.id).to_dict()

    retry = graph.retry()  # active leaf is an assistant: retries its user message
    assert retry.parent_id == u1.id
    assert retry.status == "queued"
    assert retry.id != a1.id
    assert retry.attempt_id and retry.attempt_id != a1.attempt_id
    assert retry.request_id and retry.request_id != a1.request_id
    assert retry.items == []
    assert graph.active_leaf == retry.id
    assert ids(graph.siblings(a1.id)) == ids(graph.siblings(retry.id)) == [a1.id, retry.id]
    assert ids(graph.children(u1.id)) == [a1.id, retry.id]
    assert graph.get(a1.id).to_dict() == old, "the earlier attempt is untouched"

    graph.stream(retry.id, "Bl")
    assert graph.get(retry.id).status == "streaming"
    graph.stream(retry.id, "ue.")
    graph.complete(retry.id, meta={"response_id": "resp_2"})
    assert (retry.status, retry.text(), retry.meta["response_id"]) == (
        "complete",
        "Blue.",
        "resp_2",
    )
    assert graph.get(a1.id).to_dict() == old

    u2 = graph.add_user("Why that one?")
    selection = request(graph)
    assert ids(selection.nodes)[1:] == [u1.id, retry.id, u2.id]
    assert sent(selection) == ["sys", "Name a color", "Blue.", "Why that one?"]
    assert "Red." not in sent(selection)
    assert ids(graph.active_path()) == [graph.active_path()[0].id, u1.id, retry.id, u2.id]


def test_retry_of_a_stopped_attempt_then_the_retry_is_what_is_sent() -> None:
    graph = make_graph()
    u1 = graph.add_user("Summarise the report")
    first = graph.start_attempt(request_id="req_client_1")
    graph.stream(first.id, "The report says")
    graph.stop()
    second = graph.retry(u1.id)
    assert second.request_id != "req_client_1"
    assert None not in (first.attempt_id, second.attempt_id)
    assert first.attempt_id != second.attempt_id
    graph.complete(
        second.id, items=[{"type": "message", "role": "assistant", "content": "It is fine."}]
    )
    assert [n.status for n in graph.siblings(first.id)] == ["cancelled", "complete"]
    assert first.text() == "The report says"

    graph.add_user("Thanks")
    selection = request(graph)
    assert sent(selection) == ["Summarise the report", "It is fine.", "Thanks"]


def test_retry_while_the_first_attempt_is_still_streaming() -> None:
    graph = make_graph()
    u1 = graph.add_user("q")
    first = graph.start_attempt()
    graph.stream(first.id, "slow ")
    second = graph.retry()
    assert (first.status, second.status) == ("streaming", "queued")
    graph.stream(first.id, "still going")  # the earlier attempt is not touched by the retry
    graph.complete(second.id, items=[{"type": "message", "role": "assistant", "content": "fast"}])
    graph.stop(first.id)
    assert [n.status for n in graph.children(u1.id)] == ["cancelled", "complete"]
    assert graph.active_leaf == second.id
    graph.add_user("next")
    assert sent(request(graph)) == ["q", "fast", "next"]


def test_retry_needs_a_user_message() -> None:
    graph = make_graph()
    graph.add_system("sys")
    with pytest.raises(InvalidTargetError):
        graph.retry()


# -- (3) edit ----------------------------------------------------------------------------------


def test_edit_branches_invalidates_dependents_and_the_new_branch_never_sends_them() -> None:
    graph = make_graph()
    system = graph.add_system("You are helpful.")
    u1, a1 = turn(graph, "I live in Paris", "Nice city.")
    u2, a2 = turn(graph, "Recommend a museum", "The Louvre.")
    u3, a3 = turn(graph, "Opening hours?", "9 to 6.")
    u4 = graph.add_user("And on Sunday?")
    a4 = graph.start_attempt()
    graph.stream(a4.id, "On Sun")
    count = len(graph)
    statuses_before = {n.id: n.status for n in (a2, u3, a3, u4, a4)}

    new = graph.edit(u2.id, "Recommend a restaurant")
    assert new.id not in {n.id for n in (u1, a1, u2, a2, u3, a3, u4, a4)}
    assert (new.role, new.status, new.parent_id) == ("user", "complete", a1.id)
    assert new.meta["edit_of"] == u2.id
    assert ids(graph.siblings(u2.id)) == [u2.id, new.id]
    assert graph.active_leaf == new.id
    assert len(graph) == count + 1, "nothing deleted"
    assert u2.status == "complete", "the old version keeps its own status"
    assert u2.text() == "Recommend a museum"
    for node in (a2, u3, a3, u4, a4):
        assert graph.get(node.id) is node
        assert node.status == "invalid"
        assert node.meta["invalidated_by"] == new.id
        assert node.meta["status_before_invalid"] == statuses_before[node.id]
    assert a3.text() == "9 to 6.", "invalid content is retained"
    with pytest.raises(InvalidTransitionError):
        graph.stream(a4.id, "day")  # the in-flight attempt under the old version cannot land
    with pytest.raises(InvalidTransitionError):
        graph.add_user("more", parent_id=a3.id)

    selection = request(graph)
    assert ids(selection.nodes) == [system.id, u1.id, a1.id, new.id]
    assert sent(selection) == [
        "You are helpful.",
        "I live in Paris",
        "Nice city.",
        "Recommend a restaurant",
    ]

    a2b = answer(graph, "Le Comptoir.")
    u3b = graph.add_user("Do they take bookings?")
    selection = request(graph)
    assert ids(selection.nodes) == [system.id, u1.id, a1.id, new.id, a2b.id, u3b.id]
    text = " ".join(sent(selection))
    for invalid in ("museum", "Louvre", "Opening", "9 to 6", "Sunday", "On Sun"):
        assert invalid not in text
    assert all(n.status != "invalid" for n in selection.nodes)
    assert set(graph.branches()) == {a4.id, u3b.id}


def test_edit_of_the_first_message_and_editing_twice() -> None:
    graph = make_graph()
    u1, a1 = turn(graph, "v1", "reply to v1")
    u2 = graph.add_user("follow-up")
    v2 = graph.edit(u1.id, "v2")
    assert (v2.parent_id, a1.status, u2.status) == (None, "invalid", "invalid")
    v3 = graph.edit(u1.id, "v3")  # editing the original again: a third sibling
    assert ids(graph.siblings(u1.id)) == [u1.id, v2.id, v3.id]
    assert a1.meta["invalidated_by"] == v2.id, "an invalid node is not re-stamped"
    assert set(graph.branches()) == {u2.id, v2.id, v3.id}
    with pytest.raises(InvalidTransitionError):
        graph.edit(u2.id, "an invalid message cannot be edited")
    with pytest.raises(InvalidTargetError):
        graph.edit(a1.id, "only user messages can be edited")
    assert graph.active_leaf == v3.id
    assert sent(request(graph)) == ["v3"]


# -- (4) switch --------------------------------------------------------------------------------


def test_switch_between_retried_attempts_and_the_next_request_follows_the_branch() -> None:
    graph = make_graph()
    graph.add_system("sys")
    u1, a1 = turn(graph, "Pick a number", "Seven.")
    a1b = answer(graph, "Three.", u1.id)
    assert graph.active_leaf == a1b.id
    before = [n.to_dict() for n in graph.nodes()]

    assert graph.switch(a1.id) is a1
    assert graph.active_leaf == a1.id
    assert [n.to_dict() for n in graph.nodes()] == before, "switching changes only the pointer"
    u2 = graph.add_user("Double it")
    assert u2.parent_id == a1.id
    assert sent(request(graph)) == ["sys", "Pick a number", "Seven.", "Double it"]

    graph.switch(a1b.id)
    u2b = graph.add_user("Double it")
    assert u2b.parent_id == a1b.id
    assert sent(request(graph)) == ["sys", "Pick a number", "Three.", "Double it"]

    graph.switch(u2.id)  # back to the first branch's open prompt
    selection = request(graph)
    assert ids(selection.nodes)[1:] == [u1.id, a1.id, u2.id]
    assert "Three." not in sent(selection)
    assert graph.branches() == [u2.id, u2b.id]
    assert ids(graph.path_to(u2b.id))[1:] == [u1.id, a1b.id, u2b.id]


def test_switch_back_to_the_old_version_after_an_edit() -> None:
    graph = make_graph()
    u1, a1 = turn(graph, "Plan a trip to Rome", "Day one: Colosseum.")
    u2, a2 = turn(graph, "Make it cheaper", "Skip the tours.")
    edited = graph.edit(u2.id, "Make it longer")
    a2b = answer(graph, "Add a day in Ostia.")
    graph.add_user("Ok")
    assert "Make it cheaper" not in sent(request(graph))

    graph.switch(u2.id)  # the old version itself is still complete
    selection = request(graph)
    assert ids(selection.nodes) == [u1.id, a1.id, u2.id]
    assert sent(selection) == ["Plan a trip to Rome", "Day one: Colosseum.", "Make it cheaper"]
    assert a2.status == "invalid" and a2b.status == "complete"
    # A fresh attempt on the old version is allowed; its stale reply stays invalid.
    again = answer(graph, "Use the metro.")
    assert ids(graph.children(u2.id)) == [a2.id, again.id]
    graph.add_user("And food?")
    assert sent(request(graph)) == [
        "Plan a trip to Rome",
        "Day one: Colosseum.",
        "Make it cheaper",
        "Use the metro.",
        "And food?",
    ]
    graph.switch(edited.id)
    assert sent(request(graph)) == ["Plan a trip to Rome", "Day one: Colosseum.", "Make it longer"]


def test_switching_into_an_edited_away_branch_continues_it_with_its_turns() -> None:
    graph = make_graph()
    system = graph.add_system("sys")
    u1, a1 = turn(graph, "first question", "first answer")
    u2, a2 = turn(graph, "second question", "second answer")
    u3 = graph.add_user("third question")
    assert request(graph).turns == 2  # the index now holds both turns as complete
    edited = graph.edit(u1.id, "first question, edited")
    assert ids(request(graph).nodes) == [system.id, edited.id]  # none of the old version
    graph.switch(u3.id)  # straight back into the old branch, no request in between
    assert [n.status for n in (u1, a1, u2, a2, u3)] == ["complete", *["invalid"] * 4]
    # The person went back to that version: it is the branch continued, turns and all.
    selection = request(graph)
    assert ids(selection.nodes) == [system.id, u1.id, a1.id, u2.id, a2.id, u3.id]
    assert graph.start_attempt().parent_id == u3.id


# -- (5) tool-call turns -----------------------------------------------------------------------

TOOL_ITEMS = [
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"c": "Oslo"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "rain 7C"},
]


def tool_graph() -> tuple[ConversationGraph, Node, Node, Node, Node]:
    graph = make_graph()
    system = graph.add_system("Use tools.")
    user = graph.add_user("Weather in Oslo?")
    attempt = graph.start_attempt()
    graph.add_items(attempt.id, TOOL_ITEMS[:1])
    assert attempt.status == "streaming"
    graph.add_items(attempt.id, TOOL_ITEMS[1:])
    graph.stream(attempt.id, "Rainy, 7 degrees.")
    graph.complete(attempt.id)
    active = graph.add_user("Should I bring an umbrella?")
    return graph, system, user, attempt, active


def test_a_tool_call_turn_lives_in_one_assistant_node() -> None:
    graph, _, user, attempt, _ = tool_graph()
    assert [i["type"] for i in attempt.items] == [
        "function_call",
        "function_call_output",
        "message",
    ]
    assert graph.children(user.id) == [attempt]


# Ids by class name: the default repr of FixedTokenCounter holds a memory address, which differs
# between pytest-xdist's workers and so breaks their agreement on what was collected.
@pytest.mark.parametrize(
    "counter", [FixedTokenCounter(), TokenCounter("gpt-4.1")], ids=lambda c: type(c).__name__
)
def test_a_tool_call_turn_goes_whole_or_not_at_all(counter: Any) -> None:
    graph, system, user, attempt, active = tool_graph()
    need = counter.count(system.id, system.items) + counter.count(active.id, active.items)
    whole = counter.count(user.id, user.items) + counter.count(attempt.id, attempt.items)
    assert counter.count(attempt.id, attempt.items) == counter.count_items(attempt.items)

    fits = request(graph, need + whole, counter)
    assert ids(fits.nodes) == [system.id, user.id, attempt.id, active.id]
    assert fits.items == [*system.items, *user.items, *attempt.items, *active.items]
    assert sent(fits) == [
        "Use tools.",
        "Weather in Oslo?",
        '{"c": "Oslo"}',
        "rain 7C",
        "Rainy, 7 degrees.",
        "Should I bring an umbrella?",
    ]
    assert (fits.used, fits.overflow) == (need + whole, False)

    for budget in (need + whole - 1, need + 1, need):
        short = request(graph, budget, counter)
        assert ids(short.nodes) == [system.id, active.id]
        assert not any(i.get("type", "").startswith("function_call") for i in short.items)
        assert (short.used, short.overflow) == (need, False)


def test_a_stopped_tool_call_turn_is_never_sent_not_even_its_tool_items() -> None:
    graph = make_graph()
    user = graph.add_user("Book a table")
    attempt = graph.start_attempt()
    graph.add_items(attempt.id, [{**TOOL_ITEMS[0], "name": "book"}])  # call made, no output yet
    graph.stop()
    assert attempt.status == "cancelled"
    assert attempt.items[0]["type"] == "function_call", "partial output kept"
    retry = graph.retry(user.id)
    graph.add_items(retry.id, [{**item, "call_id": "call_2"} for item in TOOL_ITEMS])
    graph.complete(retry.id)  # a turn may end on a tool output
    graph.add_user("Thanks")
    selection = request(graph, 10_000, FixedTokenCounter())
    assert [i.get("call_id") for i in selection.items] == [None, "call_2", "call_2", None]
    assert all(i.get("name") != "book" for i in selection.items)


def test_complete_with_items_replaces_what_was_streamed() -> None:
    graph = make_graph()
    graph.add_user("look it up")
    attempt = graph.start_attempt()
    graph.stream(attempt.id, "Let me check")
    final = [*TOOL_ITEMS, {"type": "message", "role": "assistant", "content": "Rain."}]
    graph.complete(attempt.id, items=final)
    assert attempt.items == final and attempt.items is not final
    graph.add_user("ok")
    assert sent(request(graph)) == ["look it up", '{"c": "Oslo"}', "rain 7C", "Rain.", "ok"]


# -- (6) overflow ------------------------------------------------------------------------------


def test_a_huge_active_prompt_overflows_keeping_the_required_parts() -> None:
    graph = make_graph()
    system = graph.add_system("Answer in French.")
    turn(graph, "Bonjour", "Salut !")
    active = graph.add_user("word " * 500)
    counter = FixedTokenCounter()
    selection = request(graph, 100, counter)
    assert selection.overflow is True
    assert ids(selection.nodes) == [system.id, active.id]
    assert selection.required_ids == (system.id, active.id)
    assert selection.used == counter.count(system.id, system.items) + 501 > 100
    assert selection.turns == 0
    with pytest.raises(ContextOverflowError, match="over the budget of 100") as refused:
        selection.ensure_sendable()
    error = refused.value
    assert (error.required_tokens, error.message_tokens, error.budget) == (
        selection.used,
        501,
        100,
    )
    again = pickle.loads(pickle.dumps(error))  # e.g. across processes: the counts go along
    assert (str(again), again.required_tokens, again.message_tokens, again.budget) == (
        str(error),
        error.required_tokens,
        error.message_tokens,
        error.budget,
    )

    # Exactly at the budget is not an overflow.
    exact = request(graph, selection.used, counter)
    assert (exact.overflow, exact.used, exact.turns) == (False, selection.used, 0)
    assert exact.ensure_sendable() is exact

    # Editing the prompt down makes the next request sendable again, with history.
    shorter = graph.edit(active.id, "Merci")
    fixed = request(graph, 100, counter).ensure_sendable()
    assert ids(fixed.nodes)[-1] == shorter.id
    assert sent(fixed) == ["Answer in French.", "Bonjour", "Salut !", "Merci"]


def test_overflow_with_the_real_tokenizer() -> None:
    counter = TokenCounter("gpt-4.1")
    graph = make_graph()
    system = graph.add_system("Be precise.")
    turn(graph, "What is a graph?", "Nodes and edges.")
    active = graph.add_user("Explain everything about graphs. " * 200)
    need = counter.count_items(system.items) + counter.count_items(active.items)
    selection = request(graph, need - 1, counter)
    assert (selection.overflow, selection.used) == (True, need)
    assert selection.nodes == [system, active]
    with pytest.raises(ContextOverflowError) as refused:
        selection.ensure_sendable()
    message = counter.count_items(active.items)
    assert (refused.value.required_tokens, refused.value.message_tokens) == (need, message)
    assert request(graph, need, counter).ensure_sendable().nodes == [system, active]


# -- the whole story with the real tokenizer and one index ----------------------------------


def test_stop_retry_edit_switch_with_the_real_tokenizer_and_a_reused_index() -> None:
    counter = TokenCounter("gpt-4.1")
    graph = make_graph()
    system = graph.add_system("You are a travel agent.")
    u1, a1 = turn(graph, "I want to visit Japan in April.", "Cherry blossom season, great.")
    u2 = graph.add_user("Which cities?")
    partial = graph.start_attempt()
    graph.stream(partial.id, "Tokyo, Kyo")
    graph.stop()
    retried = answer(graph, "Tokyo, Kyoto and Osaka.", u2.id)
    u3 = graph.add_user("How many days each?")

    def check(expected: list[Node]) -> ContextSelection:
        selection = request(graph, 10_000, counter)  # one index for the whole conversation
        assert selection.nodes == expected
        assert selection.used == sum(counter.count_items(n.items) for n in expected)
        return selection

    selection = check([system, u1, a1, u2, retried, u3])
    assert "Tokyo, Kyo" not in sent(selection)

    edited = graph.edit(u2.id, "Which islands?")
    assert (partial.status, retried.status) == ("invalid", "invalid")
    selection = check([system, u1, a1, edited])
    assert "Osaka" not in " ".join(sent(selection))

    islands = answer(graph, "Okinawa, Hokkaido and Shikoku are all worth a week in spring.")
    u3b = graph.add_user("Flights?")
    check([system, u1, a1, edited, islands, u3b])

    graph.switch(u2.id)
    check([system, u1, a1, u2])

    # A tight budget: the newest turn does not fit, the older, smaller one still does.
    graph.switch(u3b.id)
    need = counter.count_items(system.items) + counter.count_items(u3b.items)
    first = counter.count_items(u1.items) + counter.count_items(a1.items)
    newest = counter.count_items(edited.items) + counter.count_items(islands.items)
    assert newest > first
    tight = request(graph, need + newest - 1, counter)
    assert tight.nodes == [system, u1, a1, u3b]
    assert tight.used == need + first

    # A graph reloaded from its serialized form sends the same next request.
    reloaded = ConversationGraph.from_dict(graph.to_dict())
    again = request(reloaded, need + newest - 1, counter)
    assert ids(again.nodes) == ids(tight.nodes) and sent(again) == sent(tight)
    assert again.used == tight.used
    assert [n.to_dict() for n in reloaded.siblings(u2.id)] == [
        n.to_dict() for n in graph.siblings(u2.id)
    ]


# -- (7) random action sequences: a reused index agrees with a fresh build and the spec --------

WORDS = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta"]), min_size=0, max_size=6)


def _act(graph: ConversationGraph, data: st.DataObject, step: int) -> str:
    """Apply one random applicable action, weighted towards moving the conversation on."""
    nodes = graph.nodes()
    leaf = graph.get(graph.active_leaf) if graph.active_leaf else None
    in_flight = [n for n in nodes if n.status in IN_FLIGHT]
    # An edited-away version goes on where the active branch runs through it (switched back).
    users = [
        n
        for n in nodes
        if n.role == "user" and (n.status != "invalid" or graph.position(n.id) is not None)
    ]
    options: list[str] = ["switch", "switch_user"] if nodes else []
    if all(n.role == "system" for n in nodes):
        options.append("system")
    if (
        leaf is None
        or leaf.role == "system"
        or (leaf.role == "assistant" and branch_status(leaf) in FINISHED)
    ):
        options += ["user", "user", "turn", "turn", "turn"]
    if leaf is not None and leaf.role == "user":
        options += ["attempt"] * 3
    if in_flight:
        options += ["stream", "tools", "complete", "complete", "complete", "fail", "stop"]
    if users:
        options += ["retry", "retry", "edit"]
    action = data.draw(st.sampled_from(options))
    text = " ".join(data.draw(WORDS)) or f"w{step}"
    if action == "system":
        graph.add_system(text)
    elif action == "user":
        graph.add_user(text)
    elif action == "turn":  # a whole exchange at once, so paths grow long enough to skip turns
        graph.add_user(text)
        answer(graph, " ".join(data.draw(WORDS)) or "ok")
    elif action == "attempt":
        graph.start_attempt()
    elif action in ("stream", "tools", "complete", "fail", "stop"):
        # Mostly the active attempt, sometimes one left behind on another branch.
        active = [n for n in in_flight if n.id == graph.active_leaf]
        node = data.draw(st.sampled_from(active or in_flight) | st.sampled_from(in_flight))
        if action == "stream":
            graph.stream(node.id, text)
        elif action == "tools":
            call = f"call_{step}"
            graph.add_items(node.id, [{**item, "call_id": call} for item in TOOL_ITEMS])
        elif action == "complete":
            if data.draw(st.booleans()):
                graph.stream(node.id, text)
            graph.complete(node.id)
        elif action == "fail":
            graph.fail(node.id, "boom")
        else:
            graph.stop(node.id)
    elif action == "retry":
        graph.retry(data.draw(st.sampled_from(users)).id)
    elif action == "edit":
        graph.edit(data.draw(st.sampled_from(users)).id, text)
    else:
        pool = [n for n in nodes if n.role == "user"] if action == "switch_user" else nodes
        graph.switch(data.draw(st.sampled_from(pool or nodes)).id)
    return action


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_random_actions_a_reused_index_matches_a_fresh_build_and_the_spec(
    data: st.DataObject,
) -> None:
    graph = make_graph()
    seen: dict[str, Node] = {}
    if data.draw(st.booleans()):
        graph.add_system(" ".join(data.draw(WORDS)) or "sys")
    for k in range(data.draw(st.integers(0, 8))):  # a history long enough for skips and jumps
        turn(graph, " ".join(data.draw(WORDS)) or f"q{k}", " ".join(data.draw(WORDS)) or "ok")
    for step in range(data.draw(st.integers(1, 40))):
        snapshot = {n.id: (n.status, copy.deepcopy(n.items)) for n in graph.nodes()}
        _act(graph, data, step)
        # Nothing is ever deleted, invalid is final, finished attempts keep their output.
        for node_id, (status, items) in snapshot.items():
            node = graph.get(node_id)
            if status == "invalid":
                assert node.status == "invalid"
            if status in FINISHED:
                assert node.items == items
                assert node.status in (status, "invalid")
        seen.update((n.id, n) for n in graph.nodes())
        assert len(graph) == len(seen)
        path = graph.active_path()
        assert path == graph.path_to(graph.active_leaf) if graph.active_leaf else path == []
        # Not every state is sent: the index must also cope with jumps over several actions.
        if not path or path[-1].role != "user" or data.draw(st.integers(0, 3)) == 0:
            continue
        # request() compares the graph's reused index with a fresh build and the reference.
        selection = request(graph, data.draw(st.integers(0, 80)))
        assert all(branch_status(node) == "complete" for node in selection.nodes[:-1])
