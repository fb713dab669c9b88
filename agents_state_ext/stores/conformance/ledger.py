"""Checks of the ledger capability (:class:`~agents_state_ext.stores.LedgerStore`)."""

from __future__ import annotations

import asyncio
from typing import Any

from ..._attempts import AttemptRecord
from ..._nodes import Node
from ...errors import ConcurrentUpdateError, FencedOutError, StoreError
from ..base import Fence, LedgerStore
from ._support import BAD_IDS, StoreFactory, capable, expect, raises, straight_path


async def check_ledger_versions(factory: StoreFactory) -> None:
    """Ledger versions start at 1 and grow by one; a stale version writes nothing."""
    async with capable(factory, LedgerStore, "ledger") as store:
        expect(await store.get_ledger("k1") is None, "a new store has a ledger")
        version = await store.put_ledger(
            "k1", "first", expected_version=0, holder="w1", held_until=100.5
        )
        expect(version == 1, f"a first ledger is at version {version}, not 1")
        record = await store.get_ledger("k1")
        expect(record is not None, "the written ledger is missing")
        if record is not None:
            got = (record.blob, record.version, record.holder, record.held_until)
            expect(got == ("first", 1, "w1", 100.5), f"the ledger changed in the store: {got}")
        version = await store.put_ledger(
            "k1", "second ☕", expected_version=1, holder=None, held_until=None
        )
        expect(version == 2, f"a second write is at version {version}, not 2")
        for stale in (0, 1, 3):
            await raises(
                ConcurrentUpdateError,
                f"a write expecting version {stale}",
                store.put_ledger("k1", "lost", expected_version=stale, holder="w2", held_until=1.0),
            )
        record = await store.get_ledger("k1")
        got_after = None if record is None else (record.blob, record.version, record.holder)
        expect(got_after == ("second ☕", 2, None), f"a lost write changed it: {got_after}")
        expect(await store.get_ledger("k2") is None, "ledgers are not kept apart by key")
        not_text: Any = 42
        await raises(
            StoreError,
            "a ledger that is not text",
            store.put_ledger("k3", not_text, expected_version=0, holder=None, held_until=None),
        )
        expect(await store.get_ledger("k3") is None, "a refused ledger was kept")


async def check_ledger_delete(factory: StoreFactory) -> None:
    """``delete_ledger`` forgets one key; ``delete_conversation`` forgets the same-named one."""
    async with capable(factory, LedgerStore, "ledger") as store:
        await store.put_ledger("k1", "x", expected_version=0, holder=None, held_until=None)
        await store.put_ledger("k2", "y", expected_version=0, holder=None, held_until=None)
        await store.delete_ledger("k1")
        await store.delete_ledger("k1")  # deleting what is gone is fine
        expect(await store.get_ledger("k1") is None, "a deleted ledger came back")
        expect(await store.get_ledger("k2") is not None, "a delete removed another key")
        version = await store.put_ledger(
            "k1", "again", expected_version=0, holder=None, held_until=None
        )
        expect(version == 1, f"a ledger written after a delete is at version {version}")
        await store.create_conversation("c1", strategy="previous_response")
        await store.put_ledger("c1", "ledger", expected_version=0, holder="w", held_until=9.0)
        await store.delete_conversation("c1")
        expect(await store.get_ledger("c1") is None, "delete_conversation kept its ledger")
        expect(await store.get_ledger("k2") is not None, "delete_conversation removed another")


async def check_ledger_concurrent_writers(factory: StoreFactory) -> None:
    """Two writers racing from the same version on one store: exactly one wins."""
    async with capable(factory, LedgerStore, "ledger") as store:
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
        expect(len(won) == 1 and len(lost) == 1, f"not exactly one winner: {results}")
        record = await store.get_ledger("k")
        stored = None if record is None else (record.blob, record.version, record.holder)
        expect(stored == (won[0], 2, won[0]), f"the stored ledger is not the winner's: {stored}")


async def check_ledger_typed_ids(factory: StoreFactory) -> None:
    """Ledger keys that are not storable text are StoreError, with nothing written."""
    async with capable(factory, LedgerStore, "ledger") as store:
        for bad in BAD_IDS:
            await raises(StoreError, f"get_ledger({bad!r})", store.get_ledger(bad))
            await raises(
                StoreError,
                f"put_ledger({bad!r})",
                store.put_ledger(bad, "x", expected_version=0, holder=None, held_until=None),
                not_=(ConcurrentUpdateError,),
            )
            await raises(StoreError, f"delete_ledger({bad!r})", store.delete_ledger(bad))


async def check_fenced_commit(factory: StoreFactory) -> None:
    """A commit under a fence writes only while the fence's ledger is at the fence's token."""
    async with capable(factory, LedgerStore, "ledger") as store:
        nodes = straight_path(3)
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", nodes[:1], expected_head=None, new_head="n0")
        await raises(
            FencedOutError,
            "a commit fenced by a ledger that was never written",
            store.commit("c1", nodes[1:2], expected_head="n0", new_head="n1", fence=Fence("L", 1)),
        )
        token = await store.put_ledger(
            "L", "lease", expected_version=0, holder="w1", held_until=9.0
        )
        record = AttemptRecord(message_id="n2", attempt_id="a1", status="complete")
        await store.commit(
            "c1", nodes[1:2], expected_head="n0", new_head="n1", fence=Fence("L", token)
        )
        expect(await store.get_head("c1") == "n1", "a commit under a live fence was not written")
        taken = await store.put_ledger(
            "L", "taken over", expected_version=token, holder="w2", held_until=9.0
        )
        await raises(
            FencedOutError,
            "a commit under a fence whose ledger moved on",
            store.commit(
                "c1",
                nodes[2:3],
                expected_head="n1",
                new_head="n2",
                attempts=[record],
                fence=Fence("L", token),
            ),
        )
        await raises(
            FencedOutError,
            "a commit fenced out and expecting a stale head (the fence is checked first)",
            store.commit("c1", [], expected_head="n0", new_head="n0", fence=Fence("L", token)),
        )
        expect(await store.get_head("c1") == "n1", "a fenced-out commit moved the head")
        expect(
            [n.id for n in (await store.load_graph("c1")).nodes()] == ["n0", "n1"],
            "a fenced-out commit wrote its nodes",
        )
        expect(await store.list_attempts("c1") == [], "a fenced-out commit wrote its attempts")
        await store.commit(
            "c1", nodes[2:3], expected_head="n1", new_head="n2", fence=Fence("L", taken)
        )
        expect(await store.get_head("c1") == "n2", "the new holder's fenced commit was refused")
        for bad in (Fence("L", 0), Fence("", taken), "L"):
            wrong: Any = bad
            await raises(
                StoreError,
                f"a commit with fence {bad!r}",
                store.commit("c1", [], expected_head="n2", new_head="n2", fence=wrong),
                not_=(ConcurrentUpdateError,),
            )


async def check_fence_against_takeover(factory: StoreFactory) -> None:
    """A fenced commit racing a takeover of its fence: the takeover always lands, and the
    commit is written only if it was ordered before it (never after it, never in part)."""
    async with capable(factory, LedgerStore, "ledger") as store:
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", straight_path(1), expected_head=None, new_head="n0")
        head = "n0"

        async def take_over(key: str, token: int) -> tuple[int, str | None]:
            version = await store.put_ledger(
                key, "l2", expected_version=token, holder="w2", held_until=9.0
            )
            return version, await store.get_head("c1")  # what the new holder finds

        for round_ in range(1, 9):
            key = f"L{round_}"
            token = await store.put_ledger(key, "l", expected_version=0, holder="w1", held_until=9)
            node = Node(f"r{round_}", head, "user", "complete", [{"content": str(round_)}])
            fence = Fence(key, token)
            commit, taken = await asyncio.gather(
                store.commit("c1", [node], expected_head=head, new_head=node.id, fence=fence),
                take_over(key, token),
                return_exceptions=True,
            )
            expect(
                isinstance(taken, tuple) and taken[0] == token + 1,
                f"the takeover racing a fenced commit failed: {taken!r}",
            )
            stored = await store.get_head("c1")
            if commit is None:
                expect(stored == node.id, "a fenced commit that succeeded is not stored")
                expect(
                    isinstance(taken, tuple) and taken[1] == node.id,
                    "a fenced commit was written after its fence was taken over",
                )
                head = node.id
            else:
                expect(
                    isinstance(commit, FencedOutError),
                    f"a fenced commit losing to a takeover raised {commit!r}",
                )
                expect(stored == head, "a fenced-out commit moved the head")
