"""The conformance suite every ConversationStore must pass, whatever its backend.

Each check takes a factory returning a new, empty store, and closes what it opens. In pytest,
one test per check::

    from agents_state_ext.stores.conformance import CHECKS

    @pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
    def test_my_store(check):
        check(lambda: MyStore(...))

or all at once: ``run_conformance(factory)`` raises :class:`ConformanceError` naming every
failed check. Checks use no ``assert``, so they also run under ``python -O``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..attempts import AttemptRecord
from ..errors import ConcurrentUpdateError, ConversationNotFoundError, NodeNotFoundError, StoreError
from ..graph import ConversationGraph
from ..nodes import Node
from .base import AttemptNotFoundError, ConversationStore

__all__ = ["CHECKS", "ConformanceError", "StoreFactory", "run_conformance", "sample_graph"]

StoreFactory = Callable[[], ConversationStore]


class ConformanceError(AssertionError):
    """A store broke the ConversationStore contract."""


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ConformanceError(message)


@contextmanager
def _raises(error: type[BaseException], what: str) -> Iterator[None]:
    try:
        yield
    except error:
        return
    except Exception as exc:
        raise ConformanceError(f"{what}: expected {error.__name__}, got {exc!r}") from exc
    raise ConformanceError(f"{what}: expected {error.__name__}, nothing was raised")


def _dicts(nodes: list[Node]) -> list[dict[str, Any]]:
    return [n.to_dict() for n in nodes]


def sample_graph(conversation_id: str = "conv_sample") -> ConversationGraph:
    """A small graph touching every status: system, tool calls, stop, retry, failure and edit.

    Ids and times are deterministic; the active leaf is the completed reply to the edit.
    """
    ids, ticks = itertools.count(1), itertools.count(1)
    graph = ConversationGraph(
        conversation_id,
        id_factory=lambda prefix: f"{prefix}_{next(ids)}",
        clock=lambda: float(next(ticks)),
    )
    graph.add_system("Be brief.")
    graph.add_user("Weather in Paris?")
    first = graph.start_attempt(meta={"model": "gpt-4.1"})
    call = {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    graph.add_items(first.id, [call, {"type": "function_call_output", "call_id": "call_1"}])
    graph.stream(first.id, "Sun")
    graph.stop(first.id)
    second = graph.retry()
    graph.stream(second.id, "Sunny, 21°C.")
    graph.complete(second.id, meta={"response_id": "resp_1", "usage": {"input_tokens": 12}})
    question = graph.add_user("And tomorrow?")
    graph.fail(graph.start_attempt().id, "HTTP 500")
    graph.edit(question.id, "And in Rome?")
    reply = {"type": "message", "role": "assistant", "content": "Rainy."}
    graph.complete(graph.start_attempt().id, items=[reply])
    return graph


def _stored(store: ConversationStore, conversation_id: str = "c1") -> ConversationGraph:
    graph = sample_graph(conversation_id)
    store.create_conversation(conversation_id, strategy="replay")
    head = graph.active_leaf
    store.commit(conversation_id, graph.take_changes(), expected_head=None, new_head=head)
    return graph


def check_protocol(factory: StoreFactory) -> None:
    """The store is a ConversationStore and a context manager."""
    with factory() as store:
        _expect(isinstance(store, ConversationStore), "not a ConversationStore")


def check_conversations(factory: StoreFactory) -> None:
    """Create, read, list and update conversations; a taken id is a StoreError."""
    with factory() as store:
        _expect(store.list_conversations() == [], "a new store lists conversations")
        store.create_conversation("b", strategy="replay", meta={"user": "u1", "n": 1})
        store.create_conversation("a", strategy="previous_response")
        with _raises(StoreError, "duplicate id"):
            store.create_conversation("b", strategy="x")
        _expect(store.list_conversations() == ["b", "a"], "conversations not in creation order")
        info = store.get_conversation("b")
        _expect((info.id, info.strategy) == ("b", "replay"), f"wrong info {info}")
        _expect(info.meta == {"user": "u1", "n": 1}, f"wrong meta {info.meta}")
        _expect(isinstance(info.created_at, float), "created_at is not a float")
        store.update_conversation_meta("b", {"n": 2, "title": "Weather"})
        meta = store.get_conversation("b").meta
        _expect(meta == {"user": "u1", "n": 2, "title": "Weather"}, f"meta not merged: {meta}")
        info.meta["user"] = "changed"
        _expect(store.get_conversation("b").meta["user"] == "u1", "returned meta is not a copy")


def check_unknown_conversation(factory: StoreFactory) -> None:
    """Every call on an unknown conversation raises ConversationNotFoundError."""
    node = Node("m1", None, "user", "complete")
    calls: dict[str, Callable[[ConversationStore], object]] = {
        "get_conversation": lambda s: s.get_conversation("nope"),
        "update_conversation_meta": lambda s: s.update_conversation_meta("nope", {}),
        "put_nodes": lambda s: s.put_nodes("nope", [node]),
        "get_node": lambda s: s.get_node("nope", "m1"),
        "load_graph": lambda s: s.load_graph("nope"),
        "active_path": lambda s: s.active_path("nope"),
        "get_head": lambda s: s.get_head("nope"),
        "set_head": lambda s: s.set_head("nope", None, expected=None),
        "commit": lambda s: s.commit("nope", [node], expected_head=None, new_head="m1"),
        "put_attempt": lambda s: s.put_attempt("nope", AttemptRecord("m1", "att_1")),
        "get_attempt": lambda s: s.get_attempt("nope", "att_1"),
        "list_attempts": lambda s: s.list_attempts("nope"),
        "put_run_state": lambda s: s.put_run_state("nope", "att_1", "{}"),
        "get_run_state": lambda s: s.get_run_state("nope", "att_1"),
        "delete_run_state": lambda s: s.delete_run_state("nope", "att_1"),
    }
    with factory() as store:
        for name, call in calls.items():
            with _raises(ConversationNotFoundError, name):
                call(store)
        _expect(store.list_conversations() == [], "a failed call created a conversation")


def check_nodes(factory: StoreFactory) -> None:
    """Nodes round-trip exactly, upsert by id, come back as copies; bad ones are refused whole."""
    graph = sample_graph()
    nodes = graph.nodes()
    with factory() as store:
        store.create_conversation("c1", strategy="replay")
        store.put_nodes("c1", nodes)
        for node in nodes:
            got = store.get_node("c1", node.id)
            _expect(got.to_dict() == node.to_dict(), f"node {node.id} changed in the store")
        with _raises(NodeNotFoundError, "unknown node"):
            store.get_node("c1", "missing")
        changed = Node.from_dict(nodes[1].to_dict())
        changed.meta["note"] = "upserted"
        store.put_nodes("c1", [changed])
        _expect(store.get_node("c1", changed.id).meta.get("note") == "upserted", "no upsert")
        got = store.get_node("c1", changed.id)
        got.items.append({"type": "message", "role": "user", "content": "x"})
        changed.meta["note"] = "mutated after put"
        again = store.get_node("c1", changed.id)
        _expect(again.meta.get("note") == "upserted", "the store kept a reference to a node")
        _expect(len(again.items) == 1, "the store returned a shared node")
        bad = [Node("ok", None, "user", "complete"), Node("bad", None, "user", "complete")]
        bad[1].items.append({"type": "message", "content": {1, 2}})
        with _raises(StoreError, "a node JSON cannot hold"):
            store.put_nodes("c1", bad)
        with _raises(NodeNotFoundError, "half a refused batch"):
            store.get_node("c1", "ok")


def check_isolation(factory: StoreFactory) -> None:
    """The same ids in two conversations are separate nodes, heads and attempts."""
    with factory() as store:
        first = _stored(store, "c1")
        store.create_conversation("c2", strategy="replay")
        other = Node(first.nodes()[0].id, None, "system", "complete", [{"content": "other"}])
        store.commit("c2", [other], expected_head=None, new_head=other.id)
        store.put_attempt("c2", AttemptRecord(other.id, "att_x"))
        _expect(store.load_graph("c1").to_dict() == first.to_dict(), "c2 leaked into c1")
        _expect(len(store.load_graph("c2")) == 1, "c1 leaked into c2")
        _expect(store.get_node("c2", other.id).items == [{"content": "other"}], "node overwritten")
        _expect(store.get_head("c1") == first.active_leaf, "heads are shared")
        _expect(store.list_attempts("c1") == [], "attempts leaked")
        with _raises(AttemptNotFoundError, "attempt leaked"):
            store.get_attempt("c1", "att_x")


def check_load_graph(factory: StoreFactory) -> None:
    """``load_graph`` rebuilds the graph exactly, with the head as its active leaf."""
    with factory() as store:
        graph = _stored(store)
        loaded = store.load_graph("c1")
        _expect(loaded.to_dict() == graph.to_dict(), "the loaded graph differs")
        loaded.switch(graph.nodes()[2].id)
        _expect(store.get_head("c1") == graph.active_leaf, "load_graph shares state")
        store.create_conversation("empty", strategy="replay")
        empty = store.load_graph("empty")
        _expect((len(empty), empty.active_leaf) == (0, None), "an empty conversation has nodes")
        _expect(empty.conversation_id == "empty", "wrong conversation id on the graph")


def check_active_path(factory: StoreFactory) -> None:
    """``active_path`` walks from the head or a given leaf up to the root."""
    with factory() as store:
        graph = _stored(store)
        path = store.active_path("c1")
        _expect(_dicts(path) == _dicts(graph.active_path()), "wrong active path")
        for leaf in graph.branches():
            got = store.active_path("c1", leaf)
            _expect(_dicts(got) == _dicts(graph.path_to(leaf)), f"wrong path to {leaf}")
        with _raises(NodeNotFoundError, "unknown leaf"):
            store.active_path("c1", "missing")
        store.create_conversation("c2", strategy="replay")
        _expect(store.active_path("c2") == [], "a conversation without head has a path")


def check_head_compare_and_set(factory: StoreFactory) -> None:
    """Heads move only from the expected value, and only to a stored node (or None)."""
    with factory() as store:
        graph = sample_graph()
        store.create_conversation("c1", strategy="replay")
        store.put_nodes("c1", graph.nodes())
        first, second = graph.nodes()[1].id, graph.nodes()[2].id
        _expect(store.get_head("c1") is None, "a new conversation has a head")
        store.set_head("c1", first, expected=None)
        _expect(store.get_head("c1") == first, "set_head did not move the head")
        with _raises(ConcurrentUpdateError, "set_head from a stale head"):
            store.set_head("c1", second, expected=None)
        _expect(store.get_head("c1") == first, "a lost set_head moved the head")
        with _raises(NodeNotFoundError, "set_head to an unknown node"):
            store.set_head("c1", "missing", expected=first)
        _expect(store.get_head("c1") == first, "a refused set_head moved the head")
        store.set_head("c1", None, expected=first)
        _expect(store.get_head("c1") is None, "the head cannot be cleared")


def check_commit_is_atomic(factory: StoreFactory) -> None:
    """``commit`` writes nodes and head together; a lost compare-and-set writes nothing."""
    with factory() as store:
        graph = _stored(store)
        head = store.get_head("c1")
        mine, theirs = store.load_graph("c1"), store.load_graph("c1")
        mine.add_user("mine")
        theirs.add_user("theirs")
        store.commit("c1", mine.take_changes(), expected_head=head, new_head=mine.active_leaf)
        lost = theirs.take_changes()
        with _raises(ConcurrentUpdateError, "a commit from a stale head"):
            store.commit("c1", lost, expected_head=head, new_head=lost[-1].id)
        _expect(store.get_head("c1") == mine.active_leaf, "the loser moved the head")
        with _raises(NodeNotFoundError, "loser's node kept"):
            store.get_node("c1", lost[-1].id)
        _expect(len(store.load_graph("c1")) == len(graph) + 1, "wrong node count after commit")
        orphan = Node("orphan", None, "user", "complete")
        with _raises(NodeNotFoundError, "commit to an unknown head"):
            store.commit("c1", [orphan], expected_head=mine.active_leaf, new_head="missing")
        with _raises(NodeNotFoundError, "refused commit wrote"):
            store.get_node("c1", "orphan")


def check_attempts(factory: StoreFactory) -> None:
    """Attempt records round-trip, upsert in place and list in start order."""
    late = AttemptRecord("m2", "att_late", started_at=30.0, sampling={"temperature": 0.2})
    early = AttemptRecord("m1", "att_early", started_at=10.0, included={"m0": 12, "m1": 7})
    unset = AttemptRecord("m1", "att_unset")
    tie = AttemptRecord("m1", "att_tie", started_at=30.0)
    with factory() as store:
        store.create_conversation("c1", strategy="replay")
        _expect(store.list_attempts("c1") == [], "a new conversation has attempts")
        for record in (unset, late, early, tie):
            store.put_attempt("c1", record)
        got = store.get_attempt("c1", "att_early")
        _expect(got.to_dict() == early.to_dict(), "the attempt changed in the store")
        order = [r.attempt_id for r in store.list_attempts("c1")]
        _expect(order == ["att_early", "att_late", "att_tie", "att_unset"], f"order {order}")
        late.status, late.response_id = "complete", "resp_9"
        store.put_attempt("c1", late)
        again = store.list_attempts("c1")
        _expect([r.attempt_id for r in again] == order, "an upsert moved the attempt")
        _expect(again[1].to_dict() == late.to_dict(), "the upsert was not stored")
        only = [r.attempt_id for r in store.list_attempts("c1", message_id="m1")]
        _expect(only == ["att_early", "att_tie", "att_unset"], f"filter gave {only}")
        with _raises(AttemptNotFoundError, "unknown"):
            store.get_attempt("c1", "missing")


def check_run_states(factory: StoreFactory) -> None:
    """A paused attempt's run round-trips as text, is replaced, forgotten, and kept apart."""
    blob = '{"format": "agents-state-ext/run", "payload": {"text": "café ☕", "n": [1, 2]}}'
    with factory() as store:
        store.create_conversation("c1", strategy="replay")
        store.create_conversation("c2", strategy="replay")
        _expect(store.get_run_state("c1", "att_1") is None, "a new attempt has a run state")
        store.put_run_state("c1", "att_1", blob)
        _expect(store.get_run_state("c1", "att_1") == blob, "the run state changed in the store")
        _expect(store.get_run_state("c2", "att_1") is None, "a run state leaked to c2")
        store.put_run_state("c1", "att_1", "second")
        _expect(store.get_run_state("c1", "att_1") == "second", "a new run state was not kept")
        store.put_run_state("c1", "att_2", blob)
        store.delete_run_state("c1", "att_1")
        _expect(store.get_run_state("c1", "att_1") is None, "a deleted run state came back")
        _expect(store.get_run_state("c1", "att_2") == blob, "a delete removed another attempt's")
        store.delete_run_state("c1", "att_1")  # deleting what is gone is fine
        with _raises(StoreError, "a run state that is not text"):
            store.put_run_state("c1", "att_3", {"not": "text"})  # type: ignore[arg-type]
        _expect(store.get_run_state("c1", "att_3") is None, "a refused run state was kept")


def check_close(factory: StoreFactory) -> None:
    """``close`` is idempotent, and a closed store refuses work with StoreError."""
    store = factory()
    with store:
        store.create_conversation("c1", strategy="replay")
    store.close()
    with _raises(StoreError, "a call after close"):
        store.get_conversation("c1")


CHECKS: tuple[Callable[[StoreFactory], None], ...] = (
    check_protocol,
    check_conversations,
    check_unknown_conversation,
    check_nodes,
    check_isolation,
    check_load_graph,
    check_active_path,
    check_head_compare_and_set,
    check_commit_is_atomic,
    check_attempts,
    check_run_states,
    check_close,
)


def run_conformance(factory: StoreFactory) -> None:
    """Run every check; raise ConformanceError listing each one that failed."""
    failures = []
    for check in CHECKS:
        try:
            check(factory)
        except Exception as exc:
            failures.append(f"{check.__name__}: {exc!r}")
    if failures:
        raise ConformanceError("store failed conformance:\n" + "\n".join(failures))
