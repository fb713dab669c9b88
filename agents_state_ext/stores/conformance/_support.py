"""What the conformance checks share: the errors, the types, the sample graph, small helpers.

The checks are written with ``expect`` and ``raises`` rather than ``assert``, so they also run
under ``python -O``.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from ..._graph import ConversationGraph
from ..._nodes import Node, Role
from ...errors import ConformanceError, ConformanceSkip
from ..base import ConversationStore, LedgerStore, TokenCountStore

StoreFactory = Callable[[], Awaitable[ConversationStore]]
"""An async callable returning a new, empty store."""
Check = Callable[[StoreFactory], Awaitable[None]]
"""One conformance check."""

# Ids no backend may accept: a lone surrogate (not UTF-8), a NUL, empty text, not text.
BAD_IDS: tuple[Any, ...] = ("\ud800", "a\x00b", "", ["c1"])


@dataclass(frozen=True)
class ConformanceReport:
    """What :func:`run_conformance` ran: the checks passed, and the skipped ones with why."""

    passed: tuple[str, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)


class FullStore(ConversationStore, LedgerStore, TokenCountStore, Protocol):
    """For type checking only: a store with every capability."""


def expect(condition: bool, message: str) -> None:
    """Raise ``ConformanceError(message)`` unless ``condition`` holds."""
    if not condition:
        raise ConformanceError(message)


async def raises(
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
async def opened(factory: StoreFactory) -> AsyncIterator[ConversationStore]:
    """A new store from ``factory``, closed on the way out."""
    store = await factory()
    try:
        yield store
    finally:
        await store.aclose()


@asynccontextmanager
async def capable(
    factory: StoreFactory, capability: type[Any], name: str
) -> AsyncIterator[FullStore]:
    """A new store that has ``capability``; ``ConformanceSkip`` (the store closed) if not."""
    store = await factory()
    try:
        if not isinstance(store, capability):
            raise ConformanceSkip(f"{type(store).__name__} has no {name} capability")
        yield cast(FullStore, store)  # checked just above, one capability at a time
    finally:
        await store.aclose()


def as_dicts(nodes: list[Node]) -> list[dict[str, Any]]:
    """The nodes as plain dicts, to compare paths by value."""
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


async def store_sample(store: ConversationStore, conversation_id: str = "c1") -> ConversationGraph:
    """Create ``conversation_id`` in ``store`` holding :func:`sample_graph`, and return it."""
    graph = sample_graph(conversation_id)
    await store.create_conversation(conversation_id, strategy="replay")
    head = graph.active_leaf
    await store.commit(conversation_id, graph.take_changes(), expected_head=None, new_head=head)
    return graph


def straight_path(length: int, prefix: str = "n") -> list[Node]:
    """A straight path of ``length`` nodes, root first: n0 <- n1 <- ..."""
    nodes = [Node(f"{prefix}0", None, "system", "complete", [{"content": "0"}])]
    for i in range(1, length):
        role: Role = "user" if i % 2 else "assistant"
        nodes.append(
            Node(f"{prefix}{i}", f"{prefix}{i - 1}", role, "complete", [{"content": str(i)}])
        )
    return nodes
