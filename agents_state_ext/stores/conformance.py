"""The conformance suite every store must pass, whatever its backend.

Each check is ``async def check_x(factory)``: ``factory`` is an async callable returning a new,
empty store, and the check closes every store it opens. The checks come in three groups:

- ``CORE_CHECKS``: the :class:`~agents_state_ext.stores.ConversationStore` protocol.
- ``LEDGER_CHECKS``: the :class:`~agents_state_ext.stores.LedgerStore` capability.
- ``TOKEN_CHECKS``: the :class:`~agents_state_ext.stores.TokenCountStore` capability.

``CHECKS`` is all three. A capability check given a store without that capability passes by
skipping: it raises :class:`ConformanceSkip` (so a test runner can show it as skipped), and
:func:`run_conformance` lists it under ``skipped`` in its report. In pytest, one test per
check (with the ``anyio`` plugin, as this project runs them)::

    import pytest
    from agents_state_ext.stores.conformance import CHECKS, ConformanceSkip

    async def make_store():
        return await MyStore.connect(...)

    @pytest.mark.anyio
    @pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
    async def test_my_store(check):
        try:
            await check(make_store)
        except ConformanceSkip as skip:
            pytest.skip(str(skip))

or all at once: ``await run_conformance(make_store)`` raises :class:`ConformanceError` naming
every failed check. Checks use no ``assert``, so they also run under ``python -O``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from ..attempts import AttemptRecord
from ..errors import ConcurrentUpdateError, ConversationNotFoundError, NodeNotFoundError, StoreError
from ..graph import ConversationGraph
from ..nodes import Node, Role
from .base import AttemptNotFoundError, ConversationStore, LedgerStore, TokenCountStore

__all__ = [
    "CHECKS",
    "CORE_CHECKS",
    "LEDGER_CHECKS",
    "TOKEN_CHECKS",
    "Check",
    "ConformanceError",
    "ConformanceReport",
    "ConformanceSkip",
    "StoreFactory",
    "run_conformance",
    "sample_graph",
]

StoreFactory = Callable[[], Awaitable[ConversationStore]]
"""An async callable returning a new, empty store."""
Check = Callable[[StoreFactory], Awaitable[None]]
"""One conformance check."""

# Ids no backend may accept: a lone surrogate (not UTF-8), a NUL, empty text, not text.
_BAD_IDS: tuple[Any, ...] = ("\ud800", "a\x00b", "", ["c1"])


class ConformanceError(AssertionError):
    """A store broke the store contract."""


class ConformanceSkip(Exception):
    """A capability check met a store without that capability: it passes by skipping."""


@dataclass(frozen=True)
class ConformanceReport:
    """What :func:`run_conformance` ran: the checks passed, and the skipped ones with why."""

    passed: tuple[str, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)


class _FullStore(ConversationStore, LedgerStore, TokenCountStore, Protocol):
    """For type checking only: a store with every capability."""


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ConformanceError(message)


async def _raises(
    error: type[BaseException],
    what: str,
    call: Awaitable[object],
    *,
    not_: tuple[type[BaseException], ...] = (),
) -> None:
    """Await ``call``; it must raise ``error`` (and none of ``not_``)."""
    try:
        await call
    except error as exc:
        if isinstance(exc, not_):
            raise ConformanceError(f"{what}: expected {error.__name__}, got {exc!r}") from exc
        return
    except Exception as exc:
        raise ConformanceError(f"{what}: expected {error.__name__}, got {exc!r}") from exc
    raise ConformanceError(f"{what}: expected {error.__name__}, nothing was raised")


@asynccontextmanager
async def _opened(factory: StoreFactory) -> AsyncIterator[ConversationStore]:
    store = await factory()
    try:
        yield store
    finally:
        await store.aclose()


@asynccontextmanager
async def _capable(
    factory: StoreFactory, capability: type[Any], name: str
) -> AsyncIterator[_FullStore]:
    """A new store that has ``capability``; ``ConformanceSkip`` (the store closed) if not."""
    store = await factory()
    try:
        if not isinstance(store, capability):
            raise ConformanceSkip(f"{type(store).__name__} has no {name} capability")
        yield cast(_FullStore, store)  # checked just above, one capability at a time
    finally:
        await store.aclose()


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


async def _stored(store: ConversationStore, conversation_id: str = "c1") -> ConversationGraph:
    graph = sample_graph(conversation_id)
    await store.create_conversation(conversation_id, strategy="replay")
    head = graph.active_leaf
    await store.commit(conversation_id, graph.take_changes(), expected_head=None, new_head=head)
    return graph


def _chain(length: int, prefix: str = "n") -> list[Node]:
    """A straight path of ``length`` nodes, root first: n0 <- n1 <- ..."""
    nodes = [Node(f"{prefix}0", None, "system", "complete", [{"content": "0"}])]
    for i in range(1, length):
        role: Role = "user" if i % 2 else "assistant"
        nodes.append(
            Node(f"{prefix}{i}", f"{prefix}{i - 1}", role, "complete", [{"content": str(i)}])
        )
    return nodes


# -- core ------------------------------------------------------------------------------------


async def check_protocol(factory: StoreFactory) -> None:
    """The store is a ConversationStore."""
    async with _opened(factory) as store:
        _expect(isinstance(store, ConversationStore), "not a ConversationStore")


async def check_conversations(factory: StoreFactory) -> None:
    """Create, read, list and update conversations; a taken id is a StoreError."""
    async with _opened(factory) as store:
        _expect(await store.list_conversations() == [], "a new store lists conversations")
        await store.create_conversation("b", strategy="replay", meta={"user": "u1", "n": 1})
        await store.create_conversation("a", strategy="previous_response")
        await _raises(StoreError, "duplicate id", store.create_conversation("b", strategy="x"))
        listed = await store.list_conversations()
        _expect(listed == ["b", "a"], f"conversations not in creation order: {listed}")
        info = await store.get_conversation("b")
        _expect((info.id, info.strategy) == ("b", "replay"), f"wrong info {info}")
        _expect(info.meta == {"user": "u1", "n": 1}, f"wrong meta {info.meta}")
        _expect(isinstance(info.created_at, float), "created_at is not a float")
        await store.update_conversation_meta("b", {"n": 2, "title": "Weather"})
        meta = (await store.get_conversation("b")).meta
        _expect(meta == {"user": "u1", "n": 2, "title": "Weather"}, f"meta not merged: {meta}")
        info.meta["user"] = "changed"
        again = await store.get_conversation("b")
        _expect(again.meta["user"] == "u1", "returned meta is not a copy")
        await _raises(
            StoreError,
            "meta JSON cannot hold",
            store.create_conversation("c", strategy="replay", meta={"when": object()}),
        )
        _expect(await store.list_conversations() == ["b", "a"], "a refused create wrote")


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
    async with _opened(factory) as store:
        for name, call in calls.items():
            await _raises(ConversationNotFoundError, name, call(store))
        _expect(await store.list_conversations() == [], "a failed call created a conversation")


async def check_nodes(factory: StoreFactory) -> None:
    """Nodes round-trip exactly, upsert by id, come back as copies; bad ones are refused whole."""
    graph = sample_graph()
    nodes = graph.nodes()
    async with _opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", nodes, expected_head=None, new_head=None)
        for node in nodes:
            got = await store.get_node("c1", node.id)
            _expect(got.to_dict() == node.to_dict(), f"node {node.id} changed in the store")
        await _raises(NodeNotFoundError, "unknown node", store.get_node("c1", "missing"))
        changed = Node.from_dict(nodes[1].to_dict())
        changed.meta["note"] = "upserted"
        await store.commit("c1", [changed], expected_head=None, new_head=None)
        got = await store.get_node("c1", changed.id)
        _expect(got.meta.get("note") == "upserted", "no upsert")
        got.items.append({"type": "message", "role": "user", "content": "x"})
        changed.meta["note"] = "mutated after commit"
        again = await store.get_node("c1", changed.id)
        _expect(again.meta.get("note") == "upserted", "the store kept a reference to a node")
        _expect(len(again.items) == 1, "the store returned a shared node")
        bad = [Node("ok", None, "user", "complete"), Node("bad", None, "user", "complete")]
        bad[1].items.append({"type": "message", "content": {1, 2}})
        await _raises(
            StoreError,
            "a node JSON cannot hold",
            store.commit("c1", bad, expected_head=None, new_head=None),
        )
        await _raises(NodeNotFoundError, "half a refused batch", store.get_node("c1", "ok"))


async def check_isolation(factory: StoreFactory) -> None:
    """The same ids in two conversations are separate nodes, heads and attempts."""
    async with _opened(factory) as store:
        first = await _stored(store, "c1")
        await store.create_conversation("c2", strategy="replay")
        other = Node(first.nodes()[0].id, None, "system", "complete", [{"content": "other"}])
        await store.commit("c2", [other], expected_head=None, new_head=other.id)
        await store.put_attempt("c2", AttemptRecord(other.id, "att_x"))
        loaded = await store.load_graph("c1")
        _expect(loaded.to_dict() == first.to_dict(), "c2 leaked into c1")
        _expect(len(await store.load_graph("c2")) == 1, "c1 leaked into c2")
        got = await store.get_node("c2", other.id)
        _expect(got.items == [{"content": "other"}], "node overwritten")
        _expect(await store.get_head("c1") == first.active_leaf, "heads are shared")
        _expect(await store.list_attempts("c1") == [], "attempts leaked")
        await _raises(AttemptNotFoundError, "attempt leaked", store.get_attempt("c1", "att_x"))


async def check_load_graph(factory: StoreFactory) -> None:
    """``load_graph`` rebuilds the graph exactly, with the head as its active leaf."""
    async with _opened(factory) as store:
        graph = await _stored(store)
        loaded = await store.load_graph("c1")
        _expect(loaded.to_dict() == graph.to_dict(), "the loaded graph differs")
        loaded.switch(graph.nodes()[2].id)
        _expect(await store.get_head("c1") == graph.active_leaf, "load_graph shares state")
        await store.create_conversation("empty", strategy="replay")
        empty = await store.load_graph("empty")
        _expect((len(empty), empty.active_leaf) == (0, None), "an empty conversation has nodes")
        _expect(empty.conversation_id == "empty", "wrong conversation id on the graph")


async def check_active_path(factory: StoreFactory) -> None:
    """``active_path`` walks from the head or a given leaf up to the root."""
    async with _opened(factory) as store:
        graph = await _stored(store)
        path = await store.active_path("c1")
        _expect(_dicts(path) == _dicts(graph.active_path()), "wrong active path")
        for leaf in graph.branches():
            got = await store.active_path("c1", leaf)
            _expect(_dicts(got) == _dicts(graph.path_to(leaf)), f"wrong path to {leaf}")
        await _raises(NodeNotFoundError, "unknown leaf", store.active_path("c1", "missing"))
        await store.create_conversation("c2", strategy="replay")
        _expect(await store.active_path("c2") == [], "a conversation without head has a path")
        _expect(await store.active_path("c2", limit=3) == [], "limit on an empty conversation")


async def check_active_path_limit(factory: StoreFactory) -> None:
    """``limit=N`` keeps the last N nodes of the path, root first; a bad limit is StoreError."""
    nodes = _chain(7)
    ids = [n.id for n in nodes]
    async with _opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", nodes, expected_head=None, new_head="n6")
        for limit in (1, 2, 6, 7, 8, 1000):
            got = [n.id for n in await store.active_path("c1", limit=limit)]
            _expect(got == ids[-limit:], f"limit={limit} gave {got}")
        got = [n.id for n in await store.active_path("c1", "n3", limit=2)]
        _expect(got == ["n2", "n3"], f"limit from a given leaf gave {got}")
        full = await store.active_path("c1", limit=None)
        _expect(_dicts(full) == _dicts(nodes), "limit=None is not the whole path")
        bad_limits: tuple[Any, ...] = (0, -1, True, 1.5, "2")
        for bad in bad_limits:
            await _raises(StoreError, f"limit={bad!r}", store.active_path("c1", limit=bad))


async def check_head_compare_and_set(factory: StoreFactory) -> None:
    """Heads move only from the expected value, and only to a stored node (or None)."""
    async with _opened(factory) as store:
        graph = sample_graph()
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", graph.nodes(), expected_head=None, new_head=None)
        first, second = graph.nodes()[1].id, graph.nodes()[2].id
        _expect(await store.get_head("c1") is None, "a new conversation has a head")
        await store.commit("c1", [], expected_head=None, new_head=first)
        _expect(await store.get_head("c1") == first, "commit did not move the head")
        await _raises(
            ConcurrentUpdateError,
            "moving from a stale head",
            store.commit("c1", [], expected_head=None, new_head=second),
        )
        _expect(await store.get_head("c1") == first, "a lost compare-and-set moved the head")
        await _raises(
            NodeNotFoundError,
            "moving to an unknown node",
            store.commit("c1", [], expected_head=first, new_head="missing"),
        )
        _expect(await store.get_head("c1") == first, "a refused commit moved the head")
        await store.commit("c1", [], expected_head=first, new_head=None)
        _expect(await store.get_head("c1") is None, "the head cannot be cleared")


async def check_commit_is_atomic(factory: StoreFactory) -> None:
    """``commit`` writes nodes and head together; a lost compare-and-set writes nothing."""
    async with _opened(factory) as store:
        graph = await _stored(store)
        head = await store.get_head("c1")
        mine, theirs = await store.load_graph("c1"), await store.load_graph("c1")
        mine.add_user("mine")
        theirs.add_user("theirs")
        await store.commit("c1", mine.take_changes(), expected_head=head, new_head=mine.active_leaf)
        lost = theirs.take_changes()
        await _raises(
            ConcurrentUpdateError,
            "a commit from a stale head",
            store.commit("c1", lost, expected_head=head, new_head=lost[-1].id),
        )
        _expect(await store.get_head("c1") == mine.active_leaf, "the loser moved the head")
        await _raises(NodeNotFoundError, "loser's node kept", store.get_node("c1", lost[-1].id))
        count = len(await store.load_graph("c1"))
        _expect(count == len(graph) + 1, f"wrong node count after commit: {count}")
        orphan = Node("orphan", None, "user", "complete")
        await _raises(
            NodeNotFoundError,
            "commit to an unknown head",
            store.commit("c1", [orphan], expected_head=mine.active_leaf, new_head="missing"),
        )
        await _raises(NodeNotFoundError, "refused commit wrote", store.get_node("c1", "orphan"))


async def check_commit_attempts(factory: StoreFactory) -> None:
    """``commit(attempts=...)`` writes attempt records with the nodes and head, or nothing."""
    root = Node("m0", None, "user", "complete")
    reply = Node("m1", "m0", "assistant", "complete", attempt_id="att_1")
    record = AttemptRecord("m1", "att_1", started_at=5.0, status="complete")
    async with _opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.commit(
            "c1", [root, reply], expected_head=None, new_head="m1", attempts=[record]
        )
        got = await store.get_attempt("c1", "att_1")
        _expect(got.to_dict() == record.to_dict(), "a committed attempt changed in the store")
        rival = Node("m2", "m1", "assistant", "complete", attempt_id="att_2")
        lost = AttemptRecord("m2", "att_2", started_at=6.0)
        replaced = AttemptRecord("m1", "att_1", started_at=5.0, status="failed")
        await _raises(
            ConcurrentUpdateError,
            "a commit with attempts from a stale head",
            store.commit(
                "c1", [rival], expected_head="m0", new_head="m2", attempts=[lost, replaced]
            ),
        )
        await _raises(
            AttemptNotFoundError,
            "a lost commit wrote its attempt",
            store.get_attempt("c1", "att_2"),
        )
        again = await store.get_attempt("c1", "att_1")
        _expect(again.status == "complete", "a lost commit replaced an attempt")
        await _raises(NodeNotFoundError, "a lost commit wrote its node", store.get_node("c1", "m2"))
        await _raises(
            NodeNotFoundError,
            "a commit with attempts to an unknown head",
            store.commit("c1", [rival], expected_head="m1", new_head="missing", attempts=[lost]),
        )
        await _raises(
            AttemptNotFoundError,
            "a refused commit wrote its attempt",
            store.get_attempt("c1", "att_2"),
        )
        early = AttemptRecord("m1", "att_0", started_at=1.0)
        await store.commit("c1", [], expected_head="m1", new_head="m1", attempts=[replaced, early])
        order = [(r.attempt_id, r.status) for r in await store.list_attempts("c1")]
        _expect(order == [("att_0", "queued"), ("att_1", "failed")], f"attempts {order}")


async def check_concurrent_commits(factory: StoreFactory) -> None:
    """Commits racing from the same head on one store (``asyncio.gather``): exactly one wins."""
    async with _opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        root = Node("root", None, "system", "complete")
        await store.commit("c1", [root], expected_head=None, new_head="root")
        rivals = [Node(f"r{i}", "root", "user", "complete") for i in range(6)]
        results = await asyncio.gather(
            *(
                store.commit("c1", [node], expected_head="root", new_head=node.id)
                for node in rivals
            ),
            return_exceptions=True,
        )
        won = [n.id for n, r in zip(rivals, results, strict=True) if r is None]
        lost = [r for r in results if isinstance(r, ConcurrentUpdateError)]
        _expect(len(won) == 1, f"{len(won)} commits from the same head won: {results}")
        _expect(len(lost) == len(rivals) - 1, f"the losers did not all conflict: {results}")
        _expect(await store.get_head("c1") == won[0], "the head is not the winner's node")
        graph = await store.load_graph("c1")
        _expect(len(graph) == 2, f"a losing commit wrote its node: {len(graph)} nodes")


async def check_delete_conversation(factory: StoreFactory) -> None:
    """``delete_conversation`` forgets everything under the id, and only under it."""
    async with _opened(factory) as store:
        await _stored(store, "c1")
        kept = await _stored(store, "c2")
        for cid in ("c1", "c2"):
            await store.put_attempt(cid, AttemptRecord("m1", "att_1", started_at=1.0))
            await store.put_run_state(cid, "att_1", "paused")
        await store.delete_conversation("c1")
        _expect(await store.list_conversations() == ["c2"], "the conversation is still listed")
        await _raises(
            ConversationNotFoundError, "a deleted conversation", store.get_conversation("c1")
        )
        await _raises(ConversationNotFoundError, "delete twice", store.delete_conversation("c1"))
        await store.create_conversation("c1", strategy="previous_response")
        _expect(len(await store.load_graph("c1")) == 0, "a deleted conversation's nodes came back")
        _expect(await store.get_head("c1") is None, "a deleted conversation's head came back")
        _expect(await store.list_attempts("c1") == [], "deleted attempts came back")
        _expect(await store.get_run_state("c1", "att_1") is None, "a deleted run state came back")
        info = await store.get_conversation("c1")
        _expect(info.strategy == "previous_response", "a re-created conversation is the old one")
        other = await store.load_graph("c2")
        _expect(other.to_dict() == kept.to_dict(), "deleting c1 changed c2")
        _expect(len(await store.list_attempts("c2")) == 1, "deleting c1 removed c2's attempts")
        _expect(await store.get_run_state("c2", "att_1") == "paused", "c2's run state is gone")


async def check_cycles(factory: StoreFactory) -> None:
    """A parent cycle written through ``commit`` is StoreError on read, not an endless walk."""
    async with _opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        a = Node("a", "b", "user", "complete")
        b = Node("b", "a", "assistant", "complete")
        await store.commit("c1", [a, b], expected_head=None, new_head="a")
        await store.create_conversation("c2", strategy="replay")
        root = Node("root", None, "system", "complete")
        loop = Node("self", "self", "user", "complete")
        await store.commit("c2", [root, loop], expected_head=None, new_head="self")
        for cid, leaf in (("c1", "a"), ("c1", "b"), ("c2", "self")):
            await _raises(StoreError, f"active_path on a cycle ({cid})", store.active_path(cid))
            await _raises(
                StoreError, f"active_path to {leaf} on a cycle", store.active_path(cid, leaf)
            )
            await _raises(
                StoreError,
                f"active_path(limit=5) on a cycle ({cid})",
                store.active_path(cid, leaf, limit=5),
            )
            await _raises(StoreError, f"load_graph on a cycle ({cid})", store.load_graph(cid))
        await store.commit("c2", [], expected_head="self", new_head="root")
        path = await store.active_path("c2")
        _expect([n.id for n in path] == ["root"], "a path beside a cycle is not readable")


async def check_typed_ids(factory: StoreFactory) -> None:
    """Ids that are not storable text are StoreError in every method, with nothing written.

    A lone surrogate, a NUL, empty text and a list, as each id argument in turn; the error is
    the store's own ``StoreError`` (not a not-found or a conflict), raised before any write.
    """
    async with _opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        root = Node("n1", None, "user", "complete")
        record = AttemptRecord("n1", "a1", started_at=1.0)
        await store.commit("c1", [root], expected_head=None, new_head="n1", attempts=[record])
        for bad in _BAD_IDS:
            for name, call in _id_calls(bad).items():
                await _raises(
                    StoreError,
                    f"{name} with id {bad!r}",
                    call(store),
                    not_=(ConversationNotFoundError, AttemptNotFoundError, ConcurrentUpdateError),
                )
        _expect(await store.list_conversations() == ["c1"], "a bad id created a conversation")
        _expect(await store.get_head("c1") == "n1", "a bad id moved the head")
        _expect(len(await store.load_graph("c1")) == 1, "a bad id wrote a node")
        attempts = [r.attempt_id for r in await store.list_attempts("c1")]
        _expect(attempts == ["a1"], f"a bad id wrote an attempt: {attempts}")


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


async def check_attempts(factory: StoreFactory) -> None:
    """Attempt records round-trip, upsert in place and list in start order."""
    late = AttemptRecord("m2", "att_late", started_at=30.0, sampling={"temperature": 0.2})
    early = AttemptRecord("m1", "att_early", started_at=10.0, included={"m0": 12, "m1": 7})
    unset = AttemptRecord("m1", "att_unset")
    tie = AttemptRecord("m1", "att_tie", started_at=30.0)
    async with _opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        _expect(await store.list_attempts("c1") == [], "a new conversation has attempts")
        for record in (unset, late, early, tie):
            await store.put_attempt("c1", record)
        got = await store.get_attempt("c1", "att_early")
        _expect(got.to_dict() == early.to_dict(), "the attempt changed in the store")
        order = [r.attempt_id for r in await store.list_attempts("c1")]
        _expect(order == ["att_early", "att_late", "att_tie", "att_unset"], f"order {order}")
        late.status, late.response_id = "complete", "resp_9"
        await store.put_attempt("c1", late)
        again = await store.list_attempts("c1")
        _expect([r.attempt_id for r in again] == order, "an upsert moved the attempt")
        _expect(again[1].to_dict() == late.to_dict(), "the upsert was not stored")
        only = [r.attempt_id for r in await store.list_attempts("c1", message_id="m1")]
        _expect(only == ["att_early", "att_tie", "att_unset"], f"filter gave {only}")
        await _raises(AttemptNotFoundError, "unknown", store.get_attempt("c1", "missing"))


async def check_run_states(factory: StoreFactory) -> None:
    """A paused attempt's run round-trips as text, is replaced, forgotten, and kept apart."""
    blob = '{"format": "agents-state-ext/run", "payload": {"text": "café ☕", "n": [1, 2]}}'
    async with _opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.create_conversation("c2", strategy="replay")
        _expect(await store.get_run_state("c1", "att_1") is None, "a new attempt has a run")
        await store.put_run_state("c1", "att_1", blob)
        _expect(await store.get_run_state("c1", "att_1") == blob, "the run state changed")
        _expect(await store.get_run_state("c2", "att_1") is None, "a run state leaked to c2")
        await store.put_run_state("c1", "att_1", "second")
        _expect(await store.get_run_state("c1", "att_1") == "second", "a new run was not kept")
        await store.put_run_state("c1", "att_2", blob)
        await store.delete_run_state("c1", "att_1")
        _expect(await store.get_run_state("c1", "att_1") is None, "a deleted run came back")
        _expect(await store.get_run_state("c1", "att_2") == blob, "a delete removed another's")
        await store.delete_run_state("c1", "att_1")  # deleting what is gone is fine
        not_text: Any = {"not": "text"}
        await _raises(
            StoreError, "a run state that is not text", store.put_run_state("c1", "att_3", not_text)
        )
        _expect(await store.get_run_state("c1", "att_3") is None, "a refused run state was kept")


async def check_close(factory: StoreFactory) -> None:
    """``aclose`` is idempotent, and a closed store refuses work with StoreError."""
    store = await factory()
    try:
        await store.create_conversation("c1", strategy="replay")
    finally:
        await store.aclose()
    await store.aclose()
    await _raises(StoreError, "a call after aclose", store.get_conversation("c1"))
    await _raises(StoreError, "a write after aclose", store.create_conversation("c2", strategy="x"))


# -- ledger capability -----------------------------------------------------------------------


async def check_ledger_versions(factory: StoreFactory) -> None:
    """Ledger versions start at 1 and grow by one; a stale version writes nothing."""
    async with _capable(factory, LedgerStore, "ledger") as store:
        _expect(await store.get_ledger("k1") is None, "a new store has a ledger")
        version = await store.put_ledger(
            "k1", "first", expected_version=0, holder="w1", held_until=100.5
        )
        _expect(version == 1, f"a first ledger is at version {version}, not 1")
        record = await store.get_ledger("k1")
        _expect(record is not None, "the written ledger is missing")
        if record is not None:
            got = (record.blob, record.version, record.holder, record.held_until)
            _expect(got == ("first", 1, "w1", 100.5), f"the ledger changed in the store: {got}")
        version = await store.put_ledger(
            "k1", "second ☕", expected_version=1, holder=None, held_until=None
        )
        _expect(version == 2, f"a second write is at version {version}, not 2")
        for stale in (0, 1, 3):
            await _raises(
                ConcurrentUpdateError,
                f"a write expecting version {stale}",
                store.put_ledger("k1", "lost", expected_version=stale, holder="w2", held_until=1.0),
            )
        record = await store.get_ledger("k1")
        got_after = None if record is None else (record.blob, record.version, record.holder)
        _expect(got_after == ("second ☕", 2, None), f"a lost write changed it: {got_after}")
        _expect(await store.get_ledger("k2") is None, "ledgers are not kept apart by key")
        not_text: Any = 42
        await _raises(
            StoreError,
            "a ledger that is not text",
            store.put_ledger("k3", not_text, expected_version=0, holder=None, held_until=None),
        )
        _expect(await store.get_ledger("k3") is None, "a refused ledger was kept")


async def check_ledger_delete(factory: StoreFactory) -> None:
    """``delete_ledger`` forgets one key; ``delete_conversation`` forgets the same-named one."""
    async with _capable(factory, LedgerStore, "ledger") as store:
        await store.put_ledger("k1", "x", expected_version=0, holder=None, held_until=None)
        await store.put_ledger("k2", "y", expected_version=0, holder=None, held_until=None)
        await store.delete_ledger("k1")
        await store.delete_ledger("k1")  # deleting what is gone is fine
        _expect(await store.get_ledger("k1") is None, "a deleted ledger came back")
        _expect(await store.get_ledger("k2") is not None, "a delete removed another key")
        version = await store.put_ledger(
            "k1", "again", expected_version=0, holder=None, held_until=None
        )
        _expect(version == 1, f"a ledger written after a delete is at version {version}")
        await store.create_conversation("c1", strategy="previous_response")
        await store.put_ledger("c1", "ledger", expected_version=0, holder="w", held_until=9.0)
        await store.delete_conversation("c1")
        _expect(await store.get_ledger("c1") is None, "delete_conversation kept its ledger")
        _expect(await store.get_ledger("k2") is not None, "delete_conversation removed another")


async def check_ledger_concurrent_writers(factory: StoreFactory) -> None:
    """Two writers racing from the same version on one store: exactly one wins."""
    async with _capable(factory, LedgerStore, "ledger") as store:
        await store.put_ledger("k", "v1", expected_version=0, holder=None, held_until=None)
        results = await asyncio.gather(
            *(
                store.put_ledger("k", name, expected_version=1, holder=name, held_until=50.0)
                for name in ("w1", "w2")
            ),
            return_exceptions=True,
        )
        won = [name for name, r in zip(("w1", "w2"), results, strict=True) if r == 2]
        lost = [r for r in results if isinstance(r, ConcurrentUpdateError)]
        _expect(len(won) == 1 and len(lost) == 1, f"not exactly one winner: {results}")
        record = await store.get_ledger("k")
        stored = None if record is None else (record.blob, record.version, record.holder)
        _expect(stored == (won[0], 2, won[0]), f"the stored ledger is not the winner's: {stored}")


async def check_ledger_typed_ids(factory: StoreFactory) -> None:
    """Ledger keys that are not storable text are StoreError, with nothing written."""
    async with _capable(factory, LedgerStore, "ledger") as store:
        for bad in _BAD_IDS:
            await _raises(StoreError, f"get_ledger({bad!r})", store.get_ledger(bad))
            await _raises(
                StoreError,
                f"put_ledger({bad!r})",
                store.put_ledger(bad, "x", expected_version=0, holder=None, held_until=None),
                not_=(ConcurrentUpdateError,),
            )
            await _raises(StoreError, f"delete_ledger({bad!r})", store.delete_ledger(bad))


# -- token-count capability ------------------------------------------------------------------


async def check_token_counts(factory: StoreFactory) -> None:
    """Token counts round-trip per conversation and encoding, are replaced, and filtered."""
    async with _capable(factory, TokenCountStore, "token-count") as store:
        await store.create_conversation("c1", strategy="replay")
        await store.create_conversation("c2", strategy="replay")
        _expect(await store.get_token_counts("c1", "o200k_base") == {}, "new counts exist")
        await store.put_token_counts("c1", "o200k_base", {"m1": 5, "m2": 0, "m3": 12})
        await store.put_token_counts("c1", "cl100k_base", {"m1": 6})
        got = await store.get_token_counts("c1", "o200k_base")
        _expect(got == {"m1": 5, "m2": 0, "m3": 12}, f"counts changed in the store: {got}")
        await store.put_token_counts("c1", "o200k_base", {"m1": 7, "m4": 1})
        got = await store.get_token_counts("c1", "o200k_base")
        _expect(got == {"m1": 7, "m2": 0, "m3": 12, "m4": 1}, f"counts not merged: {got}")
        some = await store.get_token_counts("c1", "o200k_base", ["m3", "missing", "m1"])
        _expect(some == {"m3": 12, "m1": 7}, f"filtered counts: {some}")
        none = await store.get_token_counts("c1", "o200k_base", [])
        _expect(none == {}, f"an empty filter gave {none}")
        other = await store.get_token_counts("c1", "cl100k_base")
        _expect(other == {"m1": 6}, f"encodings are not kept apart: {other}")
        _expect(await store.get_token_counts("c2", "o200k_base") == {}, "counts leaked to c2")
        bad_counts: tuple[Any, ...] = ({"m9": -1}, {"m9": True}, {"m9": 1.5}, {"m9": "3"})
        for counts in bad_counts:
            await _raises(
                StoreError,
                f"counts {counts!r}",
                store.put_token_counts("c1", "o200k_base", counts),
            )
        _expect("m9" not in await store.get_token_counts("c1", "o200k_base"), "a bad count kept")
        await _raises(
            ConversationNotFoundError,
            "put_token_counts on an unknown conversation",
            store.put_token_counts("nope", "o200k_base", {"m1": 1}),
        )
        await _raises(
            ConversationNotFoundError,
            "get_token_counts on an unknown conversation",
            store.get_token_counts("nope", "o200k_base"),
        )
        await store.delete_conversation("c1")
        await store.create_conversation("c1", strategy="replay")
        after = await store.get_token_counts("c1", "o200k_base")
        _expect(after == {}, f"delete_conversation kept token counts: {after}")


async def check_token_typed_ids(factory: StoreFactory) -> None:
    """Token-count ids (conversation, encoding, node) that are not storable text: StoreError."""
    async with _capable(factory, TokenCountStore, "token-count") as store:
        await store.create_conversation("c1", strategy="replay")
        for bad in _BAD_IDS:
            for name, call in _token_calls(bad).items():
                await _raises(
                    StoreError,
                    f"{name} with {bad!r}",
                    call(store),
                    not_=(ConversationNotFoundError,),
                )
        _expect(await store.get_token_counts("c1", "enc") == {}, "a bad id wrote a count")


def _token_calls(bad: Any) -> dict[str, Callable[[_FullStore], Awaitable[object]]]:
    calls: dict[str, Callable[[_FullStore], Awaitable[object]]] = {
        "put_token_counts(conversation)": lambda s: s.put_token_counts(bad, "enc", {"n1": 1}),
        "put_token_counts(encoding)": lambda s: s.put_token_counts("c1", bad, {"n1": 1}),
        "get_token_counts(conversation)": lambda s: s.get_token_counts(bad, "enc"),
        "get_token_counts(encoding)": lambda s: s.get_token_counts("c1", bad),
        "get_token_counts(node ids)": lambda s: s.get_token_counts("c1", "enc", [bad]),
    }
    if isinstance(bad, str):  # a list cannot be a dict key
        calls["put_token_counts(node id)"] = lambda s: s.put_token_counts(
            "c1", "enc", {"n1": 1, bad: 2}
        )
    return calls


CORE_CHECKS: tuple[Check, ...] = (
    check_protocol,
    check_conversations,
    check_unknown_conversation,
    check_nodes,
    check_isolation,
    check_load_graph,
    check_active_path,
    check_active_path_limit,
    check_head_compare_and_set,
    check_commit_is_atomic,
    check_commit_attempts,
    check_concurrent_commits,
    check_delete_conversation,
    check_cycles,
    check_typed_ids,
    check_attempts,
    check_run_states,
    check_close,
)
LEDGER_CHECKS: tuple[Check, ...] = (
    check_ledger_versions,
    check_ledger_delete,
    check_ledger_concurrent_writers,
    check_ledger_typed_ids,
)
TOKEN_CHECKS: tuple[Check, ...] = (check_token_counts, check_token_typed_ids)
CHECKS: tuple[Check, ...] = CORE_CHECKS + LEDGER_CHECKS + TOKEN_CHECKS


async def run_conformance(factory: StoreFactory) -> ConformanceReport:
    """Run every check; raise ConformanceError listing each one that failed.

    Returns what passed and what was skipped (capability checks on a store without them).
    """
    passed: list[str] = []
    skipped: dict[str, str] = {}
    failures: list[str] = []
    for check in CHECKS:
        try:
            await check(factory)
        except ConformanceSkip as skip:
            skipped[check.__name__] = str(skip)
        except Exception as exc:
            failures.append(f"{check.__name__}: {exc!r}")
        else:
            passed.append(check.__name__)
    if failures:
        raise ConformanceError("store failed conformance:\n" + "\n".join(failures))
    return ConformanceReport(tuple(passed), skipped)
