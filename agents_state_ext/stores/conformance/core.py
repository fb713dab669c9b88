"""Core checks: conversations, nodes, reading the graph, cycles, and ids that are not text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..._attempts import AttemptRecord
from ..._nodes import Node
from ...errors import (
    ConcurrentUpdateError,
    ConversationNotFoundError,
    NodeNotFoundError,
    StoreError,
)
from ..base import AttemptNotFoundError, ConversationStore
from ._support import (
    BAD_IDS,
    StoreFactory,
    as_dicts,
    expect,
    opened,
    raises,
    sample_graph,
    store_sample,
    straight_path,
)


async def check_protocol(factory: StoreFactory) -> None:
    """The store is a ConversationStore."""
    async with opened(factory) as store:
        expect(isinstance(store, ConversationStore), "not a ConversationStore")


async def check_conversations(factory: StoreFactory) -> None:
    """Create, read, list and update conversations; a taken id is a StoreError."""
    async with opened(factory) as store:
        expect(await store.list_conversations() == [], "a new store lists conversations")
        await store.create_conversation("b", strategy="replay", meta={"user": "u1", "n": 1})
        await store.create_conversation("a", strategy="previous_response")
        await raises(StoreError, "duplicate id", store.create_conversation("b", strategy="x"))
        listed = await store.list_conversations()
        expect(listed == ["b", "a"], f"conversations not in creation order: {listed}")
        info = await store.get_conversation("b")
        expect((info.id, info.strategy) == ("b", "replay"), f"wrong info {info}")
        expect(info.meta == {"user": "u1", "n": 1}, f"wrong meta {info.meta}")
        expect(isinstance(info.created_at, float), "created_at is not a float")
        await store.update_conversation_meta("b", {"n": 2, "title": "Weather"})
        meta = (await store.get_conversation("b")).meta
        expect(meta == {"user": "u1", "n": 2, "title": "Weather"}, f"meta not merged: {meta}")
        info.meta["user"] = "changed"
        again = await store.get_conversation("b")
        expect(again.meta["user"] == "u1", "returned meta is not a copy")
        await raises(
            StoreError,
            "meta JSON cannot hold",
            store.create_conversation("c", strategy="replay", meta={"when": object()}),
        )
        expect(await store.list_conversations() == ["b", "a"], "a refused create wrote")


async def check_unknown_conversation(factory: StoreFactory) -> None:
    """Every call on an unknown conversation raises ConversationNotFoundError."""
    node = Node("m1", None, "user", "complete")
    calls: dict[str, Callable[[ConversationStore], Awaitable[object]]] = {
        "get_conversation": lambda s: s.get_conversation("nope"),
        "update_conversation_meta": lambda s: s.update_conversation_meta("nope", {}),
        "delete_conversation": lambda s: s.delete_conversation("nope"),
        "get_node": lambda s: s.get_node("nope", "m1"),
        "load_graph": lambda s: s.load_graph("nope"),
        "active_path": lambda s: s.active_path("nope"),
        "active_path(limit=1)": lambda s: s.active_path("nope", limit=1),
        "get_head": lambda s: s.get_head("nope"),
        "commit": lambda s: s.commit("nope", [node], expected_head=None, new_head="m1"),
        "put_attempt": lambda s: s.put_attempt("nope", AttemptRecord("m1", "att_1")),
        "get_attempt": lambda s: s.get_attempt("nope", "att_1"),
        "list_attempts": lambda s: s.list_attempts("nope"),
        "put_run_state": lambda s: s.put_run_state("nope", "att_1", "{}"),
        "get_run_state": lambda s: s.get_run_state("nope", "att_1"),
        "delete_run_state": lambda s: s.delete_run_state("nope", "att_1"),
    }
    async with opened(factory) as store:
        for name, call in calls.items():
            await raises(ConversationNotFoundError, name, call(store))
        expect(await store.list_conversations() == [], "a failed call created a conversation")


async def check_nodes(factory: StoreFactory) -> None:
    """Nodes round-trip exactly, upsert by id, come back as copies; bad ones are refused whole."""
    graph = sample_graph()
    nodes = graph.nodes()
    async with opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", nodes, expected_head=None, new_head=None)
        for node in nodes:
            got = await store.get_node("c1", node.id)
            expect(got.to_dict() == node.to_dict(), f"node {node.id} changed in the store")
        await raises(NodeNotFoundError, "unknown node", store.get_node("c1", "missing"))
        changed = Node.from_dict(nodes[1].to_dict())
        changed.meta["note"] = "upserted"
        await store.commit("c1", [changed], expected_head=None, new_head=None)
        got = await store.get_node("c1", changed.id)
        expect(got.meta.get("note") == "upserted", "no upsert")
        got.items.append({"type": "message", "role": "user", "content": "x"})
        changed.meta["note"] = "mutated after commit"
        again = await store.get_node("c1", changed.id)
        expect(again.meta.get("note") == "upserted", "the store kept a reference to a node")
        expect(len(again.items) == 1, "the store returned a shared node")
        bad = [Node("ok", None, "user", "complete"), Node("bad", None, "user", "complete")]
        bad[1].items.append({"type": "message", "content": {1, 2}})
        await raises(
            StoreError,
            "a node JSON cannot hold",
            store.commit("c1", bad, expected_head=None, new_head=None),
        )
        await raises(NodeNotFoundError, "half a refused batch", store.get_node("c1", "ok"))


async def check_isolation(factory: StoreFactory) -> None:
    """The same ids in two conversations are separate nodes, heads and attempts."""
    async with opened(factory) as store:
        first = await store_sample(store, "c1")
        await store.create_conversation("c2", strategy="replay")
        other = Node(first.nodes()[0].id, None, "system", "complete", [{"content": "other"}])
        await store.commit("c2", [other], expected_head=None, new_head=other.id)
        await store.put_attempt("c2", AttemptRecord(other.id, "att_x"))
        loaded = await store.load_graph("c1")
        expect(loaded.to_dict() == first.to_dict(), "c2 leaked into c1")
        expect(len(await store.load_graph("c2")) == 1, "c1 leaked into c2")
        got = await store.get_node("c2", other.id)
        expect(got.items == [{"content": "other"}], "node overwritten")
        expect(await store.get_head("c1") == first.active_leaf, "heads are shared")
        expect(await store.list_attempts("c1") == [], "attempts leaked")
        await raises(AttemptNotFoundError, "attempt leaked", store.get_attempt("c1", "att_x"))


async def check_load_graph(factory: StoreFactory) -> None:
    """``load_graph`` rebuilds the graph exactly, with the head as its active leaf."""
    async with opened(factory) as store:
        graph = await store_sample(store)
        loaded = await store.load_graph("c1")
        expect(loaded.to_dict() == graph.to_dict(), "the loaded graph differs")
        loaded.switch(graph.nodes()[2].id)
        expect(await store.get_head("c1") == graph.active_leaf, "load_graph shares state")
        await store.create_conversation("empty", strategy="replay")
        empty = await store.load_graph("empty")
        expect((len(empty), empty.active_leaf) == (0, None), "an empty conversation has nodes")
        expect(empty.conversation_id == "empty", "wrong conversation id on the graph")


async def check_active_path(factory: StoreFactory) -> None:
    """``active_path`` walks from the head or a given leaf up to the root."""
    async with opened(factory) as store:
        graph = await store_sample(store)
        path = await store.active_path("c1")
        expect(as_dicts(path) == as_dicts(graph.active_path()), "wrong active path")
        for leaf in graph.branches():
            got = await store.active_path("c1", leaf)
            expect(as_dicts(got) == as_dicts(graph.path_to(leaf)), f"wrong path to {leaf}")
        await raises(NodeNotFoundError, "unknown leaf", store.active_path("c1", "missing"))
        await store.create_conversation("c2", strategy="replay")
        expect(await store.active_path("c2") == [], "a conversation without head has a path")
        expect(await store.active_path("c2", limit=3) == [], "limit on an empty conversation")


async def check_active_path_limit(factory: StoreFactory) -> None:
    """``limit=N`` keeps the last N nodes of the path, root first; a bad limit is StoreError."""
    nodes = straight_path(7)
    ids = [n.id for n in nodes]
    async with opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", nodes, expected_head=None, new_head="n6")
        for limit in (1, 2, 6, 7, 8, 1000):
            got = [n.id for n in await store.active_path("c1", limit=limit)]
            expect(got == ids[-limit:], f"limit={limit} gave {got}")
        got = [n.id for n in await store.active_path("c1", "n3", limit=2)]
        expect(got == ["n2", "n3"], f"limit from a given leaf gave {got}")
        full = await store.active_path("c1", limit=None)
        expect(as_dicts(full) == as_dicts(nodes), "limit=None is not the whole path")
        bad_limits: tuple[Any, ...] = (0, -1, True, 1.5, "2")
        for bad in bad_limits:
            await raises(StoreError, f"limit={bad!r}", store.active_path("c1", limit=bad))


async def check_cycles(factory: StoreFactory) -> None:
    """A parent cycle written through ``commit`` is StoreError on read, not an endless walk."""
    async with opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        a = Node("a", "b", "user", "complete")
        b = Node("b", "a", "assistant", "complete")
        await store.commit("c1", [a, b], expected_head=None, new_head="a")
        await store.create_conversation("c2", strategy="replay")
        root = Node("root", None, "system", "complete")
        loop = Node("self", "self", "user", "complete")
        await store.commit("c2", [root, loop], expected_head=None, new_head="self")
        for cid, leaf in (("c1", "a"), ("c1", "b"), ("c2", "self")):
            await raises(StoreError, f"active_path on a cycle ({cid})", store.active_path(cid))
            await raises(
                StoreError, f"active_path to {leaf} on a cycle", store.active_path(cid, leaf)
            )
            await raises(
                StoreError,
                f"active_path(limit=5) on a cycle ({cid})",
                store.active_path(cid, leaf, limit=5),
            )
            await raises(StoreError, f"load_graph on a cycle ({cid})", store.load_graph(cid))
        await store.commit("c2", [], expected_head="self", new_head="root")
        path = await store.active_path("c2")
        expect([n.id for n in path] == ["root"], "a path beside a cycle is not readable")


async def check_typed_ids(factory: StoreFactory) -> None:
    """Ids that are not storable text are StoreError in every method, with nothing written.

    A lone surrogate, a NUL, empty text and a list, as each id argument in turn; the error is
    the store's own ``StoreError`` (not a not-found or a conflict), raised before any write.
    """
    async with opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        root = Node("n1", None, "user", "complete")
        record = AttemptRecord("n1", "a1", started_at=1.0)
        await store.commit("c1", [root], expected_head=None, new_head="n1", attempts=[record])
        for bad in BAD_IDS:
            for name, call in _id_calls(bad).items():
                await raises(
                    StoreError,
                    f"{name} with id {bad!r}",
                    call(store),
                    not_=(ConversationNotFoundError, AttemptNotFoundError, ConcurrentUpdateError),
                )
        expect(await store.list_conversations() == ["c1"], "a bad id created a conversation")
        expect(await store.get_head("c1") == "n1", "a bad id moved the head")
        expect(len(await store.load_graph("c1")) == 1, "a bad id wrote a node")
        attempts = [r.attempt_id for r in await store.list_attempts("c1")]
        expect(attempts == ["a1"], f"a bad id wrote an attempt: {attempts}")


def _id_calls(bad: Any) -> dict[str, Callable[[ConversationStore], Awaitable[object]]]:
    def node(node_id: Any, parent: Any = "n1") -> list[Node]:
        return [Node(node_id, parent, "user", "complete")]

    return {
        "create_conversation": lambda s: s.create_conversation(bad, strategy="replay"),
        "get_conversation": lambda s: s.get_conversation(bad),
        "update_conversation_meta": lambda s: s.update_conversation_meta(bad, {"x": 1}),
        "delete_conversation": lambda s: s.delete_conversation(bad),
        "get_node(conversation)": lambda s: s.get_node(bad, "n1"),
        "get_node(node)": lambda s: s.get_node("c1", bad),
        "load_graph": lambda s: s.load_graph(bad),
        "active_path(conversation)": lambda s: s.active_path(bad),
        "active_path(leaf)": lambda s: s.active_path("c1", bad),
        "get_head": lambda s: s.get_head(bad),
        "commit(conversation)": lambda s: s.commit(bad, [], expected_head=None, new_head=None),
        "commit(node id)": lambda s: s.commit("c1", node(bad), expected_head="n1", new_head="n1"),
        "commit(parent id)": lambda s: s.commit(
            "c1", node("n2", bad), expected_head="n1", new_head="n1"
        ),
        "commit(expected_head)": lambda s: s.commit("c1", [], expected_head=bad, new_head="n1"),
        "commit(new_head)": lambda s: s.commit("c1", [], expected_head="n1", new_head=bad),
        "commit(attempt id)": lambda s: s.commit(
            "c1", [], expected_head="n1", new_head="n1", attempts=[AttemptRecord("n1", bad)]
        ),
        "commit(message id)": lambda s: s.commit(
            "c1", [], expected_head="n1", new_head="n1", attempts=[AttemptRecord(bad, "a2")]
        ),
        "put_attempt(conversation)": lambda s: s.put_attempt(bad, AttemptRecord("n1", "a2")),
        "put_attempt(attempt id)": lambda s: s.put_attempt("c1", AttemptRecord("n1", bad)),
        "put_attempt(message id)": lambda s: s.put_attempt("c1", AttemptRecord(bad, "a2")),
        "get_attempt(conversation)": lambda s: s.get_attempt(bad, "a1"),
        "get_attempt(attempt id)": lambda s: s.get_attempt("c1", bad),
        "list_attempts(conversation)": lambda s: s.list_attempts(bad),
        "list_attempts(message id)": lambda s: s.list_attempts("c1", message_id=bad),
        "put_run_state(conversation)": lambda s: s.put_run_state(bad, "a1", "{}"),
        "put_run_state(attempt id)": lambda s: s.put_run_state("c1", bad, "{}"),
        "get_run_state(conversation)": lambda s: s.get_run_state(bad, "a1"),
        "get_run_state(attempt id)": lambda s: s.get_run_state("c1", bad),
        "delete_run_state(conversation)": lambda s: s.delete_run_state(bad, "a1"),
        "delete_run_state(attempt id)": lambda s: s.delete_run_state("c1", bad),
    }
