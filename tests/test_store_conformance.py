"""Every store passes the one conformance suite, and the suite catches a broken store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from _backends import (
    BACKENDS,
    postgres_cleanup,
    postgres_factory,
    postgres_url,
    redis_cleanup,
    redis_factory,
    redis_url,
    sqlite_file_factory,
)
from _outage import FaultProxy, ProxyOutage

from agents_state_ext._attempts import AttemptRecord
from agents_state_ext._graph import ConversationGraph
from agents_state_ext._nodes import Node
from agents_state_ext.errors import ConcurrentUpdateError, FencedOutError, StoreError
from agents_state_ext.stores import ConversationStore, Fence, InMemoryStore, LedgerRecord
from agents_state_ext.stores.conformance import (
    CHECKS,
    CORE_CHECKS,
    LEDGER_CHECKS,
    NETWORK_CHECKS,
    TOKEN_CHECKS,
    Check,
    ConformanceError,
    ConformanceSkip,
    check_active_path_limit,
    check_attempts,
    check_commit_attempts,
    check_commit_is_atomic,
    check_concurrent_commits,
    check_cycles,
    check_delete_conversation,
    check_fence_against_takeover,
    check_fenced_commit,
    check_ledger_concurrent_writers,
    check_ledger_versions,
    check_orphan_parent_refused,
    check_token_counts,
    check_typed_ids,
    run_conformance,
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_store_conformance(backend: str, check: Check, tmp_path: Path) -> None:
    factory = BACKENDS[backend](tmp_path)
    try:
        await check(factory)
    except ConformanceSkip as skip:  # pragma: no cover - every shipped store has both
        pytest.fail(f"a shipped store lacks a capability: {skip}")
    finally:
        await postgres_cleanup()
        await redis_cleanup()


NETWORK_BACKENDS = {
    "postgres": (postgres_url, postgres_factory, {"timeout": 1.0, "statement_timeout": 2.0}),
    "redis": (redis_url, redis_factory, {"socket_timeout": 2.0}),
}


@pytest.mark.parametrize("check", NETWORK_CHECKS, ids=lambda check: check.__name__)
@pytest.mark.parametrize("backend", list(NETWORK_BACKENDS))
async def test_network_store_conformance(backend: str, check: Any, tmp_path: Path) -> None:
    """Behind a proxy that can cut them off their server (the check cuts, then restores)."""
    address, factory_on, options = NETWORK_BACKENDS[backend]
    url = address()
    where = urlsplit(url)
    proxy = await FaultProxy(where.port or 0, where.hostname or "127.0.0.1").start()
    try:
        await check(factory_on(tmp_path, proxy.proxied(url), **options), ProxyOutage(proxy))
    finally:
        await proxy.aclose()
        await postgres_cleanup()
        await redis_cleanup()


def test_checks_are_grouped_core_ledger_tokens() -> None:
    assert CHECKS == CORE_CHECKS + LEDGER_CHECKS + TOKEN_CHECKS
    assert len({check.__name__ for check in CHECKS}) == len(CHECKS)


async def test_run_conformance_runs_every_check(tmp_path: Path) -> None:
    async def memory() -> ConversationStore:
        return InMemoryStore()

    for factory in (memory, sqlite_file_factory(tmp_path)):
        report = await run_conformance(factory)
        assert report.passed == tuple(check.__name__ for check in CHECKS)
        assert report.skipped == {}


# -- broken stores the suite must catch ----------------------------------------------------------


class NoCompareAndSet(InMemoryStore):
    """Commits from whatever head is stored: the lost-update bug."""

    async def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
    ) -> None:
        await super().commit(
            conversation_id,
            nodes,
            expected_head=await self.get_head(conversation_id),
            new_head=new_head,
            attempts=attempts,
        )


class NewestFirstAttempts(InMemoryStore):
    async def list_attempts(
        self, conversation_id: str, *, message_id: str | None = None
    ) -> list[AttemptRecord]:
        found = await super().list_attempts(conversation_id, message_id=message_id)
        return found[::-1]


class AttemptsOutsideTheTransaction(InMemoryStore):
    """Writes the attempt records first, then tries the compare-and-set."""

    async def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
    ) -> None:
        for record in attempts:
            await self.put_attempt(conversation_id, record)
        await super().commit(conversation_id, nodes, expected_head=expected_head, new_head=new_head)


class LimitFromTheRoot(InMemoryStore):
    """Keeps the first N nodes of the path instead of the last N."""

    async def active_path(
        self, conversation_id: str, leaf_id: str | None = None, *, limit: int | None = None
    ) -> list[Node]:
        path = await super().active_path(conversation_id, leaf_id)
        return path if limit is None else path[:limit]


class KeepsEverythingOnDelete(InMemoryStore):
    """Forgets the conversation's listing but keeps its nodes and attempts."""

    def __init__(self) -> None:
        super().__init__()
        self.graveyard: dict[str, Any] = {}

    async def delete_conversation(self, conversation_id: str) -> None:
        await self.get_head(conversation_id)  # unknown: ConversationNotFoundError
        self.graveyard[conversation_id] = self._conversations.pop(conversation_id)

    async def create_conversation(
        self, conversation_id: str, *, strategy: str, meta: Any = None
    ) -> None:
        if conversation_id in self.graveyard:
            self._conversations[conversation_id] = self.graveyard.pop(conversation_id)
            return
        await super().create_conversation(conversation_id, strategy=strategy, meta=meta)


class GraphErrorsLeak(InMemoryStore):
    """Builds the graph itself and lets the graph's own GraphError out instead of StoreError."""

    async def load_graph(self, conversation_id: str) -> ConversationGraph:
        await self.get_head(conversation_id)
        conv = self._conversations[conversation_id]
        nodes = [await self.get_node(conversation_id, node_id) for node_id in conv.nodes]
        return ConversationGraph.from_nodes(
            nodes, conversation_id=conversation_id, active_leaf=conv.head
        )


class RawIds(InMemoryStore):
    """Treats a bad id as an unknown one (a not-found error) instead of refusing it."""

    async def get_node(self, conversation_id: str, node_id: str) -> Node:
        if not isinstance(node_id, str) or not node_id or "\x00" in node_id:
            raise KeyError(node_id)
        return await super().get_node(conversation_id, node_id)


class CheckThenAwaitThenWrite(InMemoryStore):
    """Checks the head, awaits, then writes: the check-then-act race between two commits."""

    async def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
    ) -> None:
        if await self.get_head(conversation_id) != expected_head:
            raise ConcurrentUpdateError("stale head")
        await asyncio.sleep(0)  # another commit runs here
        current = await self.get_head(conversation_id)
        await super().commit(
            conversation_id, nodes, expected_head=current, new_head=new_head, attempts=attempts
        )


class LedgerWithoutCompareAndSet(InMemoryStore):
    async def put_ledger(
        self,
        key: str,
        blob: str,
        *,
        expected_version: int,
        holder: str | None,
        held_until: float | None,
    ) -> int:
        stored = await self.get_ledger(key)
        version = 0 if stored is None else stored.version
        self._ledgers[key] = LedgerRecord(blob, version + 1, holder, held_until)
        return version + 1


class IgnoresFence(InMemoryStore):
    """Commits whatever the fence says: a worker that lost its lease still writes."""

    async def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
        fence: Fence | None = None,
    ) -> None:
        await super().commit(
            conversation_id,
            nodes,
            expected_head=expected_head,
            new_head=new_head,
            attempts=attempts,
        )


class FenceCheckedThenAwait(InMemoryStore):
    """Checks the fence, awaits, then writes: a takeover lands in between and is overwritten."""

    async def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
        fence: Fence | None = None,
    ) -> None:
        if fence is not None:
            lease = await self.get_ledger(fence.key)
            if lease is None or lease.version != fence.token:
                raise FencedOutError("fenced")
        await asyncio.sleep(0)  # the takeover runs here
        await super().commit(
            conversation_id,
            nodes,
            expected_head=expected_head,
            new_head=new_head,
            attempts=attempts,
        )


class AcceptsOrphans(InMemoryStore):
    """Stores a node whose parent it does not hold (as a root): what broke whole chats."""

    async def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
        fence: Fence | None = None,
    ) -> None:
        nodes = list(nodes)
        stored = await self.load_graph(conversation_id)
        known = {n.id for n in nodes} | {n.id for n in stored.nodes()}
        kept = [
            n if n.parent_id in known or n.parent_id is None
            else Node.from_dict(n.to_dict() | {"parent_id": None})
            for n in nodes
        ]  # fmt: skip
        await super().commit(
            conversation_id, kept, expected_head=expected_head, new_head=new_head,
            attempts=attempts, fence=fence,
        )  # fmt: skip


class TokenCountsIgnoreEncoding(InMemoryStore):
    async def get_token_counts(
        self, conversation_id: str, encoding: str, node_ids: Iterable[str] | None = None
    ) -> dict[str, int]:
        merged: dict[str, int] = {}
        for name in ("o200k_base", "cl100k_base"):
            merged.update(await super().get_token_counts(conversation_id, name, node_ids))
        return merged


BROKEN: list[tuple[type[InMemoryStore], Check]] = [
    (NoCompareAndSet, check_commit_is_atomic),
    (AcceptsOrphans, check_orphan_parent_refused),
    (NewestFirstAttempts, check_attempts),
    (AttemptsOutsideTheTransaction, check_commit_attempts),
    (LimitFromTheRoot, check_active_path_limit),
    (KeepsEverythingOnDelete, check_delete_conversation),
    (GraphErrorsLeak, check_cycles),
    (RawIds, check_typed_ids),
    (CheckThenAwaitThenWrite, check_concurrent_commits),
    (LedgerWithoutCompareAndSet, check_ledger_versions),
    (LedgerWithoutCompareAndSet, check_ledger_concurrent_writers),
    (TokenCountsIgnoreEncoding, check_token_counts),
    (IgnoresFence, check_fenced_commit),
    (FenceCheckedThenAwait, check_fence_against_takeover),
]


@pytest.mark.parametrize(
    ("store", "check"), BROKEN, ids=[f"{s.__name__}-{c.__name__}" for s, c in BROKEN]
)
async def test_the_suite_catches_a_broken_store(store: type[InMemoryStore], check: Check) -> None:
    async def factory() -> ConversationStore:
        return store()

    with pytest.raises(ConformanceError):
        await check(factory)
    with pytest.raises(ConformanceError, match=check.__name__):
        await run_conformance(factory)


# -- capabilities: a store without them passes those checks by skipping, visibly -----------------


class CoreOnly(InMemoryStore):
    """The core protocol only: the capability methods are hidden (``None`` is "absent")."""

    get_ledger = put_ledger = delete_ledger = None  # type: ignore[assignment]
    put_token_counts = get_token_counts = None  # type: ignore[assignment]


async def test_capability_checks_skip_a_store_without_the_capability() -> None:
    async def factory() -> ConversationStore:
        return CoreOnly()

    for check in LEDGER_CHECKS + TOKEN_CHECKS:
        with pytest.raises(ConformanceSkip, match="capability"):
            await check(factory)
    report = await run_conformance(factory)
    assert report.passed == tuple(check.__name__ for check in CORE_CHECKS)
    assert set(report.skipped) == {check.__name__ for check in LEDGER_CHECKS + TOKEN_CHECKS}
    assert all("has no" in reason for reason in report.skipped.values())


async def test_a_capability_check_closes_the_store_it_skips() -> None:
    opened: list[ConversationStore] = []

    async def factory() -> ConversationStore:
        opened.append(CoreOnly())
        return opened[-1]

    with pytest.raises(ConformanceSkip):
        await LEDGER_CHECKS[0](factory)
    with pytest.raises(StoreError, match="closed"):
        await opened[0].list_conversations()


async def test_every_check_closes_what_it_opens() -> None:
    opened: list[ConversationStore] = []

    async def factory() -> ConversationStore:
        opened.append(InMemoryStore())
        return opened[-1]

    await run_conformance(factory)
    assert opened
    for store in opened:
        with pytest.raises(StoreError, match="closed"):
            await store.list_conversations()
